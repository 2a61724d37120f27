"""The prestart script: what systemd runs before every start attempt [000]."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import counted, not_applicable, require
from golive.facts import FactError, bash

if TYPE_CHECKING:
    from golive.facts.bash import ShellCommand, Unfollowed
    from golive.profile.schema import Service
    from golive.run.fixtures import RecordFinding
    from golive.station.host import StationFacts

pytestmark = pytest.mark.host


def _not_checked_for(unread: list[Unfollowed], what: str) -> None:
    """End the check not checked where the prestart reaches a file golive could not follow (a path it cannot work
    out, a file it cannot read): what decides the rule may be in it, and golive does not guess [000]."""
    unknown = [f for f in unread if f.unknown]
    if unknown:
        pytest.skip(
            "not checked: "
            + "; ".join(f.describe() for f in unknown)
            + f" ({what}); to have golive check it: {'; '.join(dict.fromkeys(f.fix() for f in unknown))}"
        )


def _file_and_line(where: str) -> str:
    """`/etc/systemd/system/x.service:14` → `/etc/systemd/system/x.service (line 14)`."""
    path, _, line = where.rpartition(":")
    return f"{path} (line {line})"


@check("host.prestart.runs_before_every_start", Cost.READ)
def test_prestart_is_what_the_unit_runs_before_start(facts: StationFacts, service: Service) -> None:
    """The unit's ExecStartPre runs the recipe's prestart script, {service.prestart} (executable; its failure stops
    the start) [000]."""
    facts.prestart  # noqa: B018 - a missing script fails here, once; the other prestart checks are not checked
    unit = facts.unit
    home = unit.files[0] if unit.files else service.unit
    pre = [" ".join(c.argv) for c in unit.exec_start_pre]
    runs_it = [c for c in unit.exec_start_pre if service.prestart in c.argv]
    require(
        bool(runs_it),
        found=f"{service.unit} ExecStartPre runs {pre or 'nothing'} ({unit.source}"
        + (f"; ExecStartPre {unit.origin('ExecStartPre')}" if "ExecStartPre" in unit.set_at else "")
        + ")",
        recipe=f"ExecStartPre={service.prestart}, so the page cache is cleared on EVERY start, restarts included [000]",
        fix=(
            unit.fix_at("ExecStartPre", service.unit, f"ExecStartPre={service.prestart}")
            if "ExecStartPre" in unit.set_at
            else f"add `ExecStartPre={service.prestart}` to [Service] of {home}, then `systemctl daemon-reload`"
        ),
    )
    line = runs_it[0]
    at = f" ({line.where})" if line.where else ""
    require(
        not line.ignore_errors,
        found=f"{service.unit} runs `ExecStartPre=-{' '.join(line.argv)}`{at} ({unit.source}): the `-` prefix "
        f"ignores the prestart's failure, so vLLM starts even when the prestart refused (HBM still full)",
        recipe="the prestart's refusal stops the start: a failed ExecStartPre must fail the start [000]",
        fix=f"remove the `-` in front of `ExecStartPre={service.prestart}` in "
        f"{_file_and_line(line.where) if line.where else service.unit}, then `systemctl daemon-reload`"
        + (
            f" (or `systemctl revert {service.unit}` to drop the drop-in)"
            if line.where.rsplit(":", 1)[0] in unit.dropins
            else ""
        ),
    )
    if line.path == service.prestart:  # systemd executes it itself (not `sh script`): it needs its x bit
        mode = facts.prestart_mode
        require(
            mode is not None and bool(mode & 0o100),
            found=f"{service.prestart} has mode {mode:04o}: not executable, so the next start fails with "
            f"status=203/EXEC before vLLM runs",
            recipe="the prestart script is installed executable (mode 0755) [000]",
            fix=f"chmod 0755 {service.prestart}",
        )


@check("host.prestart.syncs_then_drops_page_cache", Cost.READ)
def test_prestart_syncs_then_drops_page_cache(
    facts: StationFacts, service: Service, record_finding: RecordFinding
) -> None:
    """Before every start: `sync`, then drop the page cache (echo 1 or stronger), before the container starts; both
    on every path through the prestart (and the files it sources or runs to completion), not in a branch, loop, `&&`,
    background job or after an `exit` that may skip them [000]."""
    sequence = facts.start_sequence()
    written = [i for i, c in enumerate(sequence) if c.drops_page_cache()]
    drops = [i for i in written if sequence[i].always_runs]
    # none runs on every path alone, but the paths that reach them cover every case together (one in each branch)
    together = not drops and bash.always_run([sequence[i] for i in written])
    if together:
        drops = [i for i in written if not sequence[i].never_runs]
    starts = [i for i, c in enumerate(sequence) if (c.docker_verb() or ("",))[0] in ("run", "start")]
    recipe = (
        "the prestart runs `sync; echo 1 > /proc/sys/vm/drop_caches` before the container starts, on every start [000]"
    )
    fix = f"put `sync` then `echo 1 > /proc/sys/vm/drop_caches` in {service.prestart}, before anything starts vLLM"
    weak = [c for c in sequence if c.writes_drop_caches() and not c.drops_page_cache()]
    if written and not drops:
        skipped = sequence[written[0]]
        require(
            False,
            found=f"{skipped.where()} drops the page cache, but {skipped.verdict()}: {skipped.why_it_may_not_run()}",
            recipe=recipe,
            fix=f"{skipped.fixes()}, so it runs on every start (after `sync`, before anything starts vLLM)",
        )
    unread = [f for f in facts.prestart.findings if not f.never]  # files it sources or runs that golive could not read
    _not_checked_for(unread if not drops else [], "the drop of the page cache may be in it")
    require(
        bool(drops),
        found=f"nothing in {service.prestart} or the unit drops the page cache"
        + (f": {weak[0].where()} writes drop_caches with another value (2 frees slab only)" if weak else "")
        + ("; " + "; ".join(f.describe() for f in unread) if unread else ""),
        recipe=recipe,
        fix="; ".join(f.fix() for f in unread) + (f"; or {fix}" if unread else fix),
    )
    first_drop = drops[0]
    last_drop = drops[-1] if together else first_drop  # of those that together always run, each must come first
    started_at = sequence[starts[0]].where() if starts else ""
    require(
        not starts or last_drop < starts[0],
        found=f"the page cache is dropped at {sequence[last_drop].where()} AFTER the container starts at "
        f"{started_at}: vLLM has already allocated its KV cache against a full page cache",
        recipe=recipe,
        fix=fix,
    )
    # each drop that may be the one that runs has a `sync` before it on every path that reaches it (one that always
    # runs, or syncs on paths that together cover that drop's: one in each arm with it)
    every_sync = [c for c in sequence if c.is_sync()]
    bare = [
        d
        for d in (drops if together else [first_drop])
        if not bash.always_run_before(every_sync, sequence[d], sequence)
    ]
    unsynced = bare[0] if bare else first_drop
    syncs = [c for c in sequence[:unsynced] if c.is_sync()]
    unsure = [c for c in syncs if not c.always_runs]
    _not_checked_for(unread if bare else [], "a `sync` may be in it")
    require(
        not bare,
        found=f"{sequence[unsynced].where()} drops the page cache without a `sync` before it"
        + (
            f" that always runs ({unsure[0].where()} {unsure[0].verdict()}: {unsure[0].why_it_may_not_run()})"
            if unsure
            else ""
        )
        + ": dirty pages stay cached",
        recipe=recipe,
        fix=f"add `sync` before the drop_caches line in {service.prestart}, outside any condition",
    )
    run = [v for v in sequence[first_drop].via if v.how == "run"]
    if run:  # passed, and said why a drop in another process counts
        drop = sequence[first_drop]
        record_finding(
            f"{run[0].origin} runs {run[0].path} as its own process (line {run[0].line}): its drop "
            f"(line {drop.line} of {drop.origin}) counts because it finishes before the prestart does, "
            f"and drop_caches is the machine's, whichever process writes it"
        )


def _line_or_where(command: ShellCommand, service: Service) -> str:
    """`line 27` in the prestart itself; file and line (and how it was reached) in a file it sources or runs."""
    return f"line {command.line}" if command.origin == service.prestart and not command.via else command.where()


def _written_to(command: ShellCommand) -> list[str]:
    """The files a command's output is redirected into (`>`, `>>`, `>|`, `&>`): where a `docker logs` saves them."""
    return [target for op, target in command.redirects if op in (">", ">>", ">|", "&>")]


