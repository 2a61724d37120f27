"""Bad input, fuzzed (hypothesis): the profile and inventory loaders, every facts parser and the load generator's
stream assembly either give a result or reject the input with their own one-line error; never another exception.

Bounded: ~200 examples a property, no deadline (a shared CI machine), the whole file under 20 s. At depth (CI's
fuzz step, .ci/run): GOLIVE_FUZZ_EXAMPLES=10000 runs every property 10,000 times, still derandomized (hypothesis
derives each property's seed from its name: the same examples every run, nothing to record but the count). To search
wider by hand: `pytest tests/unit/test_fuzz.py --hypothesis-seed=N` with `derandomize` off. Crashes found at depth are
kept below as @example cases.
"""

import atexit
import os
import shutil
import string
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from golive.endpoint.answers import load_answer_battery
from golive.endpoint.load_request import RequestTiming, SseParser, read_event
from golive.facts import FactError, bash, docker, exec_lines, gpu, nccl, net, systemd, systemd_env, unit_files, vllm
from golive.profile.waivers import load_waivers
from golive.site.loader import ConfigError, load_inventory, load_profile

# derandomized: CI sees the same examples every run (a red here is a regression, not luck); no example database
DEPTH = int(os.environ.get("GOLIVE_FUZZ_EXAMPLES") or 0)  # CI's fuzz step: 10000 examples a property
pytestmark = pytest.mark.fuzz  # CI's fuzz step runs these again at depth: `-m fuzz`


def fuzz(examples: int, share: float = 1.0) -> settings:
    """A property's bound in the default loop, or `share` of the depth CI's fuzz step asks for."""
    return settings(
        max_examples=int(DEPTH * share) or examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


FUZZ = fuzz(200)
# Structured inputs into one loader (a `load:` section, a station, waiver entries, battery cases, a CA path): a fifth
# of the depth, on top of the 2 × depth every loader gets from any text and any YAML structure (FUZZ). Each example
# costs ~10 ms of recursive generation here: at full depth these five alone took ~8 of the step's ~12 min.
FEW = fuzz(60, share=0.2)

# text with the characters real command output and YAML are made of, plus anything at all
LINES = st.text(alphabet=string.printable + "{}[]:;=,\"'-\t\n\u00e9\x00\x1b", max_size=400)
ANY_TEXT = st.one_of(LINES, st.text(max_size=200))
PROFILE_KEYS = [
    "profile",
    "extends",
    "vllm",
    "endpoint",
    "load",
    "security",
    "service",
    "cluster",
    "concurrency",
    "floors",
    "served_model_name",
    "max_model_len",
    "name",
    "stations",
    "endpoint",
    "host",
    "production",
    "layers",
    "waivers",
    "output",
    "ssh_config",
    "api_key_env",
    "phase",
    "role",
    "gate_concurrency",
]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True), ANY_TEXT)
NESTED = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(PROFILE_KEYS), st.text(max_size=10)), inner, max_size=5),
    ),
    max_leaves=20,
)

_DIR = Path(tempfile.mkdtemp(prefix="golive-fuzz-"))  # one file rewritten per example (not tmp_path: per test)
atexit.register(shutil.rmtree, _DIR, True)


def _one_line_or_loads(load, text: str) -> None:
    path = _DIR / "input.yaml"
    path.write_text(text, errors="surrogateescape")
    try:
        load(path)
    except ConfigError as exc:
        message = str(exc)
        assert message and "\n" not in message and "Traceback" not in message, message


LOADERS = [load_profile, load_inventory, load_waivers, load_answer_battery]
LOADER_IDS = ["profile", "inventory", "waivers", "battery"]


@pytest.mark.parametrize("load", LOADERS, ids=LOADER_IDS)
@FUZZ
@given(text=ANY_TEXT)
def test_loader_takes_any_text(load, text):
    _one_line_or_loads(load, text)


@pytest.mark.parametrize("load", LOADERS, ids=LOADER_IDS)
@FUZZ
@given(data=NESTED)
def test_loader_takes_any_yaml_structure(load, data):
    _one_line_or_loads(load, yaml.safe_dump(data, allow_unicode=True))


@FEW
@given(
    data=st.dictionaries(
        st.sampled_from(
            [
                "concurrency",
                "gate_concurrency",
                "repeats",
                "warmup",
                "max_requests",
                "max_concurrency",
                "tolerance",
                "floors",
                "output_tokens",
            ]
        ),
        NESTED,
    )
)
def test_profile_load_section_takes_any_values(data):
    _one_line_or_loads(load_profile, yaml.safe_dump({"extends": "reference-cpu", "load": data}))


