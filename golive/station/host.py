"""The facts of one station, gathered read-only through its testinfra host and cached for the session."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypedDict

from golive.facts import FactError, bash, docker, gpu, systemd, unit_files, vllm
from golive.profile.inventory import Station
from golive.profile.recipe import dram_node
from golive.profile.schema import Profile, Service

if TYPE_CHECKING:
    from golive.facts.exec_lines import ExecCommand
    from golive.station.connection import StationHost

UNIT_DIRS = unit_files.UNIT_DIRS
QUERY_GPU = ["index", "name", "pci.bus_id", "memory.used", "memory.total"]
QUERY_APPS = ["pid", "process_name", "gpu_bus_id", "used_gpu_memory"]
SCRIPT_MAX_BYTES = 256 * 1024  # a file an Exec line runs is read as a script up to this size; a program is larger


@dataclass
class HbmNode:
    node: int
    how: str  # how it was found, for the report: "numa_status of 0009:01:00.0", …


class NumaNode(TypedDict, total=False):
    """One NUMA node as sysfs shows it (/sys/devices/system/node/nodeN). StationFacts.nodes always fills both keys;
    total=False lets a node that is not there read as `{}` (`facts.nodes.get(n, {}).get("meminfo", {})`)."""

    cpus: set[int]  # its cpulist
    meminfo: dict[str, int]  # its meminfo, kB ({} where it has none)


@dataclass
class Shard:
    name: str
    size: int


@dataclass
class SavedLog:
    """A file in the folder the prestart saves dead containers' logs into (`stat -c '%n|%s|%y'`)."""

    path: str
    size: int
    written: str  # as stat printed it, the station's local time: 2026-12-04 23:25:47.516874436 +0000
    written_local: datetime  # that time without its zone, to compare with systemd's timestamps


@dataclass
class ServedConfig:
    """The served vLLM arguments with its `--config` file read in (golive.facts.vllm.with_config)."""

    args: list[str]
    path: str | None = None  # as the command line names it (inside the container)
    host_path: str | None = None  # where golive read it on the station
    refused: str | None = None  # why vLLM would stop at start over it
    unknown: str | None = None  # why golive could not read it


@dataclass
class StartLimitHit:
    """systemd's start limit stopped the unit: what said so."""

    result: str  # `systemctl show -p Result` (252 keeps exit-code; later systemd says start-limit-hit)
    journal: str  # the journal's "Start request repeated too quickly" line, as journalctl printed it ("" if none)
    n_restarts: int


@dataclass
class RestartRecord:
    """What systemd says of the unit's restarts (`systemctl show UNIT -p NRestarts -p ActiveState -p
    ActiveExitTimestamp`): NRestarts=2, ActiveState=active, ActiveExitTimestamp=Fri 2026-12-04 23:25:46 UTC."""

    n_restarts: int
    active_state: str
    active_exit: str  # when the unit last left `active` (its main process died, or a stop), as systemd printed it
    active_exit_local: datetime | None  # that time without its zone (systemd prints the station's local time)


