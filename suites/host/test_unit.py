"""The systemd unit owns the container: restart policy, start cap, enabled [000].

The unit is read as systemd runs it: the unit file with its drop-ins (`systemctl edit` writes
/etc/systemd/system/UNIT.d/override.conf), and each finding names the file and line that set the value. A value that
switches a safety off says so (Restart=no, RestartSec=0, StartLimitIntervalSec=0, StartLimitBurst=0), the Do names
every key that differs with the file and line to edit, and the Recipe line where each number came from: the recipe a
shipped profile transcribes, or the site profile's file, line and key (golive.profile.origins).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pytest

from golive.core.verdict import require
from golive.facts.systemd import UnitFacts
from golive.profile.origins import sourced

if TYPE_CHECKING:
    from golive.inventory.station import StationFacts
    from golive.profile.schema import Profile, Service, Station

pytestmark = pytest.mark.host


# What each Restart= value does, by how the service ended (systemd.service(5), the table under Restart=)
RESTART_DOES = {
    "no": "Restart=no: systemd never restarts it, so after a crash the station stays down until someone starts it",
    "always": "Restart=always: systemd restarts it however it ends, a clean exit included, so a container stopped on "
    "purpose (`docker stop`) comes straight back",
    "on-success": "Restart=on-success: systemd restarts it only after a clean exit, so after a crash it stays down",
    "on-abnormal": "Restart=on-abnormal: systemd restarts it after a signal, a timeout or the watchdog but not after "
    "an exit code other than 0, so a vLLM that exits with an error stays down",
    "on-abort": "Restart=on-abort: systemd restarts it only after an uncaught signal, so a vLLM that exits with an "
    "error or times out stays down",
    "on-watchdog": "Restart=on-watchdog: systemd restarts it only when the watchdog fires, so after a crash it stays "
    "down",
}


def _span(seconds: float | None) -> str:
    return "(not shown)" if seconds is None else "infinity" if math.isinf(seconds) else f"{seconds:g}"


def restart_does(restart: str | None, restart_sec_s: float | None, wanted: str = "on-failure") -> list[str]:
    """What the unit's restart settings do, where that is not what the profile wants (`wanted`): a safety switched
    off says so."""
    said = [RESTART_DOES[restart]] if restart in RESTART_DOES and restart != wanted else []
    if restart_sec_s is not None and restart_sec_s < 1 and restart != "no":
        said.append(
            f"RestartSec={_span(restart_sec_s)}: systemd restarts it "
            + (
                "at once after a crash, no delay between attempts (a crash loop with no pause)"
                if restart_sec_s == 0
                else f"{_span(restart_sec_s)} s after a crash (a crash loop with next to no pause)"
            )
        )
    return said


def start_limit_does(burst: int | None, interval_s: float | None, restart_sec_s: float | None) -> list[str]:
    """What the unit's start limit does, where it does not cap a crash loop: a limit switched off says so."""
    if interval_s == 0:  # systemd.unit(5): "may be set to 0 to disable any kind of rate limiting"
        return [
            "StartLimitIntervalSec=0 switches the start limit off (systemd.unit(5): 0 disables rate limiting): "
            "systemd restarts a crash loop for ever, each start burying the last crash's logs"
        ]
    if burst == 0:  # src/basic/ratelimit.h: a limit applies only with an interval and a burst above 0
        return [
            "StartLimitBurst=0 switches the start limit off (systemd applies a start limit only with an interval "
            "and a burst above 0): systemd restarts a crash loop for ever, each start burying the last crash's "
            "logs"
        ]
    if interval_s is not None and math.isinf(interval_s):
        return [
            f"StartLimitIntervalSec=infinity counts every start the unit ever makes: after {burst} starts it stays "
            "down for good, until `systemctl reset-failed`"
        ]
    if burst and interval_s and restart_sec_s and burst * restart_sec_s > interval_s:
        return [
            f"the cap never triggers: with RestartSec={restart_sec_s:g} s, {burst} restarts take at least "
            f"{burst * restart_sec_s:g} s, longer than StartLimitIntervalSec={interval_s:g} s"
        ]
    return []


