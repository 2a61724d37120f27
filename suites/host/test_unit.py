"""The systemd unit owns the container: restart policy, start cap, enabled [000].

The unit is read as systemd runs it: the unit file with its drop-ins (`systemctl edit` writes
/etc/systemd/system/UNIT.d/override.conf), and each finding names the file and line that set the value.
"""
import pytest

from golive.core.verdict import require

pytestmark = pytest.mark.host


def test_unit_restarts_on_failure_after_delay(facts, service):
    """systemd restarts a crashed service after a delay (Restart={service.restart}, RestartSec={service.restart_sec_s}
    s) [000]."""
    unit = facts.unit
    wrong_restart = unit.restart != service.restart
    wrong_delay = unit.restart_sec_s != service.restart_sec_s
    key, setting = ("Restart", f"Restart={service.restart}") if wrong_restart else \
        ("RestartSec", f"RestartSec={service.restart_sec_s:g}")
    require(not wrong_restart and not wrong_delay,
            found=f"Restart={unit.restart} ({unit.origin('Restart')}), RestartSec={unit.restart_sec_s:g} s "
                  f"({unit.origin('RestartSec')}; {unit.source} of {service.unit})",
            recipe=f"Restart={service.restart}, RestartSec={service.restart_sec_s:g}s [000]",
            fix=unit.fix_at(key, service.unit, setting)
            + (f"; and RestartSec: {unit.fix_at('RestartSec', service.unit, f'RestartSec={service.restart_sec_s:g}')}"
               if wrong_restart and wrong_delay else ""))


def test_unit_caps_starts_per_interval(facts, service):
    """Starts are capped at {service.start_limit_burst} per {service.start_limit_interval_s} s, then the unit stays
    down [000]."""
    unit = facts.unit
    wrong_burst = unit.start_limit_burst != service.start_limit_burst
    key, setting = ("StartLimitBurst", f"StartLimitBurst={service.start_limit_burst}") if wrong_burst else \
        ("StartLimitIntervalSec", f"StartLimitIntervalSec={service.start_limit_interval_s:g}")
    require(not wrong_burst and unit.start_limit_interval_s == service.start_limit_interval_s,
            found=f"StartLimitBurst={unit.start_limit_burst} ({unit.origin('StartLimitBurst')}) within "
                  f"StartLimitIntervalSec={unit.start_limit_interval_s:g} s ({unit.origin('StartLimitIntervalSec')}; "
                  f"{unit.source})",
            recipe=f"at most {service.start_limit_burst} starts per {service.start_limit_interval_s:g} s; a crash "
                   f"loop must stop, not bury the first failure's logs [000]",
            fix=f"in [Unit]: {unit.fix_at(key, service.unit, setting)}; recover a capped unit with "
                f"`systemctl reset-failed {service.unit}`")


def test_unit_is_enabled_and_active(facts, service, station):
    """The unit is enabled (starts at boot) and, while serving, active [000]."""
    unit = facts.unit
    require(unit.enabled == "enabled",
            found=f"{service.unit} is {unit.enabled} ({unit.source})",
            recipe="`systemctl enable --now` the unit: it must come back after a reboot [000]",
            fix=f"systemctl enable {service.unit}")
    if station.phase == "serving":
        require(unit.active == "active",
                found=f"{service.unit} is {unit.active}",
                recipe="the serving station's unit is active [000]",
                fix=f"check `journalctl -u {service.unit}`; if it hit the start cap: `systemctl reset-failed "
                    f"{service.unit}` then `systemctl start {service.unit}`")
    else:
        require(unit.active != "failed",
                found=f"{service.unit} is failed (pre-start phase)",
                recipe="before go-live the unit is stopped cleanly, not failed [000]",
                fix=f"read `journalctl -u {service.unit}`, fix the cause, then `systemctl reset-failed {service.unit}`")
