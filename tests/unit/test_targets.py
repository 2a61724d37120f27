"""golive_testbed.targets: station trees built from fixtures/stations, reached the way the host checks reach them."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from e2e import REQUIRE_E2E, needs_chroot, skip_e2e

from golive.facts import bash, docker, systemd, unit_files
from golive_testbed import targets
from golive_testbed.targets import TargetsError, build_station_trees, load_variants

SRC = targets.DEFAULT_SRC
REPO = targets.REPO
HEALTHY = "gb300-healthy"
PIN = "sha256:adfb5fb0570860760c6334c818692ad883c9c3dd8d916b7f1f424d50567c2f09"
REC = "opt/golive-recorded"
UNIT = "etc/systemd/system/glm53-flash.service"
UNIT_NAME = "glm53-flash.service"
WANTS = "etc/systemd/system/multi-user.target.wants/glm53-flash.service"
MODEL = "srv/models/GLM-5.3-Flash-NVFP4"
HEALTHY_VARIANTS = {"stopped", "no-systemd", "docker-restart-no", "drop-ins-masked-and-ordered"}

# busybox builds the trees (scripts/setup.sh installs it); CI (GOLIVE_REQUIRE_E2E=1) runs these and fails without it
needs_busybox = pytest.mark.skipif(
    not targets.BUSYBOX.is_file() and not REQUIRE_E2E, reason="apt-get install busybox-static"
)


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    if not targets.BUSYBOX.is_file():
        skip_e2e("the station trees need busybox: apt-get install busybox-static")
    return build_station_trees(SRC, tmp_path_factory.mktemp("built"))


def host(tree: Path):
    import testinfra

    return testinfra.get_host(str(tree), connection="chroot")


# --- reading the trees' files (no chroot needed) ----------------------------------------------------------------------


def unit_directives(text: str) -> dict[str, list[str]]:
    """Directive -> values, with `\\` continuations joined the way systemd joins them (one space)."""
    joined = re.sub(r"\s*\\\n\s*", " ", text)
    out: dict[str, list[str]] = {}
    for line in joined.splitlines():
        if "=" in line and not line.lstrip().startswith(("#", ";", "[")):
            key, value = line.split("=", 1)
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def show_props(tree: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in (tree / REC / "systemctl-show-glm53-flash.txt").read_text().splitlines())


def argv_of(exec_prop: str) -> str:
    found = re.search(r"argv\[\]=(.*?) ; ", exec_prop)
    assert found, exec_prop
    return found.group(1)


def container(tree: Path) -> dict:
    return json.loads((tree / REC / "docker-inspect-glm53-flash.json").read_text())[0]


def manifest(tree: Path) -> dict[str, int]:
    lines = (tree / MODEL / "shards.manifest").read_text().splitlines()
    return {name: int(size) for name, size in (ln.split() for ln in lines if ln.strip() and not ln.startswith("#"))}


def smi_fb_used(tree: Path) -> dict[str, int]:
    """{bus id: FB used MiB} from the nvidia-smi -q recording."""
    used: dict[str, int] = {}
    bus, section = "", None
    for line in (tree / REC / "nvidia-smi-q.txt").read_text().splitlines():
        if line.startswith("GPU "):
            bus = line[4:]
        elif line.startswith("    ") and not line.startswith("     "):
            section = line.split(":")[0].strip()
        elif section == "FB Memory Usage" and line.split(":")[0].strip() == "Used":
            used[bus] = int(line.split(":")[1].split()[0])
    return used


def node_meminfo(tree: Path, node: int) -> dict[str, int]:
    text = (tree / f"sys/devices/system/node/node{node}/meminfo").read_text()
    return {line.split()[2].rstrip(":"): int(line.split()[3]) for line in text.splitlines()}


# --- variants and their inventories -----------------------------------------------------------------------------------


def test_every_variant_breaks_one_rule_or_none():
    variants = load_variants(SRC)
    assert len(variants) >= 21
    assert HEALTHY_VARIANTS <= {v.name for v in variants if v.breaks is None}
    for v in variants:
        assert v.phase in ("serving", "pre-start")
        assert v.why and len(v.why) < 300, v.name
        assert v.breaks is None or re.fullmatch(r"test_[a-z0-9_]+", v.breaks), v.name


def test_every_tree_has_an_inventory_with_its_phase():
    phases = {HEALTHY: "serving"} | {v.name: v.phase for v in load_variants(SRC)}
    inventories = REPO / "fixtures" / "inventories"
    assert set(phases) <= {p.stem for p in inventories.glob("*.yaml")}
    for name, phase in phases.items():
        inv = yaml.safe_load((inventories / f"{name}.yaml").read_text())
        (station,) = inv["stations"]
        assert station["host"] == f"chroot://../stations/.built/{name}"
        assert station["phase"] == phase
        assert (inventories / station["host"].removeprefix("chroot://")).parent.resolve() == SRC / ".built"


def test_readme_lists_every_variant():
    readme = (SRC / "README.md").read_text()
    for v in load_variants(SRC):
        assert f"| `{v.name}` | {v.phase} |" in readme
        if v.breaks:
            assert f"`{v.breaks}`" in readme


def test_overlays_hold_only_files_that_differ_from_their_base():
    variants = {v.name: v for v in load_variants(SRC)}
    for v in variants.values():
        vdir = SRC / "variants" / v.name
        for f in vdir.rglob("*"):
            if f.is_file() and f.name != "variant.yaml":
                rel = f.relative_to(vdir)
                base, name = None, v.base
                while base is None:  # the nearest layer of the base chain that has this file
                    layer = SRC / name if name not in variants else SRC / "variants" / name
                    if (layer / rel).exists() or name not in variants:
                        base = layer / rel
                    else:
                        name = variants[name].base
                assert not base.exists() or base.read_bytes() != f.read_bytes(), f"{v.name}: {rel} is unchanged"


# --- the materialiser ------------------------------------------------------------------------------------------------


@needs_busybox
def test_builds_every_tree_with_busybox(trees):
    assert set(trees) == set(targets.base_trees(SRC)) | {v.name for v in load_variants(SRC)}
    for tree in trees.values():
        assert os.access(tree / "bin/busybox", os.X_OK)
        assert os.readlink(tree / "bin/sh") == "busybox"
        assert stat.S_ISCHR((tree / "dev/null").stat().st_mode) or os.geteuid() != 0
        assert not (tree / "variant.yaml").exists()


@needs_busybox
def test_shards_are_sparse_files_of_the_manifest_sizes(trees):
    tree = trees[HEALTHY]
    sizes = manifest(tree)
    assert len(sizes) == 40
    assert sum(sizes.values()) == pytest.approx(191e9, rel=0.01)
    on_disk = 0
    for name, size in sizes.items():
        st = (tree / MODEL / name).stat()
        assert st.st_size == size
        on_disk += st.st_blocks * 512
    assert on_disk < 1024 * 1024  # 191 GB of shards, (almost) no blocks
    index = json.loads((tree / MODEL / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == set(sizes)


@needs_busybox
def test_overlay_replaces_files_of_the_base(trees):
    assert "Restart=on-failure" in (trees[HEALTHY] / UNIT).read_text()
    assert unit_directives((trees["restart-always"] / UNIT).read_text())["Restart"] == ["always"]
    prestart = "usr/local/sbin/glm53-flash-prestart.sh"
    drop = "echo 1 > /proc/sys/vm/drop_caches"
    assert drop in (trees[HEALTHY] / prestart).read_text()
    assert drop not in (trees["prestart-no-drop-caches"] / prestart).read_text()
    assert (trees["prestart-no-drop-caches"] / prestart).stat().st_mode & 0o777 == 0o755


@needs_busybox
def test_modes_change_only_the_permission_bits(trees):
    prestart = "usr/local/sbin/glm53-flash-prestart.sh"
    changed, base = trees["prestart-not-executable"] / prestart, trees[HEALTHY] / prestart
    assert changed.stat().st_mode & 0o777 == 0o644 and base.stat().st_mode & 0o777 == 0o755
    assert changed.read_bytes() == base.read_bytes()


@needs_busybox
def test_modes_of_a_path_the_tree_lacks_is_refused(tmp_path):
    (tmp_path / HEALTHY / "etc").mkdir(parents=True)
    (tmp_path / "variants/typo").mkdir(parents=True)
    (tmp_path / "variants/typo/variant.yaml").write_text(
        "base: gb300-healthy\nphase: serving\nbreaks: null\nwhy: x\nmodes: {etc/nothing: '0644'}\n"
    )
    with pytest.raises(TargetsError, match="modes: etc/nothing is not a file of the tree"):
        build_station_trees(tmp_path, tmp_path / "built")


@needs_busybox
def test_deletions_remove_paths_of_the_base(trees):
    assert os.readlink(trees[HEALTHY] / WANTS) == "../glm53-flash.service"
    assert not (trees["unit-disabled"] / WANTS).is_symlink()
    assert (trees["unit-disabled"] / UNIT).is_file()
    assert not (trees["no-systemd"] / "run/systemd/system").exists()
    assert not (trees["no-systemd"] / "usr/bin/systemctl").exists()
    assert not (trees["gpu-missing"] / "proc/driver/nvidia/gpus/0009:01:00.0").exists()


@needs_busybox
def test_chained_base_carries_the_parent_variant(trees):
    busy = trees["stopped-hbm-busy"]
    assert not (busy / "proc/41873").exists()  # from stopped
    assert show_props(busy)["ActiveState"] == "inactive"  # from stopped
    assert smi_fb_used(busy)["00000009:01:00.0"] == 184320  # its own


@needs_busybox
def test_missing_shard_is_not_created(trees):
    tree = trees["shard-missing"]
    assert len(manifest(tree)) == 39
    assert not (tree / MODEL / "model-00017-of-00040.safetensors").exists()
    index = json.loads((tree / MODEL / "model.safetensors.index.json").read_text())
    assert "model-00017-of-00040.safetensors" in index["weight_map"].values()


def _copy_sources(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(SRC, src, symlinks=True, ignore=shutil.ignore_patterns(".built"))
    return src


def _hash_files(built: dict[str, Path]) -> dict[str, tuple[int, int]]:
    return {
        n: ((p / targets.HASH_FILE).stat().st_ino, (p / targets.HASH_FILE).stat().st_mtime_ns) for n, p in built.items()
    }


@needs_busybox
def test_rebuild_only_what_changed(tmp_path):
    src, dest = _copy_sources(tmp_path), tmp_path / "built"
    first = _hash_files(build_station_trees(src, dest))
    assert _hash_files(build_station_trees(src, dest)) == first  # nothing changed: nothing rebuilt

    (src / "variants/stopped/variant.yaml").write_text(
        (src / "variants/stopped/variant.yaml").read_text().replace("Healthy and stopped", "Stopped")
    )
    after = _hash_files(build_station_trees(src, dest))
    changed = {n for n in first if after[n] != first[n]}
    based_on_stopped = {v.name for v in load_variants(src) if v.base == "stopped"}
    assert changed == {"stopped"} | based_on_stopped

    shutil.rmtree(src / "variants/restart-always")
    assert "restart-always" not in build_station_trees(src, dest)
    assert not (dest / "restart-always").exists()


@needs_busybox
def test_editing_the_base_rebuilds_the_variants_that_inherit_the_file(tmp_path):
    src, dest = _copy_sources(tmp_path), tmp_path / "built"
    build_station_trees(src, dest)
    (src / HEALTHY / UNIT).write_text((src / HEALTHY / UNIT).read_text().replace("RestartSec=60", "RestartSec=5"))
    built = build_station_trees(src, dest)
    assert "RestartSec=5" in (built[HEALTHY] / UNIT).read_text()
    assert "RestartSec=5" in (built["stopped-hbm-busy"] / UNIT).read_text()  # healthy -> stopped -> stopped-hbm-busy
    assert "RestartSec=60" in (built["restart-always"] / UNIT).read_text()  # brings its own unit file


def test_missing_busybox_says_how_to_install_it(tmp_path):
    with pytest.raises(TargetsError, match=r"^busybox-static is not installed: apt-get install busybox-static$"):
        build_station_trees(SRC, tmp_path, busybox=tmp_path / "no-busybox")


@pytest.mark.parametrize(
    ("yaml_text", "error"),
    [
        ("base: gb300-healthy\nphase: serving\nbreaks: null\nwhy: x\ncolour: red\n", "unknown key"),
        ("base: gb300-healthy\nphase: running\nbreaks: null\nwhy: x\n", "phase must be one of"),
        ("base: nowhere\nphase: serving\nbreaks: null\nwhy: x\n", "base 'nowhere'"),
        ("base: gb300-healthy\nphase: serving\nbreaks: restart\nwhy: x\n", "'breaks' must be a test name"),
        ("base: gb300-healthy\nphase: serving\nbreaks: null\nwhy: x\ndelete: [../etc]\n", "without '..'"),
        ("base: bad\nphase: serving\nbreaks: null\nwhy: x\n", "cycle"),
        ("base: gb300-healthy\nphase: serving\nbreaks: null\nwhy: x\nmodes: {bin/x: 644}\n", "octal string in quotes"),
        (
            "base: gb300-healthy\nphase: serving\nbreaks: null\nwhy: x\nmodes: {/bin/x: '0644'}\n",
            "relative to the tree",
        ),
    ],
)
def test_bad_variant_is_refused_with_its_file(tmp_path, yaml_text, error):
    (tmp_path / HEALTHY).mkdir()
    (tmp_path / "variants/bad").mkdir(parents=True)
    (tmp_path / "variants/bad/variant.yaml").write_text(yaml_text)
    with pytest.raises(TargetsError, match=error):
        load_variants(tmp_path)


@needs_busybox
def test_deleting_a_path_the_base_lacks_is_refused(tmp_path):
    (tmp_path / HEALTHY / "etc").mkdir(parents=True)
    (tmp_path / "variants/typo").mkdir(parents=True)
    (tmp_path / "variants/typo/variant.yaml").write_text(
        "base: gb300-healthy\nphase: serving\nbreaks: null\nwhy: x\ndelete: [etc/sytemd]\n"
    )
    with pytest.raises(TargetsError, match="etc/sytemd is not in its base"):
        build_station_trees(tmp_path, tmp_path / "built")


# --- the recordings agree with the trees' files ----------------------------------------------------------------------


@needs_busybox
def test_stubs_parse_under_busybox_sh():
    for stub in ("systemctl", "docker", "nvidia-smi"):
        subprocess.run([str(targets.BUSYBOX), "sh", "-n", str(SRC / HEALTHY / "usr/bin" / stub)], check=True)


def gb300(trees: dict) -> dict:
    """The GB300 trees (healthy + variants); other bases such as the recorded h200-device hold no unit."""
    names = {HEALTHY} | {v.name for v in load_variants(SRC)}
    return {n: t for n, t in trees.items() if n in names}


def tree_dropins(tree: Path) -> list[str]:
    """The drop-ins of the tree's unit, in the order systemd applies them (golive's reading of systemd.unit(5))."""
    found = [
        f"/{p.relative_to(tree)}"
        for d in unit_files.UNIT_DIRS
        for name in unit_files.dropin_dir_names(UNIT_NAME)
        for p in sorted((tree / d.lstrip("/") / name).glob("*.conf"))
    ]
    return unit_files.order_dropins(found, UNIT_NAME)


@needs_busybox
def test_systemctl_recordings_match_the_unit_files(trees):
    """The recording of `systemctl show` is what systemd would load: the unit file merged with its drop-ins, which it
    lists in DropInPaths= in the order it applies them."""
    for name, tree in gb300(trees).items():
        if not (tree / REC / "systemctl-show-glm53-flash.txt").exists():
            continue
        show = show_props(tree)
        dropins = tree_dropins(tree)
        assert show.get("DropInPaths", "").split() == dropins, name
        files = [(p, (tree / p.lstrip("/")).read_text()) for p in [f"/{UNIT}", *dropins]]
        sections, _ = unit_files.merge_unit_files(files)
        service, unit = sections.get("Service", {}), sections.get("Unit", {})
        agree = [
            argv_of(show["ExecStart"]) == re.sub(r"\s+", " ", service["ExecStart"][-1]),
            ("ExecStartPre" in show) == bool(service.get("ExecStartPre")),
            ("ExecStartPost" in show) == bool(service.get("ExecStartPost")),
            show["Restart"] == service["Restart"][-1],
            show["StartLimitBurst"] == unit["StartLimitBurst"][-1],
        ]
        # a station whose files changed since systemd loaded them says so, and then they differ
        assert all(agree) is (show["NeedDaemonReload"] == "no"), (name, agree)
        assert (show["UnitFileState"] == "enabled") == (tree / WANTS).is_symlink(), name


def expanded_exec_start(tree: Path) -> list[str]:
    """ExecStart as systemd runs it: the unit merged with its drop-ins, `${VAR}`/`$VAR` expanded in the environment
    its Environment= and EnvironmentFile= lines give (the files read from the tree)."""
    paths = [f"/{UNIT}", *tree_dropins(tree)]
    sections, cleared = unit_files.merge_unit_files([(p, (tree / p.lstrip("/")).read_text()) for p in paths])
    unit = systemd.unit_from_file(sections, None, None, cleared, paths)

    def read(path: str) -> str | None:
        f = tree / path.lstrip("/")
        return f.read_text() if f.is_file() else None

    argv = [str(word) for word in unit.with_environment(read).exec_start[-1].argv]
    found = None if docker.is_docker_run(argv) else bash.script_run_by(argv, read)
    if found is not None:  # ExecStart runs a script: its `exec docker run …`, as bash passes it
        return next(c.runs for c in found[1].commands if docker.is_docker_run(c.runs))
    return argv


# trees whose running container was started before the station changed (the next start differs): their container
# matches the unit of the tree they were, and the next-start check finds the difference
STARTED_BEFORE = {"env-file-gone-not-restarted": "served-flag-from-env-file"}


@needs_busybox
def test_docker_recordings_match_the_unit_files(trees):
    for name, tree in gb300(trees).items():
        if not (tree / UNIT).exists():
            assert name == "unit-missing", name  # the one tree without a unit has no docker run line to compare
            continue
        argv = expanded_exec_start(trees[STARTED_BEFORE.get(name, name)])
        c = container(tree)
        image_at = (
            argv.index(c["Config"]["Image"])
            if name != "container-stale-image"
            else argv.index("vllm/vllm-openai@" + PIN)
        )
        assert c["Config"]["Cmd"] == argv[image_at + 1 :], name
        assert c["Args"] == ["serve"] + c["Config"]["Cmd"], name
        restart = docker.parse_run(argv).values("--restart")  # `--restart no` is Docker's default, said out loud
        assert c["HostConfig"]["RestartPolicy"]["Name"] == (restart[-1] if restart else "no"), name
        assert (c["HostConfig"]["CpusetMems"] != "") == ("--cpuset-mems" in argv), name
        assert c["HostConfig"]["AutoRemove"] is docker.parse_run(argv).removes_on_exit, name
        images = [json.loads(f.read_text())[0] for f in (tree / REC).glob("docker-image-inspect*.json")]
        (image,) = [i for i in images if i["Id"] == c["Image"]]
        ref = c["Config"]["Image"]
        assert ref in image["RepoDigests"] + image["RepoTags"], name


@needs_busybox
def test_gpu_recordings_agree_with_proc_and_sys(trees):
    for name, tree in gb300(trees).items():
        used = smi_fb_used(tree)
        rows = [line.split(", ") for line in (tree / REC / "nvidia-smi-query-gpu.csv").read_text().splitlines()]
        assert {r[2]: int(r[3]) for r in rows} == used, name
        apps_csv = (tree / REC / "nvidia-smi-query-compute-apps.csv").read_text()
        apps = [line.split(", ") for line in apps_csv.splitlines()]
        for pid, _, bus, mib in apps:
            assert (tree / "proc" / pid / "cgroup").is_file(), name
            assert int(mib) <= used[bus], name
        has_memory = (tree / "sys/devices/system/node/has_memory").read_text().strip()
        numa = tree / "proc/driver/nvidia/gpus/0009:01:00.0/numa_status"
        if "00000009:01:00.0" in used:
            assert numa.read_text().startswith("Node:      1\nStatus:    online\n"), name
            assert has_memory == "0-1", name
            hbm = node_meminfo(tree, 1)
            expected = used["00000009:01:00.0"] * 1024 + hbm["FilePages"] + hbm["Slab"]
            assert hbm["MemUsed"] == expected and hbm["MemUsed"] + hbm["MemFree"] == hbm["MemTotal"], name
        else:
            assert not numa.exists() and has_memory == "0" and node_meminfo(tree, 1)["MemTotal"] == 0, name
    assert (trees[HEALTHY] / "proc/41873/cgroup").read_text() == (
        f"0::/system.slice/docker-{container(trees[HEALTHY])['Id']}.scope\n"
    )


# --- through testinfra's chroot backend, as the host checks run ------------------------------------------------------


@needs_busybox
@needs_chroot
def test_testinfra_reads_a_serving_tree(trees):
    h = host(trees[HEALTHY])
    out = h.run("systemctl show glm53-flash.service")
    assert out.rc == 0
    props = dict(line.split("=", 1) for line in out.stdout.splitlines())
    assert props["ActiveState"] == "active" and PIN in props["ExecStart"]
    assert h.check_output("systemctl show glm53-flash -p StartLimitBurst,Restart --value").split() == [
        "on-failure",
        "3",
    ]
    svc = h.service("glm53-flash")
    assert svc.is_running and svc.is_enabled and svc.systemd_properties["RestartUSec"] == "1min"

    prestart = h.file("/usr/local/sbin/glm53-flash-prestart.sh")
    assert prestart.is_file and prestart.mode == 0o755
    assert "echo 1 > /proc/sys/vm/drop_caches" in prestart.content_string
    assert h.file("/etc/systemd/system/multi-user.target.wants/glm53-flash.service").linked_to == "/" + UNIT
    shard = h.file(f"/{MODEL}/model-00001-of-00040.safetensors")
    assert shard.size == manifest(trees[HEALTHY])["model-00001-of-00040.safetensors"]
    assert h.file("/sys/devices/system/node/node1/cpulist").content_string == "\n"

    c = json.loads(h.check_output("docker inspect glm53-flash"))[0]
    assert c["State"]["Pid"] == 41873 and c["HostConfig"]["RestartPolicy"]["Name"] == "no"
    image = json.loads(h.check_output("docker image inspect %s", c["Image"]))[0]
    assert image["RepoDigests"] == ["vllm/vllm-openai@" + PIN] and image["Architecture"] == "arm64"
    gpus = h.check_output(
        "nvidia-smi --query-gpu=index,name,pci.bus_id,memory.used,memory.total --format=csv,noheader,nounits"
    )
    assert gpus.splitlines()[0] == "0, NVIDIA GB300, 00000009:01:00.0, 241602, 256951"
    apps = h.check_output(
        "nvidia-smi --query-compute-apps=pid,process_name,gpu_bus_id,used_gpu_memory --format=csv,noheader,nounits"
    )
    assert apps == "41873, /usr/bin/python3, 00000009:01:00.0, 241088"
    assert "Addressing Mode                                    : ATS" in h.check_output("nvidia-smi -q")


@needs_busybox
@needs_chroot
def test_stubs_refuse_what_was_not_recorded(trees):
    h = host(trees[HEALTHY])
    for cmd in (
        "nvidia-smi -L",
        "docker ps",
        "systemctl restart glm53-flash",
        "systemctl show sshd.service",
        "docker inspect --format '{{.State.Pid}}' glm53-flash",
        "docker image inspect sha256:0000",
    ):
        out = h.run(cmd)
        assert out.rc == 127 and out.stderr.startswith("stub: not recorded: "), cmd
    h.run("echo discarded > /dev/null")
    assert stat.S_ISCHR((trees[HEALTHY] / "dev/null").lstat().st_mode)


@needs_busybox
@needs_chroot
def test_testinfra_sees_stopped_disabled_and_systemd_less_trees(trees):
    stopped = host(trees["stopped"])
    assert stopped.run("systemctl is-active glm53-flash.service").rc == 3
    assert not stopped.service("glm53-flash").is_running and stopped.service("glm53-flash").is_enabled
    assert (
        stopped.check_output(
            "nvidia-smi --query-compute-apps=pid,process_name,gpu_bus_id,used_gpu_memory --format=csv,noheader,nounits"
        )
        == ""
    )
    disabled = host(trees["unit-disabled"])
    out = disabled.run("systemctl is-enabled glm53-flash")
    assert (out.rc, out.stdout) == (1, "disabled\n")
    assert not disabled.service("glm53-flash").is_enabled
    bare = host(trees["no-systemd"])
    assert not bare.exists("systemctl") and not bare.file("/run/systemd/system").exists
    assert bare.file("/" + WANTS).is_symlink
    stale = host(trees["container-stale-image"])
    c = json.loads(stale.check_output("docker inspect glm53-flash"))[0]
    image = json.loads(stale.check_output("docker image inspect %s", c["Image"]))[0]
    assert image["RepoDigests"] == [
        "vllm/vllm-openai@sha256:6fd5bb80ea3bc534e29daf8353968b760e8a33d972e061b31a2bfaa05bc3851e"
    ]
