"""The station trees' `systemctl show` and `docker inspect` recordings keep the form of the real thing.

fixtures/recorded/real-station holds real systemd 252 and Docker 20.10 output from the testbed's real station; the
GB300 trees' recordings were re-derived from it with only the station's values substituted (their PROVENANCE.md lists
them, docs/recorded-vs-real.md lists what the hand-written reconstructions had differently). These tests fail when a
tree recording drifts from the real form: a key the real output does not print, a key in another place, an Exec
line or JSON object of another shape, or a value golive's readers would read differently.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from golive.facts import docker, systemd, vllm

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "fixtures/recorded/real-station"
STATIONS = ROOT / "fixtures/stations"
HEALTHY = STATIONS / "gb300-healthy/opt/golive-recorded"
SHOW = "systemctl-show-glm53-flash.txt"
INSPECT = "docker-inspect-glm53-flash.json"


def tree_recordings(pattern: str) -> list[Path]:
    """The healthy tree's recording and every variant's that overrides it (never the built copies)."""
    found = [*HEALTHY.glob(pattern), *sorted(STATIONS.glob(f"variants/*/opt/golive-recorded/{pattern}"))]
    assert found, pattern
    return found


def ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(STATIONS)).replace("/opt/golive-recorded/", ": ") for p in paths]


def show_lines(path: Path) -> list[tuple[str, str]]:
    return [(k, v) for k, _, v in (line.partition("=") for line in path.read_text().splitlines())]


# --- systemctl show ---------------------------------------------------------------------------------------------

# Keys whose values are the GB300 station's, not the testbed station's (fixtures/stations/gb300-healthy/opt/
# golive-recorded/PROVENANCE.md): pids, times, ids, the unit's argv, the machine's limits, the cgroup's readings.
STATION_VALUES = {
    "MainPID",
    "ExecMainPID",
    "ExecMainStartTimestamp",
    "ExecMainStartTimestampMonotonic",
    "ExecStartPre",
    "ExecStartPreEx",
    "ExecStart",
    "ExecStartEx",
    "ExecStop",
    "ExecStopEx",
    "ControlGroupId",
    "TasksMax",
    "LimitNPROC",
    "LimitNPROCSoft",
    "LimitSIGPENDING",
    "LimitSIGPENDINGSoft",
    "StateChangeTimestamp",
    "StateChangeTimestampMonotonic",
    "InactiveExitTimestamp",
    "InactiveExitTimestampMonotonic",
    "ActiveEnterTimestamp",
    "ActiveEnterTimestampMonotonic",
    "ConditionTimestamp",
    "ConditionTimestampMonotonic",
    "AssertTimestamp",
    "AssertTimestampMonotonic",
    "InvocationID",
}
# The testbed station's cgroup (in systemd-nspawn) gave no readings ("[not set]"); a GB300 has them.
READINGS = {"MemoryCurrent", "CPUUsageNSec", "TasksCurrent"}
# Keys systemd 252 prints only for some units, none of them recorded on the real station yet: the form comes from
# systemd's source (docs/recorded-vs-real.md says which). A key outside these and the real recordings fails.
UNRECORDED = {
    "ExecStartPost",
    "ExecStartPostEx",
    "ExecMainExitTimestamp",
}
REAL_SHOWS = sorted(REAL.glob("systemctl-show-*.txt"))


def _merged_order(paths: list[Path]) -> list[str]:
    """Every key the real recordings print, in systemd's order: a key one recording has and another lacks goes right
    after the key it follows in the recording that has it (ExecStopPost= after ExecStopEx=)."""
    order: list[str] = []
    for path in paths:
        before = None
        for key in dict.fromkeys(k for k, _ in show_lines(path)):
            if key not in order:
                order.insert(order.index(before) + 1 if before is not None else 0, key)
            before = key
    return order


REAL_ORDER = _merged_order(REAL_SHOWS)


def shape(value: str) -> str:
    """A value's form with its figures blanked: `Wed 2026-11-25 07:41:14 UTC` and `Thu 2026-12-03 08:28:46 UTC`
    have one shape, `1min` and `60s` do not."""
    value = re.sub(r"\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?=\d{4}-)", "Day ", value)
    return re.sub(r"\d+", "0", re.sub(r"\b[0-9a-f]{32}\b", "<id>", value))


def exec_fields(value: str) -> list[str]:
    """The field names of an Exec property, in order: `path argv[] ignore_errors start_time …`."""
    return re.findall(r"(?:^|; |\{ )([a-z_\[\]]+)=", value)


def test_the_real_recordings_are_systemd_252_and_docker_20_10():
    versions = (REAL / "versions.txt").read_text()
    assert versions.startswith("systemd 252 (") and "Version:           20.10." in versions


def test_healthy_recording_has_exactly_the_real_keys_in_the_real_order():
    """The healthy GB300 unit prints what the real one does, less DropInPaths= (the tree has no drop-in; systemctl
    show leaves an empty list out)."""
    real = [k for k, _ in show_lines(REAL / SHOW) if k != "DropInPaths"]
    assert [k for k, _ in show_lines(HEALTHY / SHOW)] == real


def test_healthy_recording_keeps_every_real_value_but_the_stations():
    real, tree = dict(show_lines(REAL / SHOW)), dict(show_lines(HEALTHY / SHOW))
    same = {k: (real[k], tree[k]) for k in tree if k not in STATION_VALUES | READINGS and real[k] != tree[k]}
    assert same == {}, "a value changed that is not the station's: add it to the provenance and STATION_VALUES"
    # the Exec lines hold the station's argv (their fields are compared below); every other value keeps its form
    shapes = {k: (real[k], tree[k]) for k in STATION_VALUES if shape(real[k]) != shape(tree[k])}
    assert {k for k in shapes if not re.fullmatch(r"Exec(Start|Stop)\w*", k)} == set(), shapes
    assert all(real[k] == "[not set]" and tree[k].isdigit() for k in READINGS)


@pytest.mark.parametrize("path", tree_recordings(SHOW), ids=ids(tree_recordings(SHOW)))
def test_tree_show_keys_are_real_ones_in_the_real_order(path):
    keys = list(dict.fromkeys(k for k, _ in show_lines(path)))
    unknown = [k for k in keys if k not in REAL_ORDER and k not in UNRECORDED]
    assert unknown == [], f"{path}: keys systemd 252 did not print on the real station"
    known = [k for k in keys if k in REAL_ORDER]
    assert known == sorted(known, key=REAL_ORDER.index), f"{path}: keys out of systemd's order"


@pytest.mark.parametrize("path", tree_recordings(SHOW), ids=ids(tree_recordings(SHOW)))
def test_tree_exec_lines_have_the_real_fields(path):
    """`{ path= ; argv[]= ; ignore_errors= ; start_time=[…] ; stop_time=[…] ; pid= ; code= ; status= }`, the Ex twin
    with `flags=`, as systemd 252 prints them."""
    real = dict(show_lines(REAL / SHOW))
    for key, value in show_lines(path):
        if key.startswith("Exec") and value.startswith("{"):
            twin = "ExecStartEx" if key.endswith("Ex") else "ExecStart"
            assert exec_fields(value) == exec_fields(real[twin]), (path, key)


def unit_facts(text: str) -> dict[str, Any]:
    """What the host checks read from `systemctl show`, by golive's readers."""
    props = systemd.parse_show(text)
    unit = systemd.unit_from_show(props)
    return {
        **{k: v for k, v in asdict(unit).items() if k not in ("exec_start", "exec_start_pre")},
        "exec_start_pre": [(c.argv, c.ignore_errors, c.expand_env) for c in unit.exec_start_pre],
        "exec_start": [(c.ignore_errors, c.expand_env, docker.is_docker_run(c.argv)) for c in unit.exec_start],
        "fragment": props["FragmentPath"],
        "dropins": " ".join(props.get("DropInPaths", [])).split(),
    }