class StationFacts:
    """Lazily gathered, cached facts; every method reads, none writes."""

    def __init__(self, host: StationHost, station: Station, profile: Profile) -> None:
        self.host, self.station, self.profile = host, station, profile
        self._scripts: dict[str, str | None] = {}  # read_script's answers, by path

    # --- plumbing -----------------------------------------------------------------------------------------------------

    def run(self, command: str, *args: str, ok_rcs: tuple[int, ...] = (0,)) -> str:
        line = command % tuple(shlex.quote(a) for a in args) if args else command
        result = self.host.run(line)
        if result.rc not in ok_rcs:
            detail = (result.stderr or result.stdout).strip().splitlines()
            program = shlex.split(line)[0] if line.strip() else line
            missing = result.rc == 127  # POSIX shells: command not found
            last = detail[-1] if detail else ""
            raise FactError(
                f"`{line}` failed on {self.station.name} (exit {result.rc}): {last}",
                fix=f"install `{program}` on {self.station.name} (or put it on the PATH golive's login "
                f"sees), then re-run"
                if missing
                else None,
                cause=f"`{program}` is not installed on {self.station.name}" if missing else None,
            )
        return result.stdout

    def read(self, path: str) -> str | None:
        f = self.host.file(path)
        return f.content_string if f.exists and f.is_file else None

    @property
    def service(self) -> Service:
        """The profile's service section; a profile without one has no unit or prestart to read."""
        if self.profile.service is None:
            raise FactError(
                "the profile has no `service:` section (unit, prestart, container)",
                fix="add the service section of your recipe to the site profile",
            )
        return self.profile.service

    # --- systemd ------------------------------------------------------------------------------------------------------

    @cached_property
    def systemd_running(self) -> bool:
        # sd_booted(3): systemd is PID 1 exactly when this directory exists
        return self.host.file("/run/systemd/system").is_directory and self.host.exists("systemctl")

    @cached_property
    def unit_path(self) -> str | None:
        """The unit file systemd loads: the first of the unit directories that holds it."""
        unit = self.service.unit
        for folder in UNIT_DIRS:
            path = f"{folder}/{unit}"
            if self.host.file(path).exists:
                return path
        return None

    @cached_property
    def unit_dropin_paths(self) -> list[str]:
        """The drop-ins systemd applies to the unit, in its order (`NAME.service.d/*.conf` in every unit directory)."""
        unit = self.service.unit
        names = unit_files.dropin_dir_names(unit)
        folders = [f"{d}/{n}" for d in UNIT_DIRS for n in names]
        listing = self.run(
            "find " + " ".join("%s" for _ in folders) + " -maxdepth 1 -name '*.conf' 2>/dev/null",
            *folders,
            ok_rcs=(0, 1),
        )
        return unit_files.order_dropins(listing.split(), unit)

    @cached_property
    def unit_from_files(self) -> systemd.UnitFacts:
        """The effective unit as systemd builds it from the files: the unit file, then each drop-in on top."""
        unit = self.service.unit
        if self.unit_path is None:
            raise FactError(
                f"unit {unit} not found in {', '.join(UNIT_DIRS)}",
                fix=f"install the recipe's unit as /etc/systemd/system/{unit}, then "
                f"`systemctl daemon-reload` and `systemctl enable {unit}`",
            )
        return self._with_environment(self._unit_of_files([self.unit_path, *self.unit_dropin_paths]))

    def _with_environment(self, unit: systemd.UnitFacts) -> systemd.UnitFacts:
        """The unit with its Environment=/EnvironmentFile= environment read and its Exec lines expanded in it, as
        systemd expands them when it starts the service (the env files as they are on the station now)."""
        return unit.with_environment(self.read, self._glob, self._is_dir)

    def _is_dir(self, path: str) -> bool:
        return bool(self.host.file(path).is_directory)

    def _glob(self, pattern: str) -> list[str]:
        """The station's paths matching an EnvironmentFile= glob, sorted as glob(3) sorts them."""
        if not re.fullmatch(r"/[A-Za-z0-9_./*?\[\]@+,:-]*", pattern):
            return [pattern]  # a path golive will not hand to a shell unquoted: read it as it is written
        listing = self.run(f"ls -1d -- {pattern} 2>/dev/null", ok_rcs=(0, 1, 2))
        return sorted(listing.split())

    def _unit_of_files(self, paths: list[str]) -> systemd.UnitFacts:
        unit = self.service.unit
        texts = [(path, self.read(path) or "") for path in paths]
        wants = self.run("ls -1 /etc/systemd/system/*.wants/ 2>/dev/null", ok_rcs=(0, 1, 2))
        enabled = unit in wants.split()
        container = self.container
        active = "active" if container and container.running else "inactive"
        host = self.specifier_values if any(systemd.HOST_SPECIFIER_RE.search(t) for _, t in texts) else None
        return systemd.read_unit(texts, enabled=enabled, active=active, host=host)

    @cached_property
    def specifier_values(self) -> dict[str, str]:
        """The host's values of systemd's specifiers (`%H` …), read where a unit file names one."""
        return systemd.host_specifiers(self.read, self.run("uname -m", ok_rcs=(0,)))

    @cached_property
    def unit(self) -> systemd.UnitFacts:
        """The unit as systemd runs it: `systemctl show` where systemd is PID 1 (with the file and line of each value,
        from FragmentPath= and DropInPaths=), else the unit file merged with its drop-ins."""
        unit = self.service.unit
        if not self.systemd_running:
            return self.unit_from_files
        props = systemd.parse_show(self.run("systemctl show %s", unit))
        shown = systemd.unit_from_show(props)
        fragment = (props.get("FragmentPath") or [""])[-1]
        dropins = " ".join(props.get("DropInPaths", [])).split()
        if not fragment:
            return self._with_environment(shown)
        return self._with_environment(shown.with_origins(self._unit_of_files([fragment, *dropins])))

    @cached_property
    def restarts(self) -> RestartRecord:
        """The unit's restart count and when it last went down, from systemd (`systemctl show`)."""
        props = systemd.parse_show(
            self.run("systemctl show %s -p NRestarts -p ActiveState -p ActiveExitTimestamp", self.service.unit)
        )
        count = (props.get("NRestarts") or [""])[-1]
        exited = (props.get("ActiveExitTimestamp") or [""])[-1].strip()
        when = None
        if exited:  # "Fri 2026-12-04 23:25:46 UTC": weekday, local date and time, the zone's abbreviation
            try:
                when = datetime.strptime(" ".join(exited.split()[1:3]), "%Y-%m-%d %H:%M:%S")
            except ValueError:
                raise FactError(f"`systemctl show` printed ActiveExitTimestamp={exited!r}: not a time") from None
        return RestartRecord(int(count) if count.isdigit() else 0, (props.get("ActiveState") or [""])[-1], exited, when)

    @cached_property
    def start_limit(self) -> StartLimitHit | None:
        """Whether systemd's start limit is what stopped the unit: it is failed, and systemd said so (Result=
        start-limit-hit, or its journal's last word on the unit is "Start request repeated too quickly", which
        systemd 252 logs while Result stays exit-code); None otherwise. Reads the journal's last 200 lines of the
        unit only where the unit is failed."""
        unit = self.unit
        if unit.active != "failed":
            return None
        name = self.service.unit
        result = (systemd.parse_show(self.run("systemctl show %s -p Result", name)).get("Result") or [""])[-1]
        journal = self.run("journalctl -u %s -n 200 --no-pager -o short-iso 2>/dev/null", name, ok_rcs=(0, 1))
        lines = [line.strip() for line in journal.splitlines() if line.strip()]
        refused = [i for i, line in enumerate(lines) if "Start request repeated too quickly" in line]
        said = refused[-1] if refused else None
        started_after = said is not None and any(
            re.search(r"\]: (Started|Starting) ", line) for line in lines[said + 1 :]
        )
        if result != "start-limit-hit" and (said is None or started_after):
            return None
        return StartLimitHit(result, lines[said] if said is not None else "", self.restarts.n_restarts)

    def saved_logs(self, folder: str) -> list[SavedLog]:
        """The files in `folder` (not its dot files), newest first; [] when it does not exist."""
        text = self.run(
            "find %s -maxdepth 1 -type f ! -name '.*' -exec stat -c '%%n|%%s|%%y' {} + 2>/dev/null",
            folder,
            ok_rcs=(0, 1),
        )
        logs = []
        for line in text.splitlines():
            path, size, written = (line.rsplit("|", 2) + ["", ""])[:3]
            try:  # "2026-12-04 23:25:47.516874436 +0000": local date and time (to the second), then the offset
                local = datetime.strptime(" ".join(written.split()[:2]).split(".")[0], "%Y-%m-%d %H:%M:%S")
            except ValueError:
                continue
            if size.isdigit():
                logs.append(SavedLog(path, int(size), re.sub(r"\.\d+", "", written, count=1), local))
        return sorted(logs, key=lambda log: (log.written_local, log.path), reverse=True)

    @cached_property
    def _docker_run_found(self) -> tuple[list[str], bash.ShellCommand | None] | None:
        return self.docker_run_in(self.unit)

    def docker_run_in(self, unit: systemd.UnitFacts) -> tuple[list[str], bash.ShellCommand | None] | None:
        """The `docker run` a unit's ExecStart performs: its words, and where ExecStart runs a shell script that runs
        it (`ExecStart=/usr/local/bin/glm53-flash-run.sh` with `exec docker run …` in it) that script's command, as
        bash would pass its words, with its file and line. ExecStart's own words (directly or through `sh -c`) come
        first; a script's line that never runs does not count. None when neither runs one."""
        for command in unit.exec_start:
            for candidate in bash.commands_of(command.argv, origin="ExecStart"):
                if docker.is_docker_run(candidate.argv):
                    return list(candidate.argv), None
        cwd, why = self.unit_directory
        env = {name: setting.value for name, setting in unit.env.items()}
        for command in unit.exec_start:
            found = bash.script_run_by(command.argv, self.read_script, env, cwd, why)
            for candidate in found[1].commands if found is not None else []:
                if docker.is_docker_run(candidate.runs) and not candidate.never_runs:
                    return candidate.runs, replace(candidate, argv=tuple(candidate.runs))
        return None

    @cached_property
    def docker_run(self) -> docker.DockerRun | None:
        """The `docker run` that the unit's ExecStart performs: directly, through `sh -c`, or in a shell script it
        runs (docker_run_script)."""
        found = self._docker_run_found
        return docker.parse_run(found[0]) if found is not None else None

    @property
    def docker_run_words(self) -> list[str]:
        """The docker run line's words as systemd runs them (exec_lines.Word: each knows the line that set it), or as
        bash passes them where ExecStart runs a script that runs it; [] when there is none."""
        found = self._docker_run_found
        return found[0] if found is not None else []

    @property
    def docker_run_script(self) -> bash.ShellCommand | None:
        """The `docker run` in a shell script that ExecStart runs, with its file and line; None where ExecStart's own
        words are the docker run, or nothing runs one."""
        found = self._docker_run_found
        return found[1] if found is not None else None

    def docker_run_place(self) -> str:
        """Where to edit the docker run line, for a Do: `ExecStart of UNIT (FILE:LINE)`, a drop-in's if one set it,
        or the script's file and line when ExecStart runs a script that runs it."""
        unit = self.service.unit
        script = self.docker_run_script
        if script is not None:
            return f"{script.where()} (the `docker run` that ExecStart of {unit} runs)"
        where = self.unit.set_at.get("ExecStart")
        return f"ExecStart of {unit}" + (f" ({where})" if where else "")

    def served_config(self, args: list[str], mounts: list[tuple[str, str]]) -> ServedConfig:
        """vLLM's arguments once it read its `--config FILE` (vllm.with_config), FILE read on the station through
        the container's bind mounts (`mounts`: host path, container path). Where vLLM would refuse it (no such file,
        not YAML) `refused` says why; where golive cannot read it (a path no mount holds: the image's own) `unknown`
        says why; without `--config`, the arguments as they are."""
        path = vllm.config_file(args)
        if path is None:
            return ServedConfig(list(args))
        tokens = list(args)[vllm.served_args_start(args) or 0 :]
        if not path or tokens.count("--config") > 1:
            return ServedConfig(list(args), refused="`--config` names no file, or is given more than once")
        if not path.startswith("/"):
            return ServedConfig(
                list(args),
                unknown=f"`--config {path}` is relative to the container's working directory, which golive does "
                "not read",
            )
        host = docker.host_path(path, mounts)
        if host is None:
            return ServedConfig(
                list(args),
                unknown=f"`--config {path}` is in the container's own file system (no bind mount holds it): golive "
                f"does not read inside containers",
            )
        text = self.read(host)
        said = host if host == path else f"{host} (mounted at {path} in the container)"
        if text is None:
            return ServedConfig(
                list(args), path, host, refused=f"`--config {path}`: {said} does not exist, so vLLM stops at start"
            )
        try:
            return ServedConfig(vllm.with_config(list(args), text, host), path, host)
        except vllm.RejectedValue as exc:
            return ServedConfig(list(args), path, host, refused=f"{exc} ({said})")

    # --- prestart -----------------------------------------------------------------------------------------------------

    @cached_property
    def prestart_text(self) -> str | None:
        return self.read(self.service.prestart)

    @cached_property
    def prestart_mode(self) -> int | None:
        """Permission bits of the prestart script (`stat`), None when it does not exist."""
        f = self.host.file(self.service.prestart)
        return f.mode if f.exists else None

    @cached_property
    def prestart(self) -> bash.Script:
        if self.prestart_text is None:
            raise FactError(
                f"prestart script {self.service.prestart} does not exist",
                fix=f"install the recipe's prestart script as {self.service.prestart} (mode 0755)",
            )
        # read=: the files it sources or runs are read the same way, read-only; env=: what systemd starts it with;
        # cwd=: where systemd starts it (WorkingDirectory=, else `/`): a relative path resolves against it
        cwd, why = self.unit_directory
        return bash.parse_script(
            self.prestart_text,
            origin=self.service.prestart,
            read=self.read,
            env=self.unit_environment,
            cwd=cwd,
            cwd_why=why,
            is_dir=self._is_dir,
        )

    @property
    def unit_directory(self) -> tuple[str | None, str]:
        """Where systemd runs the unit's commands, and why there, for messages: WorkingDirectory= (where it exists),
        else `/`. (None, why) where the unit cannot be read."""
        try:
            unit = self.unit
        except FactError as exc:
            return None, f"golive could not read {self.service.unit}: {exc}"
        wanted = unit.working_directory
        if wanted is None:
            return "/", f"where systemd runs the unit's commands: {self.service.unit} sets no WorkingDirectory="
        at = unit.set_at.get("WorkingDirectory", "systemctl show")
        if unit.run_directory == "/" and wanted.removeprefix("-") not in ("/", "~"):
            return "/", f"WorkingDirectory={wanted} ({at}) does not exist, so systemd runs the commands in `/`"
        return unit.run_directory, f"WorkingDirectory={wanted} of {self.service.unit} ({at})"

    @property
    def unit_environment(self) -> dict[str, str]:
        """The environment systemd starts the unit's commands with (Environment=, EnvironmentFile=): a script they
        run sees these variables. None known where the unit cannot be read (its own check says why)."""
        try:
            env = self.unit.env
        except FactError:
            return {}
        return {name: setting.value for name, setting in env.items()}

    def read_script(self, path: str) -> str | None:
        """A file's text when it can be a script: at most SCRIPT_MAX_BYTES (a program such as /usr/bin/docker is not
        read whole to find out) and text; None otherwise."""
        if path not in self._scripts:
            found = self.host.run(f"stat -Lc '%F %s' {shlex.quote(path)}")  # one command: kind and size
            kind, _, size = found.stdout.strip().rpartition(" ")
            text = None
            if found.rc == 0 and kind == "regular file" and size.isdigit() and int(size) <= SCRIPT_MAX_BYTES:
                try:
                    text = self.host.file(path).content_string
                except UnicodeDecodeError:  # a small binary
                    text = None
            self._scripts[path] = text
        return self._scripts[path]

    def exec_line_commands(self, key: str, command: ExecCommand) -> list[bash.ShellCommand]:
        """One Exec line's command, what it runs inline (`sh -c`), and the commands of the shell script it runs
        (`ExecStopPost=/usr/local/bin/cleanup.sh`), in order; named by its setting and the unit file line."""
        origin = f"{key} of {self.service.unit}" + (f" ({command.where})" if command.where else "")
        cwd, why = self.unit_directory
        commands = bash.commands_of(command.argv, origin=origin, cwd=cwd, cwd_why=why)
        script = bash.script_run_by(command.argv, self.read_script, self.unit_environment, cwd, why)
        return commands + (script[1].commands if script is not None else [])

    def unit_commands(self, key: str) -> list[bash.ShellCommand]:
        """The commands of one Exec setting (`ExecStop`, …), in order (exec_line_commands)."""
        return [
            c for command in getattr(self.unit, systemd.EXEC_KEYS[key]) for c in self.exec_line_commands(key, command)
        ]

    def prestart_sequence(self) -> list[bash.ShellCommand]:
        """What systemd runs before the container's start, in order: every ExecStartPre= line, one after the other
        (systemd.service(5)), with the prestart script's own commands in place of the line that runs it. Where no
        line runs it, its commands come first: test_prestart_is_what_the_unit_runs_before_start says so, once."""
        sequence: list[bash.ShellCommand] = []
        placed = False
        for command in self.unit.exec_start_pre:
            if not placed and self.service.prestart in command.argv:
                sequence.extend(self.prestart.commands)
                placed = True
                continue
            sequence.extend(self.exec_line_commands("ExecStartPre", command))
        return sequence if placed else [*self.prestart.commands, *sequence]

    def start_sequence(self) -> list[bash.ShellCommand]:
        """What one start attempt runs, in order: the ExecStartPre lines (the prestart's commands), ExecStart,
        ExecStartPost."""
        return [*self.prestart_sequence(), *self.unit_commands("ExecStart"), *self.unit_commands("ExecStartPost")]

    def between_containers(self) -> list[bash.ShellCommand]:
        """What runs from a container's end to the next one's start, in order: ExecStop= and ExecStopPost= (after a
        crash too: systemd.service(5), ExecStop=), then the ExecStartPre lines with the prestart's commands."""
        return [*self.unit_commands("ExecStop"), *self.unit_commands("ExecStopPost"), *self.prestart_sequence()]

    # --- docker -------------------------------------------------------------------------------------------------------

    @cached_property
    def container_name(self) -> str:
        if self.profile.service:
            return self.profile.service.container
        return "vllm"

    @cached_property
    def container(self) -> docker.ContainerFacts | None:
        result = self.host.run("docker inspect %s", self.container_name)
        if result.rc != 0:
            if "No such" in result.stderr or "no such" in result.stderr:
                return None
            raise FactError(
                f"`docker inspect {self.container_name}` failed (exit {result.rc}): {result.stderr.strip()}"
            )
        return docker.parse_container_inspect(result.stdout)

    def image(self, image_id: str) -> docker.ImageFacts:
        return docker.parse_image_inspect(self.run("docker image inspect %s", image_id))

    # --- GPUs and NUMA ------------------------------------------------------------------------------------------------

    @cached_property
    def gpus(self) -> list[dict[str, str]]:
        fields = ",".join(QUERY_GPU)
        text = self.run(f"nvidia-smi --query-gpu={fields} --format=csv,noheader,nounits")
        return gpu.parse_query_csv(text, QUERY_GPU)

    @cached_property
    def smi_q_text(self) -> str:
        return self.run("nvidia-smi -q")

    @cached_property
    def smi_q(self) -> list[gpu.SmiGpu]:
        return gpu.parse_smi_q(self.smi_q_text)

    @cached_property
    def smi_versions(self) -> dict[str, str | None]:
        """The driver and CUDA version nvidia-smi reports (provenance of the go-live record)."""
        return gpu.parse_smi_versions(self.smi_q_text)

    @cached_property
    def compute_apps(self) -> list[dict[str, str]]:
        fields = ",".join(QUERY_APPS)
        text = self.run(f"nvidia-smi --query-compute-apps={fields} --format=csv,noheader,nounits")
        return gpu.parse_query_csv(text, QUERY_APPS)

    def serving_gpus(self) -> list[dict[str, str]]:
        want = self.profile.gpu.name_contains.lower()
        return [g for g in self.gpus if want in g["name"].lower()]

    @cached_property
    def nodes(self) -> dict[int, NumaNode]:
        """NUMA nodes: {n: {"cpus": set, "meminfo": {...}}}."""
        online = gpu.parse_cpulist(self.read("/sys/devices/system/node/online") or "")
        nodes: dict[int, NumaNode] = {}
        for n in sorted(online):
            base = f"/sys/devices/system/node/node{n}"
            meminfo = self.read(f"{base}/meminfo")
            nodes[n] = {
                "cpus": gpu.parse_cpulist(self.read(f"{base}/cpulist") or ""),
                "meminfo": gpu.parse_node_meminfo(meminfo) if meminfo else {},
            }
        return nodes

    @cached_property
    def hbm_nodes(self) -> list[HbmNode]:
        """The GPU memory's NUMA nodes, from the driver first; [] on a machine without coherent GPU memory."""
        found = []
        listing = self.run("ls -1 /proc/driver/nvidia/gpus 2>/dev/null", ok_rcs=(0, 1, 2))
        for bdf in listing.split():
            status = self.read(f"/proc/driver/nvidia/gpus/{bdf}/numa_status")
            node = gpu.parse_numa_status(status) if status else None
            if node is not None:
                found.append(HbmNode(node, f"driver numa_status of {bdf}"))
        if found:
            return found
        memory_only = [
            n for n, info in self.nodes.items() if not info["cpus"] and info["meminfo"].get("MemTotal", 0) > 0
        ]
        if not memory_only or not self.host.exists("nvidia-smi"):
            return []
        ats = [g.bus_id for g in self.smi_q if (g.addressing_mode or "").upper() == "ATS"]
        how = (
            f"memory-only node, GPU {ats[0]} in ATS addressing mode" if ats else "memory-only node beside an NVIDIA GPU"
        )
        return [HbmNode(n, how) for n in memory_only]

    def pid_container(self, pid: str) -> str | None:
        text = self.read(f"/proc/{pid}/cgroup")
        return gpu.container_id_in_cgroup(gpu.parse_cgroup(text)) if text else None

    # --- checkpoint ---------------------------------------------------------------------------------------------------

    @cached_property
    def checkpoint_dir(self) -> str:
        """The profile's checkpoint.path, once it is a folder on the station (every checkpoint check needs it)."""
        path = self.profile.checkpoint.path
        if not path:
            raise FactError(
                "the profile gives no checkpoint.path",
                fix="set `checkpoint.path` (where this station keeps the checkpoint) in your site profile",
            )
        if not self.host.file(path).is_directory:
            raise FactError(
                f"checkpoint folder {path} does not exist on {self.station.name}",
                fix=f"download the checkpoint into {path} (`numactl --membind={dram_node(self.profile)} "
                f"huggingface-cli download {self.profile.checkpoint.repository} --local-dir {path}`), or set "
                f"checkpoint.path in the site profile to where this station keeps it",
            )
        return path

    @cached_property
    def shards(self) -> list[Shard]:
        text = self.run(
            "find %s -maxdepth 1 -name '*.safetensors' -exec stat -c '%%n|%%s' {} +", self.checkpoint_dir, ok_rcs=(0, 1)
        )
        shards = []
        for line in text.splitlines():
            name, _, size = line.rpartition("|")
            if name:
                shards.append(Shard(name.rsplit("/", 1)[-1], int(size)))
        return sorted(shards, key=lambda s: s.name)

    def checkpoint_json(self, name: str) -> dict[str, Any] | None:
        text = self.read(f"{self.checkpoint_dir}/{name}")
        if text is None:
            return None
        try:
            document: dict[str, Any] = json.loads(text)  # a checkpoint's JSON files are objects
            return document
        except json.JSONDecodeError as exc:
            raise FactError(f"{self.checkpoint_dir}/{name} is not valid JSON: {exc.msg} (line {exc.lineno})") from None

    @cached_property
    def shard_manifest_sha256(self) -> str:
        """sha256 of the shard list (`name size` lines, sorted): changes when any shard is added, lost or resized."""
        return hashlib.sha256("".join(f"{s.name} {s.size}\n" for s in self.shards).encode()).hexdigest()

    def checkpoint_sha256(self, name: str) -> str | None:
        """sha256 of a checkpoint file as read (config.json, the index): which checkpoint this is, for the record."""
        text = self.read(f"{self.checkpoint_dir}/{name}")
        return hashlib.sha256(text.encode()).hexdigest() if text is not None else None

    def free_bytes(self, path: str) -> int:
        """Free space on the filesystem holding `path` (POSIX `df -P -k`)."""
        lines = self.run("df -P -k %s", path).strip().splitlines()
        fields = lines[-1].split()
        if len(lines) < 2 or len(fields) < 6 or not fields[3].isdigit():
            raise FactError(f"`df -P -k {path}` printed an unexpected line: {lines[-1] if lines else ''!r}")
        return int(fields[3]) * 1024