@FEW
@given(
    station=st.dictionaries(
        st.sampled_from(
            ["name", "endpoint", "host", "production", "layers", "role", "phase", "profile", "api_key_env"]
        ),
        NESTED,
    )
)
def test_inventory_station_takes_any_values(station):
    _one_line_or_loads(load_inventory, yaml.safe_dump({"profile": "reference-cpu", "stations": [station]}))


WAIVER_KEYS = ["id", "check", "rule", "station", "owner", "expires", "justification", "waivers"]
BATTERY_KEYS = [
    "name",
    "description",
    "floor",
    "max_tokens",
    "cases",
    "id",
    "prompt",
    "messages",
    "expect",
    "exact",
    "contains",
    "one_of",
    "regex",
    "numeric",
    "tolerance",
    "not_contains",
    "role",
    "content",
]


@FEW
@given(entries=st.lists(st.dictionaries(st.sampled_from(WAIVER_KEYS), NESTED, max_size=7), max_size=3))
def test_waivers_take_any_entries(entries):
    _one_line_or_loads(load_waivers, yaml.safe_dump({"waivers": entries}, allow_unicode=True))


@FEW
@given(
    cases=st.lists(st.dictionaries(st.sampled_from(BATTERY_KEYS), NESTED, max_size=6), max_size=3),
    top=st.dictionaries(st.sampled_from(BATTERY_KEYS), NESTED, max_size=3),
)
def test_batteries_take_any_cases(cases, top):
    _one_line_or_loads(load_answer_battery, yaml.safe_dump({**top, "cases": cases}, allow_unicode=True))


@FEW
@given(ca_file=st.one_of(ANY_TEXT, st.sampled_from([".", "..", "/", "/dev/null", "/proc/self/mem", "x" * 300])))
def test_inventory_tls_ca_file_takes_any_text(ca_file):
    """A CA path golive cannot use (no file, a folder, not PEM, a NUL byte, too long) is one line, never a crash."""
    _one_line_or_loads(
        load_inventory,
        yaml.safe_dump(
            {
                "profile": "reference-cpu",
                "stations": [{"name": "s", "endpoint": "https://h:8443/v1", "tls_ca_file": ca_file}],
            }
        ),
    )


ARGV = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "docker",
                "run",
                "-c",
                "sh",
                "bash",
                "vllm",
                "serve",
                "--gpus",
                "-e",
                "--max-model-len",
                "--speculative-config",
                "--host",
                "-v",
                "--",
            ]
        ),
        ANY_TEXT,
    ),
    max_size=8,
)

