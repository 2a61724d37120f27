"""Each recipe rule once (golive/profile/recipe.py): every rule function both ways (a healthy station keeps it; a
station broken in exactly that way gets the finding, its words checked), and the agreement between its two consumers:
on the same station facts, the check and `golive profile capture` both ask the rule function, and both decide as it
answers — a check fails exactly where a capture puts the station on its review list."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

import golive.profile.recipe as recipe_rules
from golive.core.verdict import Finding
from golive.day2.captured import Capture, Collector, Observed
from golive.day2.endpoint_values import capture_endpoint
from golive.day2.host_values import capture_host
from golive.facts.docker import ContainerFacts, DockerRun, parse_run
from golive.facts.systemd import UnitFacts, unit_from_file
from golive.facts.unit_files import merge_unit_files
from golive.profile.inventory import Station
from golive.profile.recipe import (
    INSPECTED,
    RUN_LINE,
    DockerRestart,
    docker_restart_policy,
    dram_node,
    dram_pin,
    kv_capacity_short,
    kv_capacity_tokens,
    pinned_flags,
    restart_problems,
    running_image_not_pinned,
    start_limit_problems,
    unit_not_enabled,
)
from golive.profile.schema import Numa, Profile
from golive.site.loader import load_profile
from golive.suites.endpoint import test_cache as cache_checks
from golive.suites.host import test_container as container_checks
from golive.suites.host import test_unit as unit_checks

RECIPE = load_profile("glm-5.3-flash-gb300").profile
SERVICE = RECIPE.service
assert SERVICE is not None
UNIT_PATH = f"/etc/systemd/system/{SERVICE.unit}"
IMAGE = "vllm/vllm-openai@sha256:" + "a" * 64
STATION = Station(name="gb300-a", phase="pre-start")


# --- station facts, healthy unless told -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """The facts a host check and a capture read: the unit file, its docker run line, the container."""

    restart: str = "on-failure"
    restart_sec: str = "60"
    burst: str = "3"
    interval: str = "3600"
    run_options: tuple[str, ...] = ()
    container_policy: str = "no"
    container_cpuset: str = ""
    enabled: bool = True
    numa_dram_node: int | None = 0  # the profile's numa.dram_node; None: `numa: null`


def unit_of(s: Setup) -> UnitFacts:
    text = (
        f"[Unit]\nStartLimitBurst={s.burst}\nStartLimitIntervalSec={s.interval}\n\n[Service]\n"
        f"Restart={s.restart}\nRestartSec={s.restart_sec}\nExecStartPre={SERVICE.prestart}\n"
        f"ExecStart=/usr/bin/docker run --rm --name {SERVICE.container} --gpus all {' '.join(s.run_options)} "
        f"{IMAGE} --served-model-name glm-5.3-flash --port 8888\n"
    )
    sections, cleared = merge_unit_files([(UNIT_PATH, text)])
    return unit_from_file(sections, enabled=s.enabled, active="inactive", cleared=cleared, files=[UNIT_PATH])


def profile_of(s: Setup) -> Profile:
    numa = None if s.numa_dram_node is None else Numa(dram_node=s.numa_dram_node)
    return RECIPE.model_copy(update={"numa": numa})


@dataclass
class FakeFacts:
    """StationFacts as far as the container and unit checks and capture_host read it."""

    unit: UnitFacts
    container: ContainerFacts | None
    unit_path: str = UNIT_PATH
    prestart_text: str | None = None
    container_name: str = SERVICE.container

    docker_run_script: None = None  # the docker run line is ExecStart's own

    @property
    def docker_run(self) -> DockerRun | None:
        return parse_run(self.unit.exec_start[0].argv)

    @property
    def docker_run_words(self) -> list[str]:
        return self.unit.exec_start[0].argv

    def docker_run_place(self) -> str:
        return f"ExecStart of {SERVICE.unit}"

    def read_script(self, path: str) -> str | None:
        return self.prestart_text if path == SERVICE.prestart else None


def facts_of(s: Setup) -> FakeFacts:
    container = ContainerFacts(
        id="c0ffee",
        name=SERVICE.container,
        image_id="sha256:" + "b" * 64,
        config_image=IMAGE,
        args=[],
        restart_policy=s.container_policy,
        cpuset_mems=s.container_cpuset,
        running=False,
        status="exited",
        pid=0,
    )
    return FakeFacts(unit=unit_of(s), container=container)


# --- each rule function both ways -------------------------------------------------------------------------------------


def test_dram_node_is_the_profiles_else_node_0():
    assert dram_node(profile_of(Setup())) == 0
    assert dram_node(profile_of(Setup(numa_dram_node=2))) == 2
    assert dram_node(profile_of(Setup(numa_dram_node=None))) == 0  # no coherent GPU memory: node 0


@pytest.mark.parametrize(
    "station, found",
    [
        (Setup(), None),
        (Setup(run_options=("--cpuset-mems", "1")), None),  # the HBM node: not the trap this rule is about
        (Setup(run_options=("--cpuset-mems", "0")), "the serving container is confined to memory node 0"),
        (Setup(container_cpuset="0"), "the serving container is confined to memory node 0"),
        (Setup(run_options=("--cpuset-mems=2",), numa_dram_node=2), "confined to memory node 2"),
        (Setup(run_options=("--cpuset-mems=0",), numa_dram_node=2), None),
    ],
)
def test_dram_pin(station, found):
    facts = facts_of(station)
    assert facts.docker_run is not None
    pin = dram_pin(profile_of(station), facts.docker_run, facts.container)
    if found is None:
        assert pin is None
    else:
        assert pin is not None and found in str(pin) and pin.node == dram_node(profile_of(station))


@pytest.mark.parametrize(
    "station, found",
    [
        (Setup(), None),
        (Setup(run_options=("--restart=no",)), None),
        (Setup(run_options=("--restart=always",)), DockerRestart("always", RUN_LINE)),
        (Setup(run_options=("--restart", "unless-stopped")), DockerRestart("unless-stopped", RUN_LINE)),
        (Setup(container_policy="on-failure"), DockerRestart("on-failure", INSPECTED)),
    ],
)
def test_docker_restart_policy(station, found):
    facts = facts_of(station)
    assert facts.docker_run is not None
    assert docker_restart_policy(facts.docker_run, facts.container) == found
    if found:
        assert str(found) == f"docker restart policy {found.policy!r} ({found.where})"


def test_docker_restart_policy_without_a_container():
    run = parse_run(["docker", "run", "--restart=always", IMAGE])
    assert docker_restart_policy(run, None) == DockerRestart("always", RUN_LINE)
    assert docker_restart_policy(parse_run(["docker", "run", IMAGE]), None) is None


@pytest.mark.parametrize(
    "station, settings",
    [
        (Setup(), []),
        (Setup(restart="always"), ["Restart=on-failure"]),
        (Setup(restart_sec="5"), ["RestartSec=60"]),
        (Setup(restart="no", restart_sec="0"), ["Restart=on-failure", "RestartSec=60"]),
    ],
)
def test_restart_problems(station, settings):
    assert SERVICE is not None
    problems = restart_problems(unit_of(station), SERVICE)
    assert [p.setting for p in problems] == settings
    assert all(p.differs and p.got != p.want for p in problems)


@pytest.mark.parametrize(
    "station, settings",
    [
        (Setup(), []),
        (Setup(burst="5"), ["StartLimitBurst=3"]),
        (Setup(interval="0"), ["StartLimitIntervalSec=3600"]),
        (Setup(burst="0", interval="10"), ["StartLimitBurst=3", "StartLimitIntervalSec=3600"]),
    ],
)
def test_start_limit_problems(station, settings):
    assert SERVICE is not None
    assert [p.setting for p in start_limit_problems(unit_of(station), SERVICE)] == settings


def test_unit_not_enabled():
    assert unit_not_enabled(unit_of(Setup()), "x.service") is None
    assert unit_not_enabled(unit_of(Setup(enabled=False)), "x.service") == "x.service is disabled"
    unknown = replace(unit_of(Setup()), enabled=None)
    assert unit_not_enabled(unknown, "x.service") == "x.service is of unknown state"


@pytest.mark.parametrize(
    "info, tokens",
    [
        ({"kv_cache_size_tokens": "5933986"}, 5933986),
        ({"num_gpu_blocks": "50000", "block_size": "128"}, 6400000),  # older vLLM
        ({"kv_cache_size_tokens": "None", "num_gpu_blocks": "10", "block_size": "16"}, 160),
        ({"num_gpu_blocks": "50000"}, None),  # no block size: no capacity, never 0
        ({"kv_cache_size_tokens": "lots"}, None),
        ({}, None),
    ],
)
def test_kv_capacity_tokens(info, tokens):
    assert kv_capacity_tokens(info) == tokens


def test_kv_capacity_short():
    assert kv_capacity_short(5933986, 5933986) is None
    assert kv_capacity_short(6000000, None) is None  # no floor: nothing to be short of
    assert kv_capacity_short(5000000, 5933986) == "KV cache holds 5,000,000 tokens, below the floor of 5,933,986"


def test_pinned_flags_are_the_profiles_set_values():
    pinned = pinned_flags(RECIPE)
    assert pinned["max-model-len"] == RECIPE.vllm.max_model_len
    assert pinned["tool-call-parser"] == RECIPE.vllm.tool_call_parser
    assert None not in pinned.values()
    unset = RECIPE.model_copy(update={"vllm": RECIPE.vllm.model_copy(update={"kv_cache_dtype": None})})
    assert "kv-cache-dtype" not in pinned_flags(unset)


# --- agreement: the check and the capture ask the same function and decide as it answers -----------------------------


@dataclass
class Spy:
    """Every module that imported the rule by name gets this wrapper instead; it records what the rule answered."""

    rule: Callable[..., Any]
    answers: list[Any] = field(default_factory=list)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        answer = self.rule(*args, **kwargs)
        self.answers.append(answer)
        return answer


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Spy]:
    def install(name: str) -> Spy:
        original = getattr(recipe_rules, name)
        wrapper = Spy(original)
        for module in list(sys.modules.values()):
            # the module's own names only: getattr on a lazy module (transformers') imports what it names
            if vars(module).get(name) is original:
                monkeypatch.setattr(module, name, wrapper)
        return wrapper

    return install


def _check(run_check: Callable[[], None]) -> str | None:
    """The check's decision: its finding's Found line, None when it passes."""
    try:
        run_check()
    except Finding as finding:
        return finding.found
    return None


def _host_capture(facts: FakeFacts, profile: Profile, monkeypatch: pytest.MonkeyPatch) -> Capture:
    monkeypatch.setattr("golive.station.host.StationFacts", lambda *_: facts)
    result = Capture(station=STATION.name, recipe=profile.name, why="test")
    capture_host(Collector(profile, result), None, STATION, Observed())
    return result


def _said(result: Capture, *words: str) -> list[str]:
    return [line for line in result.review + result.cannot_keep if any(w in line for w in words)]


@dataclass(frozen=True)
class Rule:
    """One rule: the function both consumers ask, how the check runs on the facts, and how the capture's review
    list names it."""

    function: str
    check: Callable[[FakeFacts, Profile], None]
    capture_words: tuple[str, ...]


RULES = {
    "docker restart policy": Rule(
        "docker_restart_policy",
        lambda f, p: container_checks.test_docker_has_no_restart_policy(f, f.docker_run, p.service),
        ("no docker restart policy",),
    ),
    "container not pinned to the DRAM node": Rule(
        "dram_pin",
        lambda f, p: container_checks.test_container_not_pinned_to_dram_node(f, f.docker_run, p, p.service),
        ("confined to memory node",),
    ),
    "Restart= and RestartSec=": Rule(
        "restart_settings",
        lambda f, p: unit_checks.test_unit_restarts_on_failure_after_delay(f, p.service, p),
        ("(service.restart,", "(service.restart_sec_s,"),
    ),
    "start limit": Rule(
        "start_limit_settings",
        lambda f, p: unit_checks.test_unit_caps_starts_per_interval(f, p.service, p),
        ("(service.start_limit_burst,", "(service.start_limit_interval_s,"),
    ),
    "unit enabled": Rule(
        "unit_not_enabled",
        lambda f, p: unit_checks.test_unit_is_enabled_and_active(f, p.service, STATION),
        ("the recipe enables it",),
    ),
}

# rule -> (station facts, broken in exactly that way or healthy, whether the rule finds a problem)
AGREEMENT = [
    ("docker restart policy", Setup(), False),
    ("docker restart policy", Setup(run_options=("--restart=always",)), True),
    ("docker restart policy", Setup(container_policy="unless-stopped"), True),
    ("container not pinned to the DRAM node", Setup(), False),
    ("container not pinned to the DRAM node", Setup(run_options=("--cpuset-mems", "0")), True),
    ("container not pinned to the DRAM node", Setup(container_cpuset="0"), True),
    ("container not pinned to the DRAM node", Setup(run_options=("--cpuset-mems=2",), numa_dram_node=2), True),
    ("container not pinned to the DRAM node", Setup(run_options=("--cpuset-mems=0",), numa_dram_node=2), False),
    ("container not pinned to the DRAM node", Setup(run_options=("--cpuset-mems=0",), numa_dram_node=None), True),
    ("Restart= and RestartSec=", Setup(), False),
    ("Restart= and RestartSec=", Setup(restart="always"), True),
    ("Restart= and RestartSec=", Setup(restart_sec="0"), True),
    ("start limit", Setup(), False),
    ("start limit", Setup(burst="5"), True),
    ("start limit", Setup(interval="0"), True),
    ("unit enabled", Setup(), False),
    ("unit enabled", Setup(enabled=False), True),
]


def _ids() -> Iterator[str]:
    for name, station, _broken in AGREEMENT:
        changed = {k: v for k, v in vars(station).items() if v != getattr(Setup(), k)}
        yield f"{name}: {changed or 'healthy'}"


def test_every_rule_has_a_healthy_and_a_broken_case():
    for name in RULES:
        assert {broken for rule, _, broken in AGREEMENT if rule == name} == {True, False}, name


@pytest.mark.parametrize("name, station, broken", AGREEMENT, ids=list(_ids()))
def test_check_and_capture_decide_by_the_same_rule(name, station, broken, spy, monkeypatch):
    rule = RULES[name]
    facts, profile = facts_of(station), profile_of(station)
    asked = spy(rule.function)

    found = _check(lambda: rule.check(facts, profile))
    by_check = list(asked.answers)
    captured = _host_capture(facts, profile, monkeypatch)
    by_capture = asked.answers[len(by_check) :]

    assert by_check and by_capture, "both the check and the capture ask the rule"
    assert by_check == by_capture, "the same facts give the same answer"
    problem = any(a.differs for a in by_check[0]) if isinstance(by_check[0], list) else by_check[0] is not None
    assert problem is broken
    assert (found is not None) is broken, found
    assert bool(_said(captured, *rule.capture_words)) is broken, captured.review + captured.cannot_keep
    if broken and not isinstance(by_check[0], list):
        # the check's Found line and the capture's review line say the rule's own words
        assert str(by_check[0]).split(" (")[0] in (found or "")


KV_AGREEMENT = [
    ({"kv_cache_size_tokens": "5933986"}, False),
    ({"kv_cache_size_tokens": "9000000"}, False),
    ({"kv_cache_size_tokens": "5000000"}, True),
    ({"num_gpu_blocks": "30000", "block_size": "128"}, True),  # 3.84 M tokens, published the older way
]


class _Endpoint:
    def __init__(self, info: dict[str, str]) -> None:
        self.info = info

    def metrics(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        return {"vllm:cache_config_info": [(self.info, 1.0)]}


@pytest.mark.parametrize("info, broken", KV_AGREEMENT)
def test_kv_capacity_check_and_capture_decide_by_the_same_rule(info, broken, spy):
    tokens_asked, short_asked = spy("kv_capacity_tokens"), spy("kv_capacity_short")

    found = _check(
        lambda: cache_checks.test_kv_cache_capacity_meets_floor(
            _Endpoint(info),
            RECIPE,
            lambda *a, **k: None,
        )
    )
    result = Capture(station=STATION.name, recipe=RECIPE.name, why="test")
    capture_endpoint(Collector(RECIPE, result), Observed(endpoint="http://gb300-a:8888", cache_info=info))

    assert len(tokens_asked.answers) == 2 and len(set(tokens_asked.answers)) == 1
    assert len(short_asked.answers) == 2 and len(set(short_asked.answers)) == 1
    short = short_asked.answers[0]
    assert (short is not None) is broken
    assert (found is not None) is broken and (not broken or short in (found or ""))
    assert bool(_said(result, "(endpoint.kv_cache_tokens_floor,")) is broken, result.review


@pytest.mark.parametrize(
    ("unit_pin", "profile_pin", "running", "wanted"),
    [
        ("sha256:aaa", None, {"sha256:aaa"}, None),  # the unit's pin runs
        ("sha256:aaa", "sha256:bbb", {"sha256:aaa"}, None),  # the unit's pin decides (the pin check compares the two)
        ("sha256:aaa", None, {"sha256:old"}, "sha256:aaa"),  # a re-pushed tag: an older image still runs
        (None, "sha256:bbb", {"sha256:bbb"}, None),  # a tag in the unit: the profile's pin runs
        (None, "sha256:bbb", set(), "sha256:bbb"),  # an image with no digest at all
        (None, None, {"sha256:old"}, None),  # nothing pinned: the pin check fails that station instead
    ],
)
def test_running_image_not_pinned(unit_pin, profile_pin, running, wanted):
    """The check (test_running_container_runs_pinned_image) and capture (host_values) ask this one rule."""
    image = "vllm/vllm-openai" + (f"@{unit_pin}" if unit_pin else ":latest")
    run = parse_run(["/usr/bin/docker", "run", "--rm", "--name", "glm53-flash", image, "--model", "/m"])
    assert running_image_not_pinned(run, profile_pin, running) == wanted


def test_capture_review_says_a_port_as_a_port_and_a_size_with_separators():
    from golive.day2.captured import shown

    assert (shown(46381, "port"), shown(1048576, "max_model_len"), shown(0.94), shown(True)) == (
        "46381",
        "1,048,576",
        "0.94",
        "on",
    )