@pytest.mark.parametrize(
    "real, tree",
    [
        (SHOW, "gb300-healthy"),
        ("systemctl-show-glm53-flash-restart-always.txt", "variants/restart-always-drop-in"),
    ],
)
def test_readers_give_the_same_unit_facts_for_real_and_tree(real, tree):
    """Both ways: the real station's and the tree's recording of the same state read the same, but for the drop-ins
    (the testbed's own testbed.conf) and the docker run line (the station's argv, compared below)."""
    got = unit_facts((STATIONS / tree / "opt/golive-recorded" / SHOW).read_text())
    want = unit_facts((REAL / real).read_text())
    assert [d for d in want.pop("dropins") if not d.endswith("/testbed.conf")] == got.pop("dropins")
    assert got == want


def test_the_docker_run_lines_read_alike():
    """The unit's docker run: the same kinds of options, an image pinned by digest, vLLM's flags after it."""
    runs = [
        docker.parse_run(systemd.unit_from_show(systemd.parse_show(p.read_text())).exec_start[0].argv)
        for p in (REAL / SHOW, HEALTHY / SHOW)
    ]
    real, tree = ({name for name, _ in run.options} for run in runs)
    assert tree - {"--gpus"} == real  # the GB300's GPU flag: the testbed station has no GPU
    assert all(run.image.digest and re.fullmatch(r"sha256:[0-9a-f]{64}", run.image.digest) for run in runs)
    served = [vllm.parse_serve_args(run.args) for run in runs]
    assert all(s["tool-call-parser"] == "glm47" and s["tensor-parallel-size"] == "1" for s in served)


# --- docker inspect -----------------------------------------------------------------------------------------------


def key_paths(value: Any, at: str = "") -> set[str]:
    """Every key's path in a JSON document (`HostConfig.RestartPolicy.Name`; list items as `[]`)."""
    if isinstance(value, dict):
        return {p for k, v in value.items() for p in {f"{at}.{k}", *key_paths(v, f"{at}.{k}")}}
    if isinstance(value, list):
        return {p for item in value for p in key_paths(item, f"{at}[]")}
    return set()


def inspected(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text())
    assert isinstance(document, list) and len(document) == 1, path
    return document[0]