@check("host.prestart.saves_logs_before_removing_container", Cost.READ)
def test_prestart_saves_logs_before_removing_container(facts: StationFacts, service: Service) -> None:
    """The prestart saves the previous container's logs into the log dir BEFORE `docker rm` erases them, and nothing
    removes the dead container first: no `docker run --rm`, no `docker rm` in ExecStop=/ExecStopPost= (they run after
    a crash too) or in an ExecStartPre= line before the prestart [000]."""
    container = service.container
    recipe = (
        "save the previous container's logs before `docker rm`, on every path that removes it, and remove it "
        "nowhere else: the crash evidence goes with it [000]"
    )
    run = facts.docker_run
    try:
        running = facts.container
    except FactError:  # the engine could not say: the run line decides alone
        running = None
    if (run is not None and run.removes_on_exit) or (running is not None and running.auto_remove):
        where = facts.docker_run_place()
        require(
            False,
            found=(
                f"{where} runs `docker run --rm`"
                if run is not None and run.removes_on_exit
                else f"the running {container} was created with --rm (docker inspect: HostConfig.AutoRemove=true)"
            )
            + f": docker deletes {container} the moment it exits, logs included, before the prestart can save them",
            recipe=recipe,
            fix=f"remove `--rm` from {where}, then `systemctl daemon-reload && systemctl restart {service.unit}`: "
            f"the prestart removes the dead container once its logs are saved",
        )
    commands = facts.between_containers()
    removes = [i for i, c in enumerate(commands) if container in c.docker_targets("rm")]
    saves = [i for i, c in enumerate(commands) if container in c.docker_targets("logs")]
    if not removes:
        not_applicable(f"nothing from {service.unit}'s stop to its next start removes {container}; nothing to lose")
    # every removal must have a save that ran on every path to it (a save in a branch the removal is outside does not)
    unsaved = [r for r in removes if not bash.always_run_before([commands[s] for s in saves], commands[r], commands)]
    first = unsaved[0] if unsaved else removes[0]
    earlier = [s for s in saves if s < first]
    if unsaved and not earlier:  # a save golive could not read may come before the removal
        _not_checked_for(
            [f for f in facts.prestart.findings if not f.never], "a `docker logs` that saves them may be in it"
        )
    in_unit = commands[first].origin.startswith("Exec")  # an Exec line of the unit, not a line of a script
    require(
        not unsaved,
        found=(
            f"{commands[first].where()} runs `{commands[first].text()}` "
            + (
                f"but the save at {_line_or_where(commands[earlier[0]], service)} "
                f"{commands[earlier[0]].verdict()} first: {commands[earlier[0]].why_it_may_not_run()}"
                if earlier
                else f"before saving logs (first `docker logs` at {_line_or_where(commands[saves[0]], service)})"
                if saves
                else "and nothing saves the container's logs"
                + "".join(f"; {f.describe()}" for f in facts.prestart.findings if not f.never)
            )
        ),
        recipe=recipe,
        fix=(
            f"remove `{commands[first].text()}` from {commands[first].where()}, then `systemctl daemon-reload`: "
            f"the prestart removes {container} after saving its logs"
            + ("" if saves else f"; and in {service.prestart}, run `docker logs {container}` before `docker rm`")
            if in_unit
            else f"in {service.prestart}, run `docker logs {container} > {service.log_dir or '<log dir>'}/"
            f"<timestamp>.log 2>&1` before `docker rm {container}`, unconditionally where the removal is"
        ),
    )
    if service.log_dir:
        save = commands[saves[0]]
        targets = _written_to(save)
        require(
            any(t.startswith(service.log_dir.rstrip("/") + "/") for t in targets),
            found=f"{save.where()} saves the logs to {targets[0] if targets else 'nowhere (no redirect)'}, "
            f"not into {service.log_dir}",
            recipe=f"the previous container's logs are kept in the profile's log_dir, {service.log_dir} [000]",
            fix=f"in {service.prestart}, redirect `docker logs {container}` into {service.log_dir}/<timestamp>.log "
            f"(or set service.log_dir in your site profile to where you keep them)",
        )


