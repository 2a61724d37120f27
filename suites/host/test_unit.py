"""The systemd unit owns the container: restart policy, start cap, enabled, loaded as its files say [000].

The unit is read as systemd runs it: the unit file with its drop-ins (`systemctl edit` writes
/etc/systemd/system/UNIT.d/override.conf), and each finding names the file and line that set the value. A value that
switches a safety off says so (Restart=no, RestartSec=0, StartLimitIntervalSec=0, StartLimitBurst=0), the Do names
every key that differs with the file and line to edit, and the Recipe line where each number came from: the recipe a
shipped profile transcribes, or the site profile's file, line and key (golive.profile.origins).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import counted, not_applicable, require
from golive.facts import FactError
from golive.facts.systemd import unit_differences
from golive.profile.origins import section, sourced
from golive.profile.recipe import (
    UnitSetting,
    restart_does,
    restart_problems,
    span,
    start_limit_does,
    start_limit_problems,
    unit_not_enabled,
)

if TYPE_CHECKING:
    from golive.facts.systemd import UnitFacts
    from golive.profile.inventory import Station
    from golive.profile.schema import Profile, Service
    from golive.station.host import StationFacts

pytestmark = pytest.mark.host


def _do_each(unit: UnitFacts, unit_name: str, settings: list[UnitSetting]) -> str:
    """The Do of every key that differs, each at the file and line that set it."""
    return "; and ".join(unit.fix_at(s.key, unit_name, s.setting) for s in settings)


@check("host.unit.restarts_on_failure_after_delay", Cost.READ)
def test_unit_restarts_on_failure_after_delay(facts: StationFacts, service: Service, profile: Profile) -> None:
    """systemd restarts a crashed service after a delay (Restart={service.restart}, RestartSec={service.restart_sec_s}
    s) [000]."""
    unit = facts.unit
    wrong = restart_problems(unit, service)
    does = restart_does(unit.restart, unit.restart_sec_s, service.restart)
    require(
        not wrong,
        found=f"Restart={unit.restart} ({unit.origin('Restart')}), RestartSec={span(unit.restart_sec_s)} s "
        f"({unit.origin('RestartSec')}; {unit.source} of {service.unit})" + "".join(f"; {d}" for d in does),
        recipe=sourced(
            profile,
            (lambda p: section(p.service).restart, f"Restart={service.restart}"),
            (lambda p: section(p.service).restart_sec_s, f"RestartSec={service.restart_sec_s:g} s"),
        )
        + "; systemd restarts a crashed container after a pause and runs the prestart before every attempt",
        fix=_do_each(unit, service.unit, wrong),
    )


@check("host.unit.caps_starts_per_interval", Cost.READ)
def test_unit_caps_starts_per_interval(facts: StationFacts, service: Service, profile: Profile) -> None:
    """Starts are capped at {service.start_limit_burst} per {service.start_limit_interval_s} s, then the unit stays
    down [000]."""
    unit = facts.unit
    wrong = start_limit_problems(unit, service)
    does = start_limit_does(unit.start_limit_burst, unit.start_limit_interval_s, unit.restart_sec_s)
    require(
        not wrong,
        found=f"StartLimitBurst={unit.start_limit_burst} ({unit.origin('StartLimitBurst')}) within "
        f"StartLimitIntervalSec={span(unit.start_limit_interval_s)} s "
        f"({unit.origin('StartLimitIntervalSec')}; {unit.source})" + "".join(f"; {d}" for d in does),
        recipe=sourced(
            profile,
            (lambda p: section(p.service).start_limit_burst, f"at most {service.start_limit_burst} starts"),
            (lambda p: section(p.service).start_limit_interval_s, f"{service.start_limit_interval_s:g} s"),
            join=" per ".join,
        )
        + "; a crash loop must stop, not bury the first failure's logs",
        fix=f"in [Unit]: {_do_each(unit, service.unit, wrong)}; recover a capped unit with "
        f"`systemctl reset-failed {service.unit}`",
    )


@check("host.unit.enabled_and_active", Cost.READ)
def test_unit_is_enabled_and_active(facts: StationFacts, service: Service, station: Station) -> None:
    """The unit is enabled (starts at boot) and, while serving, active [000]."""
    unit = facts.unit
    disabled = unit_not_enabled(unit, service.unit)
    require(
        disabled is None,
        found=f"{disabled} ({unit.source})",
        recipe="`systemctl enable --now` the unit: it must come back after a reboot [000]",
        fix=f"systemctl enable {service.unit}",
    )
    if station.phase == "serving":
        hit = facts.start_limit
        require(
            hit is None,
            found=f"{service.unit} is failed: systemd's start limit stopped it. It restarted the unit "
            f"{counted(hit.n_restarts if hit else 0, 'time')} (NRestarts; "
            f"StartLimitBurst={unit.start_limit_burst} within "
            f"StartLimitIntervalSec={span(unit.start_limit_interval_s)} s), then refused the next start"
            + (f' (journal: "{hit.journal}")' if hit and hit.journal else f" (Result={hit.result if hit else ''})")
            + f"; so container {facts.container_name} is not running: the crash the limit stopped is the cause",
            recipe="a crash loop stops at the start cap and stays down until someone reads why [000]",
            fix=f"read why it crashed: the logs the prestart saved ({service.log_dir or 'its log folder'}), "
            f"`journalctl -u {service.unit}`; fix that, then `systemctl reset-failed {service.unit}` (it clears the "
            f"start limit) and `systemctl start {service.unit}`",
        )
        require(
            unit.active == "active",
            found=f"{service.unit} is {unit.active}",
            recipe="the serving station's unit is active [000]",
            fix=f"check `journalctl -u {service.unit}`; if it hit the start cap: `systemctl reset-failed "
            f"{service.unit}` then `systemctl start {service.unit}`",
        )
    else:
        require(
            unit.active != "failed",
            found=f"{service.unit} is failed (pre-start phase)",
            recipe="before go-live the unit is stopped cleanly, not failed [000]",
            fix=f"read `journalctl -u {service.unit}`, fix the cause, then `systemctl reset-failed {service.unit}`",
        )


@check("host.unit.runs_as_its_files_say", Cost.READ)
def test_unit_runs_as_its_files_say(facts: StationFacts, service: Service) -> None:
    """systemd runs the unit as its files say now: an edit of the unit or a drop-in is loaded (`systemctl
    daemon-reload`), so the unit golive checks is the one the next start and the next boot run [000]."""
    if not facts.systemd_running:
        not_applicable("systemd is not PID 1 here: golive reads the unit files, which is what systemd loads at start")
    unit = facts.unit
    if unit.need_daemon_reload is None:
        raise FactError(f"`systemctl show {service.unit}` printed no NeedDaemonReload=: golive cannot tell")
    changed = unit_differences(unit, facts.unit_from_files) if unit.need_daemon_reload else []
    require(
        not unit.need_daemon_reload,
        found=f"{service.unit}'s files changed since systemd loaded them (`systemctl show`: NeedDaemonReload=yes): "
        f"systemd still runs the unit as loaded, and that is what golive checked; "
        + ("; ".join(changed) if changed else "no setting golive reads differs on disk"),
        recipe="the restart policy, its cap and the prestart live in one readable unit file, and the unit that runs "
        "is that file [000]",
        fix=f"`systemctl daemon-reload` (a `systemctl restart {service.unit}` then applies it to the running "
        f"service), then run golive again",
    )