# `--gpus all`: HostConfig.DeviceRequests is null on the testbed station (no GPU) and this list on the GB300
GPU_REQUEST = {
    ".HostConfig.DeviceRequests[]." + k
    for k in ("Driver", "Count", "DeviceIDs", "Capabilities", "Options")  # Docker 20.10's container.DeviceRequest
}
# Where the real station's values are a list and the tree's empty (or the reverse), key paths inside differ
NESTED_VALUES = (".Config.Labels.", ".Config.Env", ".HostConfig.Binds", ".Mounts[].", ".GraphDriver.Data.")


def form(paths: set[str]) -> set[str]:
    return {p for p in paths if not p.startswith(NESTED_VALUES)}


@pytest.mark.parametrize("path", tree_recordings(INSPECT), ids=ids(tree_recordings(INSPECT)))
def test_tree_container_inspect_has_the_real_keys(path):
    real = form(key_paths(inspected(REAL / INSPECT)))
    assert form(key_paths(inspected(path))) - GPU_REQUEST == real, path
    data = inspected(path)["GraphDriver"]["Data"]
    assert set(data) == set(inspected(REAL / INSPECT)["GraphDriver"]["Data"]), path


@pytest.mark.parametrize("path", tree_recordings(INSPECT), ids=ids(tree_recordings(INSPECT)))
def test_tree_container_command_is_built_as_docker_builds_it(path):
    """Path is the entrypoint's first word, Args the rest of it and then Config.Cmd (what followed the image)."""
    for real_path in (REAL / INSPECT, path):
        o = inspected(real_path)
        entry = o["Config"]["Entrypoint"]
        assert [o["Path"], *o["Args"]] == [*entry, *o["Config"]["Cmd"]], real_path


def container_facts(text: str) -> dict[str, Any]:
    c = docker.parse_container_inspect(text)
    return {
        "name": c.name,
        "restart_policy": c.restart_policy,
        "cpuset_mems": c.cpuset_mems,
        "running": c.running,
        "status": c.status,
        "entry": c.command[: len(c.command) - len(c.args)],
        "args_are_cmd": c.args == json.loads(text)[0]["Config"]["Cmd"],
        "pid_set": c.pid > 0,
        "image_id_form": bool(re.fullmatch(r"sha256:[0-9a-f]{64}", c.image_id)),
        "pinned": docker.ImageRef.parse(c.config_image).digest is not None,
    }


def test_readers_give_the_same_container_facts_for_real_and_tree():
    assert container_facts((HEALTHY / INSPECT).read_text()) == container_facts((REAL / INSPECT).read_text())


IMAGES = tree_recordings("docker-image-inspect*.json")


@pytest.mark.parametrize("path", IMAGES, ids=ids(IMAGES))
def test_tree_image_inspect_has_the_real_keys_and_reads_alike(path):
    real = inspected(REAL / "docker-image-inspect.json")
    assert form(key_paths(inspected(path))) == form(key_paths(real)), path
    got, want = (docker.parse_image_inspect(p.read_text()) for p in (path, REAL / "docker-image-inspect.json"))
    for image in (got, want):
        assert image.repo_digests and all(re.fullmatch(r"[^@\s]+@sha256:[0-9a-f]{64}", d) for d in image.repo_digests)
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", image.id)


def test_the_container_runs_an_image_that_is_recorded():
    """The container's Image is the Id of a recorded image, whose RepoDigests hold the digest it was started by."""
    for folder in (REAL, HEALTHY):
        container = docker.parse_container_inspect((folder / INSPECT).read_text())
        image = docker.parse_image_inspect((folder / "docker-image-inspect.json").read_text())
        assert image.id == container.image_id, folder
        assert docker.ImageRef.parse(container.config_image).digest in image.digests(), folder


def test_real_systemd_splits_a_semicolon_line_and_reports_what_it_has_not_loaded():
    """What systemd 252 printed for three operator edits (fixtures/recorded/real-station/PROVENANCE.md), read by
    golive: the `;` line as two commands with their own `-`, ExecStopPost=, and NeedDaemonReload=yes with the loaded
    Restart= (not the file's)."""
    semicolon = _real_unit("semicolon")
    assert [(c.argv, c.ignore_errors) for c in semicolon.exec_start_pre] == [
        (["/usr/bin/docker", "rm", "-f", "glm53-flash"], True),
        (["/usr/local/sbin/glm53-flash-prestart.sh"], False),
    ]
    stop_post = _real_unit("exec-stop-post")
    assert [(c.argv, c.ignore_errors) for c in stop_post.exec_stop_post] == [
        (["/usr/bin/docker", "rm", "glm53-flash"], True)
    ]
    assert [c.argv for c in stop_post.exec_stop] == [["/usr/bin/docker", "stop", "glm53-flash"]]
    loaded = _real_unit("not-reloaded")
    assert (loaded.need_daemon_reload, loaded.restart) == (True, "on-failure")
    assert semicolon.need_daemon_reload is False and stop_post.need_daemon_reload is False


def _real_unit(variant: str) -> systemd.UnitFacts:
    return systemd.unit_from_show(systemd.parse_show((REAL / f"systemctl-show-glm53-flash-{variant}.txt").read_text()))