# every parser of golive/facts, with what it is given on a station
PARSERS: dict[str, tuple[Callable[..., Any], Any]] = {
    "docker.parse_container_inspect": (docker.parse_container_inspect, st.tuples(ANY_TEXT)),
    "docker.parse_image_inspect": (docker.parse_image_inspect, st.tuples(ANY_TEXT)),
    "docker.parse_run": (docker.parse_run, st.tuples(ARGV)),
    "docker.is_docker_run": (docker.is_docker_run, st.tuples(ARGV)),
    "gpu.parse_query_csv": (gpu.parse_query_csv, st.tuples(ANY_TEXT, st.lists(st.text(max_size=8), max_size=4))),
    "gpu.mib": (gpu.mib, st.tuples(ANY_TEXT)),
    "gpu.normalize_bus_id": (gpu.normalize_bus_id, st.tuples(ANY_TEXT)),
    "gpu.parse_smi_q": (gpu.parse_smi_q, st.tuples(ANY_TEXT)),
    "gpu.parse_node_meminfo": (gpu.parse_node_meminfo, st.tuples(ANY_TEXT)),
    "gpu.parse_cpulist": (gpu.parse_cpulist, st.tuples(ANY_TEXT)),
    "gpu.parse_numa_status": (gpu.parse_numa_status, st.tuples(ANY_TEXT)),
    "gpu.parse_cgroup": (gpu.parse_cgroup, st.tuples(ANY_TEXT)),
    "gpu.container_id_in_cgroup": (gpu.container_id_in_cgroup, st.tuples(ANY_TEXT)),
    "nccl.parse_nccl_log": (nccl.parse_nccl_log, st.tuples(ANY_TEXT)),
    "nccl.parse_perf": (nccl.parse_perf, st.tuples(ANY_TEXT)),
    "net.parse_ip_addr": (net.parse_ip_addr, st.tuples(ANY_TEXT)),
    "net.parse_ip_route_get": (net.parse_ip_route_get, st.tuples(ANY_TEXT)),
    "net.parse_ethtool": (net.parse_ethtool, st.tuples(ANY_TEXT)),
    "net.parse_sys_speed": (net.parse_sys_speed, st.tuples(ANY_TEXT)),
    "net.parse_ping": (net.parse_ping, st.tuples(ANY_TEXT, st.integers(-1, 255))),
    "net.parse_ibv_devinfo": (net.parse_ibv_devinfo, st.tuples(ANY_TEXT)),
    "net.parse_sysfs_gid": (net.parse_sysfs_gid, st.tuples(st.integers(0, 300), ANY_TEXT, st.none() | ANY_TEXT)),
    "net.parse_env_file": (net.parse_env_file, st.tuples(ANY_TEXT | st.binary(max_size=200))),
    "bash.parse_script": (bash.parse_script, st.tuples(ANY_TEXT)),
    "bash.commands_of": (bash.commands_of, st.tuples(ARGV, st.just("unit"))),
    "systemd.parse_timespan": (systemd.parse_timespan, st.tuples(ANY_TEXT)),
    "systemd.parse_show+unit_from_show": (
        lambda text: systemd.unit_from_show(systemd.parse_show(text)),
        st.tuples(ANY_TEXT),
    ),
    "exec_lines.parse_show_exec": (exec_lines.parse_show_exec, st.tuples(ANY_TEXT)),
    "unit_files.parse_unit_file+systemd.unit_from_file": (
        lambda text: systemd.unit_from_file(unit_files.parse_unit_file(text), None, None),
        st.tuples(ANY_TEXT),
    ),
    "exec_lines.parse_unit_exec": (exec_lines.parse_unit_exec, st.tuples(ANY_TEXT)),
    "systemd_env.parse_env_file": (systemd_env.parse_env_file, st.tuples(ANY_TEXT, st.just("/etc/default/x"))),
    "systemd_env.parse_environment_line": (systemd_env.parse_environment_line, st.tuples(ANY_TEXT)),
    "systemd_env.parse_show_environment": (systemd_env.parse_show_environment, st.tuples(ANY_TEXT)),
    "systemd.unit_from_file+with_environment": (
        lambda text, env: systemd.unit_from_file(unit_files.parse_unit_file(text), None, None).with_environment(
            lambda path: env
        ),
        st.tuples(ANY_TEXT, st.none() | ANY_TEXT),
    ),
    "exec_lines.expand_argv": (
        lambda argv, value: exec_lines.expand_argv(argv, {"A": systemd_env.EnvSetting("A", value)}),
        st.tuples(ARGV, ANY_TEXT),
    ),
    "vllm.repeated_flags+refused_args": (
        lambda argv: (vllm.repeated_flags(argv), vllm.refused_args(argv)),
        st.tuples(ARGV),
    ),
    "vllm.parse_human_int": (vllm.parse_human_int, st.tuples(ANY_TEXT)),
    "vllm.parse_serve_args+flags": (
        lambda argv: [f(vllm.parse_serve_args(argv)) for f in (vllm.speculative_tokens, vllm.served_host)],
        st.tuples(ARGV),
    ),
}


@pytest.mark.parametrize("name", PARSERS)
@fuzz(150)
@given(data=st.data())
def test_facts_parser_gives_a_result_or_a_fact_error(name, data):
    parse, arguments = PARSERS[name]
    try:
        parse(*data.draw(arguments))
    except FactError as exc:
        assert str(exc) and "Traceback" not in str(exc)


# Crashes the fuzzing at depth found (GOLIVE_FUZZ_EXAMPLES=10000), kept as explicit cases: (parser, its arguments).
FOUND_AT_DEPTH = [
    ("bash.parse_script", ("0\\",)),  # bashlex: TypeError at a digit word ending in a backslash
]


@pytest.mark.parametrize(("name", "arguments"), FOUND_AT_DEPTH, ids=[f"{n}{a!r}" for n, a in FOUND_AT_DEPTH])
def test_crashes_found_at_depth_stay_fixed(name, arguments):
    parse, _ = PARSERS[name]
    try:
        parse(*arguments)
    except FactError as exc:
        assert str(exc) and "\n" not in str(exc)