def _do_each(unit: UnitFacts, unit_name: str, settings: list[tuple[str, str]]) -> str:
    """The Do of every key that differs, each at the file and line that set it."""
    return "; and ".join(unit.fix_at(key, unit_name, setting) for key, setting in settings)


def test_unit_restarts_on_failure_after_delay(facts: StationFacts, service: Service, profile: Profile) -> None:
    """systemd restarts a crashed service after a delay (Restart={service.restart}, RestartSec={service.restart_sec_s}
    s) [000]."""
    unit = facts.unit
    wrong = [
        (key, setting)
        for key, setting, differs in (
            ("Restart", f"Restart={service.restart}", unit.restart != service.restart),
            ("RestartSec", f"RestartSec={service.restart_sec_s:g}", unit.restart_sec_s != service.restart_sec_s),
        )
        if differs
    ]
    does = restart_does(unit.restart, unit.restart_sec_s, service.restart)
    require(
        not wrong,
        found=f"Restart={unit.restart} ({unit.origin('Restart')}), RestartSec={_span(unit.restart_sec_s)} s "
        f"({unit.origin('RestartSec')}; {unit.source} of {service.unit})" + "".join(f"; {d}" for d in does),
        recipe=sourced(
            profile,
            {
                "service.restart": f"Restart={service.restart}",
                "service.restart_sec_s": f"RestartSec={service.restart_sec_s:g} s",
            },
        )
        + "; systemd restarts a crashed container after a pause and runs the prestart before every attempt",
        fix=_do_each(unit, service.unit, wrong),
    )


def test_unit_caps_starts_per_interval(facts: StationFacts, service: Service, profile: Profile) -> None:
    """Starts are capped at {service.start_limit_burst} per {service.start_limit_interval_s} s, then the unit stays
    down [000]."""
    unit = facts.unit
    wrong = [
        (key, setting)
        for key, setting, differs in (
            (
                "StartLimitBurst",
                f"StartLimitBurst={service.start_limit_burst}",
                unit.start_limit_burst != service.start_limit_burst,
            ),
            (
                "StartLimitIntervalSec",
                f"StartLimitIntervalSec={service.start_limit_interval_s:g}",
                unit.start_limit_interval_s != service.start_limit_interval_s,
            ),
        )
        if differs
    ]
    does = start_limit_does(unit.start_limit_burst, unit.start_limit_interval_s, unit.restart_sec_s)
    require(
        not wrong,
        found=f"StartLimitBurst={unit.start_limit_burst} ({unit.origin('StartLimitBurst')}) within "
        f"StartLimitIntervalSec={_span(unit.start_limit_interval_s)} s "
        f"({unit.origin('StartLimitIntervalSec')}; {unit.source})" + "".join(f"; {d}" for d in does),
        recipe=sourced(
            profile,
            {
                "service.start_limit_burst": f"at most {service.start_limit_burst} starts",
                "service.start_limit_interval_s": f"{service.start_limit_interval_s:g} s",
            },
            join=" per ".join,
        )
        + "; a crash loop must stop, not bury the first failure's logs",
        fix=f"in [Unit]: {_do_each(unit, service.unit, wrong)}; recover a capped unit with "
        f"`systemctl reset-failed {service.unit}`",
    )


def test_unit_is_enabled_and_active(facts: StationFacts, service: Service, station: Station) -> None:
    """The unit is enabled (starts at boot) and, while serving, active [000]."""
    unit = facts.unit
    require(
        unit.enabled == "enabled",
        found=f"{service.unit} is {unit.enabled} ({unit.source})",
        recipe="`systemctl enable --now` the unit: it must come back after a reboot [000]",
        fix=f"systemctl enable {service.unit}",
    )
    if station.phase == "serving":
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