def _saved_logs_folder(facts: StationFacts, service: Service) -> str | None:
    """Where dead containers' logs are kept: the profile's log_dir, else the folder the prestart's `docker logs`
    writes into (when the script names it)."""
    if service.log_dir:
        return service.log_dir.rstrip("/") or "/"
    commands = facts.prestart.commands
    targets = [t for c in commands if service.container in c.docker_targets("logs") for t in _written_to(c)]
    folder = targets[0].rsplit("/", 1)[0] if targets and "/" in targets[0] else ""
    return folder if folder.startswith("/") and "$" not in folder else None


@check("host.prestart.saved_the_dead_containers_logs", Cost.READ)
def test_prestart_saved_the_dead_containers_logs(
    facts: StationFacts, service: Service, record_finding: RecordFinding
) -> None:
    """After systemd restarted the unit, the logs of the container that died are kept: the prestart of the restart
    saved them into the log dir before `docker rm` (a file written since the unit last went down) [000]."""
    folder = _saved_logs_folder(facts, service)
    if folder is None:
        not_applicable(
            f"neither the profile (service.log_dir) nor {service.prestart}'s `docker logs` redirect names the folder "
            f"the logs are saved into"
        )
    if not facts.systemd_running:
        not_applicable("systemd is not PID 1 on the station: no restart count to read")
    record = facts.restarts
    logs = facts.saved_logs(folder)
    newest = (
        f"newest {logs[0].path} ({logs[0].size:,} bytes, written {logs[0].written})" if logs else "no file there yet"
    )
    if record.n_restarts == 0:
        not_applicable(
            f"{service.unit} has not been restarted by systemd (NRestarts=0): no dead container's logs to look "
            f"for; the prestart saves them into {folder} ({newest})"
        )
    if record.active_state not in ("active", "activating", "reloading") or record.active_exit_local is None:
        not_applicable(
            f"{service.unit} is {record.active_state or 'not running'} after "
            f"{counted(record.n_restarts, 'restart')}: not "
            f"started again since its container last went down"
            + (f" (at {record.active_exit})" if record.active_exit else "")
            + f", so that container's logs are still with Docker (`docker logs {service.container}`) until the "
            f"next start's prestart saves them into {folder} ({newest})"
        )
    fresh = [log for log in logs if log.written_local >= record.active_exit_local]
    require(
        bool(fresh),
        found=f"systemd restarted {service.unit} {counted(record.n_restarts, 'time')}, the last after it went down at "
        f"{record.active_exit}, but {folder} holds no file written since ({newest}): the dead container's logs "
        f"were not kept",
        recipe="the prestart saves the previous container's logs before `docker rm` on every start, restarts "
        "included: the crash evidence survives the restart [000]",
        fix=f"read the prestart's output at that start (`journalctl -u {service.unit}`); make {service.prestart} "
        f"write `docker logs {service.container}` into {folder} (a folder that exists and is writable) before it "
        f"removes the container",
    )
    record_finding(
        f"systemd restarted {service.unit} {counted(record.n_restarts, 'time')}; the logs of the container that "
        f"went down at "
        f"{record.active_exit} were saved to {fresh[0].path} ({fresh[0].size:,} bytes, written "
        f"{fresh[0].written})"
    )