SSE_PIECES = st.one_of(
    st.binary(max_size=40),
    st.sampled_from(
        [
            b"data: ",
            b"\n\n",
            b"\r\n",
            b"data: [DONE]\n\n",
            b'{"choices": [{"delta": {"content": "a"}}]}',
            b"\xff\xfe",
            b'{"usage": {"completion_tokens": "x"}}',
            b'{"error": {"message": 1}}',
            b'{"choices": null}',
            b"[1, 2]",
            b'{"choices": [{"delta": "x"}]}',
            b'{"choices": ["x"]}',
            b'{"usage": 3}',
            b": ping\n",
            b"event: x\n",
        ]
    ),
)


@FUZZ
@given(chunks=st.lists(SSE_PIECES, max_size=12))
def test_stream_assembly_takes_any_bytes(chunks):
    """Arbitrary chunks: events come out, and each is either applied or rejected as ValueError (the request's error,
    as the load generator records it), never another exception."""
    parser, timing = SseParser(), RequestTiming(sent=0.0)
    for at, chunk in enumerate(chunks):
        for data, when in parser.feed(chunk, float(at)):
            try:
                read_event(timing, data, when)
            except ValueError as exc:
                assert str(exc)


# --- the one scrubber (golive.core.secrets): random specs and secrets --------------------------------------------

SCHEMES = st.sampled_from(["ssh", "paramiko", "ansible", "http", "https"])
HOSTNAMES = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z0-9]{1,10}){0,2}", fullmatch=True)
HOSTS = st.one_of(HOSTNAMES, st.ip_addresses(v=4).map(str), st.ip_addresses(v=6).map(lambda ip: f"[{ip}]"))
TAILS = st.sampled_from(["", "/", "/v1", "?timeout=5", "/v1?model=m&api_key=not-shown", "#frag"])


@FUZZ
@given(
    scheme=SCHEMES,
    user=st.text(max_size=12),
    password=st.text(min_size=4, max_size=24),
    host=HOSTS,
    port=st.none() | st.integers(1, 65535),
    tail=TAILS,
)
def test_a_specs_password_never_shows_and_it_still_parses_the_same(scheme, user, password, host, port, tail):
    """Any user, password (percent-encoded, as a URL carries it), host (a name, IPv4, IPv6 in brackets) and port: the
    shown spec has `***` for the password, neither the password nor its encoded form anywhere (alone or inside text),
    and it parses to the same host, port and user."""
    from urllib.parse import quote, urlsplit

    from golive.core.secrets import MASK, hide_password, scrub

    where = host + (f":{port}" if port is not None else "")
    spec = f"{scheme}://{quote(user, safe='')}:{quote(password, safe='')}@{where}{tail}"
    expected = hide_password(f"{scheme}://{quote(user, safe='')}:{MASK}@{where}{tail}") or ""
    assume(password not in expected and quote(password, safe="") not in expected)  # not a leak: the rest has it
    shown = hide_password(spec) or ""
    assert shown == expected
    in_text = scrub(f"cannot reach {spec}: timed out")
    for form in (password, quote(password, safe="")):
        assert form not in shown and form not in in_text
    before, after = urlsplit(spec), urlsplit(shown)
    assert (after.hostname, after.port, after.username, after.password) == (
        before.hostname,
        before.port,
        before.username,
        MASK,
    )


@FUZZ
@given(
    secret=st.text(alphabet=st.characters(blacklist_characters="*\x00"), min_size=1, max_size=20),
    before=ANY_TEXT,
    after=ANY_TEXT,
    nested=st.booleans(),
)
def test_a_known_secret_never_shows_in_text_or_data(secret, before, after, nested):
    """A secret golive knows, as written or percent-encoded anywhere in any text (or a string in nested data), is not
    in what scrub gives back (its `[REDACTED]` markers aside: a secret may end in the marker's own letters). Any
    text: a key from the environment may hold surrogates (bytes that are not UTF-8)."""
    from golive.core.secrets import REDACTED, known_forms, percent_encoded, scrub, scrub_data

    text = f"{before}{secret}{after} {percent_encoded(secret)}"
    secrets = known_forms([secret])
    shown = scrub_data([{"n": 1}, (text,)], secrets)[1][0] if nested else scrub(text, secrets)
    markers_aside = shown.replace(REDACTED, "\x00")
    assert secret not in markers_aside and percent_encoded(secret) not in markers_aside
