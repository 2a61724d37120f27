"""The container systemd starts: docker flags, image pin, served vLLM flags [000][002]."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import not_applicable, require
from golive.facts import exec_lines
from golive.facts.vllm import (
    ALL_INTERFACES,
    VALUE_TYPES,
    ConfigWord,
    FlagUse,
    RejectedValue,
    describe_tokens,
    flag_uses,
    parse_max_model_len,
    parse_serve_args,
    refused_args,
    repeated_flags,
    served_host,
    speculative_tokens,
)
from golive.profile.recipe import (
    RUN_LINE,
    docker_restart_policy,
    dram_node,
    dram_pin,
    pinned_flags,
    running_image_not_pinned,
)

if TYPE_CHECKING:
    from golive.facts.docker import DockerRun
    from golive.profile.inventory import Station
    from golive.profile.schema import Profile, Service
    from golive.run.fixtures import RecordFinding, RecordProvenance
    from golive.station.host import ServedConfig, StationFacts

pytestmark = pytest.mark.host


def _reload(unit_name: str) -> str:
    return f"`systemctl daemon-reload && systemctl restart {unit_name}`"


def _via_env(word: str) -> bool:
    return isinstance(word, exec_lines.Word) and bool(word.settings or word.unset)


def _option_words(facts: StationFacts, *names: str) -> list[str]:
    """The docker run words of these options and their values (`--restart always`, `--restart=always`)."""
    words = facts.docker_run_words
    found = []
    for i, word in enumerate(words):
        if word in names and i + 1 < len(words):
            found += [word, words[i + 1]]
        elif any(word.startswith(f"{name}=") for name in names):
            found.append(word)
    return found


def _origin_and_place(facts: StationFacts, words: list[str]) -> tuple[str, str]:
    """(` (set by …)` for a finding, where to edit) for docker run words: the env file or Environment= line of a
    variable in them, else the ExecStart line."""
    env_words = [w for w in words if _via_env(w)]
    if not env_words:
        return "", facts.docker_run_place()
    origins = dict.fromkeys(exec_lines.origin_of(w) for w in env_words)
    places = dict.fromkeys(exec_lines.edit_place(w, facts.docker_run_place()) for w in env_words)
    return f" ({'; '.join(origins)})", ", ".join(places)


@pytest.fixture
def docker_run(facts: StationFacts, service: Service) -> DockerRun:
    run = facts.docker_run
    require(
        run is not None,
        found=f"ExecStart of {service.unit} does not run `docker run`: "
        f"{[' '.join(c.argv) for c in facts.unit.exec_start]}",
        recipe="systemd starts the vLLM container with `docker run` in ExecStart [000]",
        fix=f"make {facts.docker_run_place()} the recipe's `docker run … IMAGE@sha256:… --model …` line",
    )
    assert run is not None  # require() ended the check otherwise
    return run


@check("host.container.no_docker_restart_policy", Cost.READ)
def test_docker_has_no_restart_policy(facts: StationFacts, docker_run: DockerRun, service: Service) -> None:
    """Docker has no --restart flag: systemd owns restarts, so the prestart runs on every attempt [000]."""
    policy = docker_restart_policy(docker_run, facts.container)
    origin, place = _origin_and_place(facts, _option_words(facts, "--restart"))
    require(
        policy is None,
        found=policy.said(origin if policy.where == RUN_LINE else "") if policy else "",
        recipe="no `--restart` on the docker run line: a docker restart skips the prestart and its drop_caches [000]",
        fix=f"remove `--restart=…` from {place} (or use --restart=no), then {_reload(service.unit)}",
    )


@check("host.container.not_pinned_to_dram_node", Cost.READ)
def test_container_not_pinned_to_dram_node(
    facts: StationFacts, docker_run: DockerRun, profile: Profile, service: Service
) -> None:
    """The vLLM container is NOT confined to the DRAM node (confined there, CUDA init fails with Error 802) [000]."""
    dram = dram_node(profile)
    pin = dram_pin(profile, docker_run, facts.container)
    origin, place = _origin_and_place(facts, _option_words(facts, "--cpuset-mems"))
    container = facts.container
    seen = [f"docker run --cpuset-mems {v}" for v in docker_run.values("--cpuset-mems") if v]
    if container is not None and container.cpuset_mems:  # what Docker applied to the container that runs now
        seen.append(f"docker inspect {container.name} HostConfig.CpusetMems {container.cpuset_mems!r}")
    require(
        pin is None,
        found=f"{pin} ({'; '.join(seen)}){origin}",
        recipe=f"I/O jobs get node {dram}; the serving container gets the whole machine — pinned to node {dram} "
        f"CUDA init fails with Error 802 [000]",
        fix=f"remove `--cpuset-mems` from {place}, then {_reload(service.unit)}; keep `numactl --membind={dram}` "
        f"for downloads and copies only",
    )


@check("host.image.pinned_by_digest", Cost.READ)
def test_image_pinned_by_digest(facts: StationFacts, docker_run: DockerRun, profile: Profile, service: Service) -> None:
    """The image is referenced by @sha256 digest, the one the profile pins [000][002]."""
    image = docker_run.image
    pin = profile.image.digest
    origin, place = _origin_and_place(facts, [w for w in facts.docker_run_words if w == str(image)])
    require(
        pin is not None,
        found=f"the unit runs {image}; the profile pins no digest",
        recipe="the image is pinned by digest; the suite is the post-upgrade gate [000][002]",
        fix="record the digest you validated (`docker image inspect --format '{{index .RepoDigests 0}}' IMAGE`) "
        "as image.digest in your site profile",
    )
    require(
        image.digest == pin,
        found=f"the unit runs {image}" + ("" if image.digest else " (a tag: it moves under you)") + origin,
        recipe=f"{profile.image.repository}@{pin} [000]",
        fix=f"reference the image as {profile.image.repository}@{pin} in {place}, then {_reload(service.unit)}"
        "; if you upgraded on purpose, re-run the whole suite and then update image.digest in the profile",
    )


@check("host.image.running_container_runs_pinned_image", Cost.READ)
def test_running_container_runs_pinned_image(
    facts: StationFacts, docker_run: DockerRun, profile: Profile, service: Service, station: Station
) -> None:
    """The running container runs the image the unit pins (docker inspect), not an older one [000]."""
    if station.phase == "pre-start":
        not_applicable("pre-start phase: no container is expected to run")
    container = facts.container
    if (container is None or not container.running) and facts.systemd_running and facts.start_limit is not None:
        pytest.skip(
            f"not checked because test_unit_is_enabled_and_active failed on the same cause: systemd's start limit "
            f"stopped {service.unit}, so container {facts.container_name} is "
            f"{'absent' if container is None else container.status}"
        )
    require(
        container is not None and container.running,
        found=f"container {facts.container_name} is {'absent' if container is None else container.status}",
        recipe="the serving station runs the container systemd started [000]",
        fix=f"`systemctl start {service.unit}` and read `journalctl -u {service.unit}`",
    )
    assert container is not None  # require() ended the check otherwise
    running = facts.image(container.image_id)
    wanted = running_image_not_pinned(docker_run, profile.image.digest, running.digests())
    tag = docker_run.image if docker_run.image.digest is None else None  # a restart runs what the tag names now
    moved = tag is not None and str(tag) in running.repo_tags
    require(
        wanted is None,
        found=f"container {container.name} runs image {container.image_id[:19]}… with digests "
        f"{sorted(running.digests()) or 'none'} (started as {container.config_image}"
        + (f"; the tag {tag} names this image now: it was re-pushed or re-pulled" if moved else "")
        + ")",
        recipe=f"the running image is {profile.image.repository}@{wanted}, the one the "
        f"{'profile' if tag else 'unit'} pins [000]",
        fix=(
            f"a restart alone runs the tag {tag} again: reference the image as {profile.image.repository}@{wanted} "
            f"in {facts.docker_run_place()} (test_image_pinned_by_digest), then {_reload(service.unit)}"
            if tag
            else f"`systemctl restart {service.unit}` so the pinned image runs"
        )
        + " (the prestart saves the old container's logs first)",
    )


def _same(flag: str, got: str | bool | None, want: object) -> bool:
    """Compare as vLLM reads the served value (its argparse types), not as text."""
    if isinstance(want, bool):
        return got is want or (want is False and got is None)
    if got is None or got is True or got is False:
        return False
    if flag in VALUE_TYPES:
        try:
            return VALUE_TYPES[flag](got) == want
        except (ValueError, RejectedValue):  # test_served_flags_are_accepted_by_vllm reports it
            return False
    return got == want


def _refused(flag: str, got: str) -> bool:
    try:
        VALUE_TYPES[flag](got)
    except (ValueError, RejectedValue):
        return True
    return False


def _shown(flag: str, got: str | bool | None, want: object) -> str:
    """`--max-model-len: 1m = 1,000,000 tokens; the recipe serves 1,048,576`: the value as vLLM reads it."""
    if flag == "max-model-len" and isinstance(got, str):
        try:
            return f"--{flag}: {describe_tokens(got, parse_max_model_len(got))}; the recipe serves {want:,}"
        except RejectedValue:
            pass
    shown = "absent" if got is None else ("on" if got is True else "off" if got is False else got)
    return f"--{flag}: {shown}, recipe {('on' if want else 'off') if isinstance(want, bool) else want}"


def _served(facts: StationFacts, docker_run: DockerRun, service: Service, station: Station) -> tuple[ServedConfig, str]:
    """The served vLLM arguments (the running container's when serving, else the unit's), with vLLM's `--config`
    file read in (through the container's bind mounts), and where they came from."""
    container = facts.container
    if station.phase == "serving" and container is not None and container.running:
        served = facts.served_config(container.args, container.mounts)
        source = f"docker inspect {container.name} Args"
    else:
        script = facts.docker_run_script
        served = facts.served_config(docker_run.args, docker_run.mounts)
        source = f"ExecStart of {service.unit}" if script is None else script.where()
    if served.host_path:
        source += f" and its --config file {served.host_path}"
    return served, source


def _config_unread(served: ServedConfig, what: str) -> None:
    """Not checked where golive cannot read vLLM's `--config` file: the flags in it are not known."""
    if served.unknown:
        pytest.skip(f"not checked: {served.unknown}, and {what} may be set in it")


class _Origins:
    """Where each served flag's value is set: the unit's docker run words after systemd's `${VAR}`/`$VAR` expansion
    (exec_lines.Word), so a value read from an EnvironmentFile= or an Environment= line names that file and line, and
    the Do edits it there; a value written in ExecStart points at ExecStart, as before."""

    def __init__(self, facts: StationFacts, docker_run: DockerRun) -> None:
        self.default = facts.docker_run_place()
        self.args = facts.served_config(docker_run.args, docker_run.mounts).args  # the --config file's words too
        self.uses = flag_uses(self.args)
        self.notes = facts.unit.env_notes
        self.skipped = facts.unit.skipped_env_files

    def _words(self, flag: str, occurrence: int) -> list[str]:
        uses = self.uses.get(flag)
        if not uses:
            return []
        use = uses[occurrence] if -len(uses) <= occurrence < len(uses) else uses[-1]
        return [self.args[i] for i in use.words]

    def origin(self, flag: str, occurrence: int = -1, always: bool = False) -> str:
        """`/etc/default/glm53-flash:3 sets MAX_LEN=1m, expanded in ExecStart (FILE:LINE)`; "" for a value written
        in ExecStart unless `always`."""
        config = [w for w in self._words(flag, occurrence) if isinstance(w, ConfigWord)]
        if config:
            return f"set at {config[-1].where}, vLLM's --config file"
        words = [w for w in self._words(flag, occurrence) if isinstance(w, exec_lines.Word) and (always or _via_env(w))]
        texts = list(dict.fromkeys(exec_lines.origin_of(w) for w in words))
        if any(w.unset for w in words):  # a missing env file, a line systemd skips: why the variable is unset
            texts += [
                n for n in self.notes if any(name in n for w in words for name in w.unset) or "EnvironmentFile=" in n
            ]
            texts += [
                f"EnvironmentFile=-{ref.path} ({ref.where or 'systemctl show'}) names a file that does not exist, "
                f"and its `-` makes systemd skip it without a word"
                for ref in self.skipped
            ]
        return "; ".join(t for t in texts if t)

    def place(self, flag: str, occurrence: int = -1) -> str:
        """What to edit so that the flag changes: vLLM's config file's line, the variable's line (a missing env file
        put back), else ExecStart."""
        words = self._words(flag, occurrence)
        config = [w for w in words if isinstance(w, ConfigWord)]
        if config:
            path, _, line = config[-1].where.rpartition(":")
            return f"`{flag}:` in {path} (line {line}), vLLM's --config file"
        if self.skipped and any(isinstance(w, exec_lines.Word) and w.unset for w in words):
            files = ", ".join(f"{ref.path} (EnvironmentFile=- at {ref.where or 'the unit'})" for ref in self.skipped)
            return f"{files}: put the file back (or set the variable in an `Environment=` line)"
        places = dict.fromkeys(exec_lines.edit_place(w, self.default) if _via_env(w) else self.default for w in words)
        return ", ".join(places) or self.default

    def stale(self, flag: str, served: str | bool | None) -> str:
        """`; the unit now gives 1048576 …` when the running container was started with another value than the unit
        (or its environment) gives now: a restart is what is missing."""
        uses = self.uses.get(flag)
        now = uses[-1].value if uses else None
        if now == served:
            return ""
        return (
            f"; the unit now gives {'no such flag' if now is None else _text(now)}"
            f"{f' ({self.origin(flag)})' if self.origin(flag) else ''}: a restart serves it"
        )

    def twice(self, flag: str, uses: list[FlagUse]) -> str:
        """`--max-model-len is given 2 times: 1048576 (…), then 1m (…); vLLM keeps the last, 1m`."""
        unit_uses = self.uses.get(flag, [])
        same = len(unit_uses) == len(uses)
        shown = [
            f"{_text(u.value)} ({self.origin(flag, i, always=True) or 'as served'})" if same else _text(u.value)
            for i, u in enumerate(uses)
        ]
        return (
            f"--{flag} is given {len(uses)} times: {', then '.join(shown)}; vLLM's argparse keeps the last, "
            f"{_text(uses[-1].value)}"
        )


def _text(value: object) -> str:
    return "on" if value is True else "off" if value is False else str(value)


@check("host.vllm.served_flags_accepted_by_vllm", Cost.READ)
def test_served_flags_are_accepted_by_vllm(
    facts: StationFacts, docker_run: DockerRun, service: Service, station: Station
) -> None:
    """vLLM's own argument parser accepts every served flag (value types, switches, no stray words); a value it
    refuses stops `vllm serve` before it serves [000][002]."""
    served, source = _served(facts, docker_run, service, station)
    require(
        served.refused is None,
        found=f"vLLM would stop at start ({source}): {served.refused}",
        recipe="vLLM starts with the recipe's flags; a --config file it cannot read ends `vllm serve` at once [000]",
        fix=f"put vLLM's --config file where {facts.docker_run_place()} says (a .yaml file on a bind mount), or "
        f"remove `--config`, then {_reload(service.unit)}",
    )
    _config_unread(served, "a value vLLM refuses")
    args = served.args
    refused = refused_args(args)
    origins = _Origins(facts, docker_run)
    lines: list[str] = []
    places: dict[str, None] = {}  # where to edit, in order, once each
    for refusal in refused:
        origin = origins.origin(refusal.flag) if refusal.flag else ""
        lines.append(refusal.text + (f" ({origin})" if origin else ""))
        places[origins.place(refusal.flag) if refusal.flag else origins.default] = None
    require(
        not refused,
        flags=[refusal.flag for refusal in refused if refusal.flag],
        found=f"vLLM would refuse the served arguments ({source}): " + "; ".join(lines),
        recipe="vLLM starts with the recipe's flags; a value its parser refuses ends `vllm serve` at once [000]",
        fix=f"correct the value in {', '.join(places)} as vLLM spells it (lowercase "
        f"k/m/g/t = powers of 10, uppercase K/M/G/T = powers of 2, whole numbers only with K/M/G/T; switches "
        f"take no value), then {_reload(service.unit)}",
    )


@check("host.vllm.served_flags_match_profile", Cost.READ)
def test_served_flags_match_profile(
    facts: StationFacts,
    docker_run: DockerRun,
    profile: Profile,
    service: Service,
    station: Station,
    record_finding: RecordFinding,
    record_provenance: RecordProvenance,
) -> None:
    """vLLM is served with the recipe's flags: context, sequences, memory, prefill, caching, parsers, speculative
    decoding, bind address, port, name [000][002]; an open bind without auth is reported, and so is a flag given
    twice (vLLM keeps the last). A value set through the unit's environment names the file and line that set it."""
    config, source = _served(facts, docker_run, service, station)
    if config.refused:
        pytest.skip(
            f"not checked: vLLM would stop at start ({config.refused}): see test_served_flags_are_accepted_by_vllm"
        )
    _config_unread(config, "every served flag")
    args = config.args
    served = parse_serve_args(args)
    origins = _Origins(facts, docker_run)
    repeated = repeated_flags(args)
    record_provenance(
        served_args=served,
        served_args_source=source,
        pinned_flags=pinned_flags(profile, station.vllm_model),
        parsers={p: served.get(p) for p in ("tool-call-parser", "reasoning-parser")},
        image=str(docker_run.image),
        image_digest=docker_run.image.digest,
    )
    wrong, wrong_flags, places, unreadable = _differing_flags(
        profile, served, source, origins, repeated, station.vllm_model
    )
    require(
        not wrong,
        flags=wrong_flags,
        found=f"served flags differ ({source}): " + "; ".join(wrong),
        recipe="the served flags are the recipe's; parser names are pinned to the vLLM build [000]",
        fix=f"fix the flags in {', '.join(places) or origins.default}"
        + (
            " (a flag given twice: vLLM serves the last; delete the others)"
            if any(f"--{f}" in " ".join(wrong) for f in repeated)
            else ""
        )
        + f", then {_reload(service.unit)}, "
        f"then re-run the endpoint layer (tool calls are a launch blocker)",
    )
    if unreadable:
        pytest.skip(
            f"not checked: {', '.join(unreadable)} (vLLM refuses the value: see "
            f"test_served_flags_are_accepted_by_vllm); every other served flag matches"
        )
    notes = _bind_and_twice_notes(profile, served, source, origins, repeated)
    if notes:
        record_finding(" ".join(notes))


def _differing_flags(
    profile: Profile,
    served: dict[str, str | bool],
    source: str,
    origins: _Origins,
    repeated: dict[str, list[FlagUse]],
    vllm_model: str | None,
) -> tuple[list[str], list[str], dict[str, None], list[str]]:
    """The served flags that are not the recipe's: a line each (with where it is set), their flags (what an endpoint
    check they explain is tied to), the places to edit (in order, once each); and the values vLLM refuses, not
    compared here."""
    wrong: list[str] = []
    wrong_flags: list[str] = []  # the flags of `wrong`: what an endpoint check they explain is tied to
    unreadable: list[str] = []
    places: dict[str, None] = {}  # where to edit, in order, once each
    for flag, want in pinned_flags(profile, vllm_model).items():
        got = served.get(flag)
        if flag in VALUE_TYPES and isinstance(got, str) and _refused(flag, got):
            unreadable.append(f"--{flag} {got}")
            continue
        if not _same(flag, got, want):
            origin = origins.origin(flag)
            wrong.append(
                _shown(flag, got, want)
                + (f" ({origin})" if origin and flag not in repeated else "")
                + (f" — {origins.twice(flag, repeated[flag])}" if flag in repeated else "")
                + (origins.stale(flag, got) if source.startswith("docker inspect") else "")
            )
            wrong_flags.append(flag)
            places[origins.place(flag)] = None
    want_tokens = profile.vllm.speculative_num_tokens
    if want_tokens is not None and speculative_tokens(served) != want_tokens:
        wrong.append(
            f"speculative decoding: {speculative_tokens(served)} draft tokens, recipe {want_tokens}"
            + (
                f' (--speculative-config \'{{"method": "mtp", "num_speculative_tokens": {want_tokens}}}\')'
                if want_tokens
                else " (no --speculative-config)"
            )
        )
        wrong_flags.append("speculative-config")
        places[origins.place("speculative-config")] = None
    host = served_host(served)
    if profile.vllm.host is not None and host != profile.vllm.host:
        wrong.append(
            f"--host: {host}{' (vLLM default: every interface)' if 'host' not in served else ''}, "
            f"recipe {profile.vllm.host}"
        )
        wrong_flags.append("host")
        places[origins.place("host")] = None
    return wrong, wrong_flags, places, unreadable


def _bind_and_twice_notes(
    profile: Profile,
    served: dict[str, str | bool],
    source: str,
    origins: _Origins,
    repeated: dict[str, list[FlagUse]],
) -> list[str]:
    """What is reported beside a pass: an open bind without auth, and each flag given twice."""
    host = served_host(served)
    notes = []
    if host == ALL_INTERFACES and not profile.security.require_auth:
        notes.append(
            f"OPEN BIND: vLLM listens on every interface ({host}:{profile.vllm.port}, {source}) with no "
            f"API key required, as published [000]. Firewall the port, add auth and TLS before wider "
            f"exposure, or bind 127.0.0.1 behind a proxy."
        )
    for flag, uses in repeated.items():
        notes.append(
            f"FLAG GIVEN TWICE: {origins.twice(flag, uses)} (served as the recipe wants), but an edit of "
            f"an earlier one changes nothing: delete all but the last."
        )
    return notes


def _flag_values(args: list[str]) -> dict[str, object]:
    """The served flags as vLLM reads their values (its argparse types), to tell a change from a respelling."""
    values: dict[str, object] = {}
    for flag, value in parse_serve_args(args).items():
        if flag in VALUE_TYPES and isinstance(value, str):
            try:
                values[flag] = VALUE_TYPES[flag](value)
                continue
            except (ValueError, RejectedValue):
                pass
        values[flag] = value
    return values


def _places(origins: _Origins, flags: list[str]) -> str:
    return ", ".join(dict.fromkeys(origins.place(f) for f in flags)) or origins.default


def _refused_after_restart(
    served: ServedConfig, served_now: ServedConfig, origins: _Origins
) -> tuple[list[str], list[str]]:
    """What vLLM would refuse at the next start and does not refuse now (a line each, with where it is set), and the
    flags of those lines."""
    # what vLLM refuses now too is the accepted-flags check's finding: here only what the next start brings
    refused_now = {r.text for r in refused_args(served_now.args)} if served_now.refused is None else set()
    refused = [r for r in refused_args(served.args) if r.text not in refused_now] if served.refused is None else []
    after = [
        r.text + (f" ({origins.origin(r.flag, always=True)})" if r.flag and origins.origin(r.flag, always=True) else "")
        for r in refused
    ] + ([served.refused] if served.refused and not served_now.refused else [])
    return after, [r.flag for r in refused if r.flag]


def _after_daemon_reload(facts: StationFacts, docker_run: DockerRun, next_values: dict[str, object]) -> str:
    """Where systemd has not loaded the unit files on disk yet: the flags they would serve that differ from the next
    start's, as a clause of the finding ("" where none differ)."""
    on_disk = facts.docker_run_in(facts.unit_from_files)
    if on_disk is None:
        return ""
    disk_values = _flag_values(facts.served_config(on_disk[0], docker_run.mounts).args)
    moved = sorted(f for f in set(disk_values) | set(next_values) if disk_values.get(f) != next_values.get(f))
    if not moved:
        return ""
    return "; after a `systemctl daemon-reload` (or a reboot) the files on disk serve: " + ", ".join(
        f"--{f} {_text(disk_values.get(f, 'absent'))}" for f in moved
    )


def _changed_by_restart(
    flags: list[str], now_values: dict[str, object], next_values: dict[str, object], origins: _Origins
) -> list[str]:
    """A line for each flag a restart changes: served now, after a restart, and where the next start's value is set."""
    return [
        f"--{f}: served now {_text(now_values.get(f, 'absent'))}, after a restart "
        f"{_text(next_values.get(f, 'absent'))}"
        + (f" ({origins.origin(f, always=True)})" if origins.origin(f, always=True) else "")
        for f in flags
    ]


@check("host.unit.next_start_serves_what_runs_now", Cost.READ)
def test_next_start_serves_what_runs_now(
    facts: StationFacts,
    docker_run: DockerRun,
    service: Service,
    station: Station,
    profile: Profile,
    record_finding: RecordFinding,
) -> None:
    """The unit's next start (a restart, a crash, a reboot) serves what runs now: the unit loads and starts (its
    EnvironmentFile= files and WorkingDirectory= as they are now), vLLM accepts the arguments ExecStart expands to with
    the environment as it is now, and they are the ones the running container was started with [000]."""
    unit = facts.unit
    name = service.unit
    restart = f"`systemctl restart {name}`"
    stops = unit.load_error or unit.start_fails()
    require(
        stops is None,
        found=f"{name} runs now, but its next start stops before vLLM serves: {stops}"
        if facts.container is not None and facts.container.running
        else f"the next start of {name} stops before vLLM serves: {stops}",
        recipe="systemd restarts the serving container after a crash and at boot: the unit's next start serves the "
        "recipe [000]",
        fix="put back what the start needs (the file or folder named above), or correct the line it names, then "
        f"`systemctl daemon-reload`; check with `systemctl show {name} -p LoadState` and `systemd-analyze verify "
        f"{name}` before {restart}",
    )
    container = facts.container
    running = station.phase == "serving" and container is not None and container.running
    if not running or container is None:
        not_applicable(
            f"no container runs now ({station.phase}): the served-flags checks read the unit, which is what the next "
            f"start runs; it loads and starts (env files, WorkingDirectory=)"
        )
    served = facts.served_config(docker_run.args, docker_run.mounts)
    _config_unread(served, "a served flag")
    served_now = facts.served_config(container.args, container.mounts)
    _config_unread(served_now, "a served flag")
    origins = _Origins(facts, docker_run)
    after, refused_flags = _refused_after_restart(served, served_now, origins)
    now_said = f"docker inspect {container.name} Args"
    require(
        not after,
        found=f"vLLM serves now ({now_said}), but after a restart it stops at start: " + "; ".join(after),
        recipe="the unit's next start serves the recipe's flags; a value vLLM refuses ends `vllm serve` at once [000]",
        fix=f"correct it in {_places(origins, refused_flags)}, then `systemctl "
        f"daemon-reload`; the running container keeps serving until the next restart",
    )
    now_values, next_values = _flag_values(served_now.args), _flag_values(served.args)
    now_raw = parse_serve_args(served_now.args)
    pinned = pinned_flags(profile, station.vllm_model)
    changed = sorted(f for f in set(now_values) | set(next_values) if now_values.get(f) != next_values.get(f))
    # a flag running wrong now that the next start corrects is the served-flags check's finding ("a restart serves it")
    worse = [f for f in changed if f not in pinned or _same(f, now_raw.get(f), pinned[f])]
    better = [f for f in changed if f not in worse]
    lines = _changed_by_restart(worse, now_values, next_values, origins)
    reload_said = _after_daemon_reload(facts, docker_run, next_values) if unit.need_daemon_reload else ""
    require(
        not worse,
        flags=worse,
        found=f"{name}'s next start will not serve what runs now ({now_said}; the next start: ExecStart with the "
        f"environment as it is now): " + "; ".join(lines) + reload_said,
        recipe="the station serves the same flags after a restart as before: a restart, a crash or a reboot must not "
        "change what is served [000]",
        fix=f"make {_places(origins, worse)} give what runs now (or what the recipe "
        f"says), then `systemctl daemon-reload`; restart only once the unit serves the recipe",
    )
    if better or reload_said:
        record_finding(
            "NEXT START: "
            + "; ".join(
                f"--{f}: served now {_text(now_values.get(f, 'absent'))}, after a restart "
                f"{_text(next_values.get(f, 'absent'))} (the recipe's: a restart serves it)"
                for f in better
            )
            + reload_said
        )
