"""How one phase of a check ends in golive's terms (golive.core.verdict), waivers applied, secrets scrubbed.

pytest says passed / failed / skipped / error; an operator signs passed / failed / waived / not applicable / not
checked. `classify` decides which, from the exception that ended the phase (a Finding, a NotApplicable, a skip, a
station that could not give a fact, a sick endpoint, a crash); `apply_waiver` turns a failure a waiver covers into
waived; `redact` scrubs every secret from the report (golive.core.secrets) before any output sees it.
"""

from __future__ import annotations

import pytest

from golive.core import verdict as rules
from golive.core.secrets import scrub, scrub_data
from golive.core.verdict import Finding, NotApplicable, OutOfScope, clipped, printable
from golive.endpoint.errors import EndpointError
from golive.facts import FactError
from golive.profile.waivers import expired_message
from golive.report import keys
from golive.run.session import CONNECTIONS, inventory, layer_of, station_of
from golive.station.transport import Gone, TransportError, now

Classified = tuple[str, str]  # (outcome, reason)


def record_outcome(
    item: pytest.Item, report: pytest.TestReport, call: pytest.CallInfo[None], secrets: list[str]
) -> None:
    """Classify this phase, apply a waiver to a failure, put the outcome on the report, scrub every secret."""
    classified = lost_way(item, report, call) or same_cause(item, report, call) or classify(report, call)
    if classified is not None and classified[0] == rules.FAILED:
        classified = apply_waiver(item, report, classified)
    if classified is not None:
        report.user_properties.append((keys.OUTCOME, classified))
    redact(report, secrets)  # after classifying: outcome reasons quote exception text too


def classify(report: pytest.TestReport, call: pytest.CallInfo[None]) -> Classified | None:
    """The golive outcome of one phase (verdict rules in golive.core.verdict); None for a setup/teardown that passed."""
    exc = call.excinfo.value if call.excinfo is not None else None
    if report.passed:
        return (rules.PASSED, "") if report.when == "call" else None
    if report.skipped:
        return _skipped(report, exc)
    if isinstance(exc, Finding):
        report.user_properties.append((keys.FINDING, exc.as_dict()))
        return rules.FAILED, str(exc.msg)
    if isinstance(exc, EndpointError) and report.when != "call":
        # a fixture met a sick endpoint: this check is not checked; the check of that call carries the failure
        reason = clipped(printable(f"not checked because {exc.found}"))
        report.outcome, report.longrepr = "skipped", (str(report.location[0]), report.location[1] or 0, reason)
        return rules.NOT_CHECKED, reason
    if isinstance(exc, (FactError, EndpointError)):
        return _station_finding(report, exc)
    if report.when == "call" and isinstance(exc, (AssertionError, pytest.fail.Exception)):
        return rules.FAILED, report.longreprtext.strip()
    # anything else did not decide the check: setup errors, crashes inside a check, unreachable targets
    what = "could not be set up" if report.when == "setup" else "did not finish"
    lines = str(exc).strip().splitlines() if exc is not None else report.longreprtext.strip().splitlines()[-1:]
    detail = f"{type(exc).__name__}: " * (exc is not None) + (lines[0] if lines else "")
    if printable(report.longreprtext) != report.longreprtext:  # the traceback stays (a golive bug), escaped
        report.longrepr = printable(report.longreprtext)
    return rules.NOT_CHECKED, printable(f"the check {what}: {detail[:500]}")


def same_cause(item: pytest.Item, report: pytest.TestReport, call: pytest.CallInfo[None]) -> Classified | None:
    """One root cause, one failure: a fact a station could not give (a missing unit, prestart, checkpoint folder or
    tool) fails the first check that needs it; every later check of that station that meets the same cause is not
    checked because of it, naming that check. None when this is the first (or not a fact error)."""
    exc = call.excinfo.value if call.excinfo is not None else None
    station = station_of(item)
    if not isinstance(exc, FactError) or station is None:
        return None
    causes = item.config.stash[CONNECTIONS]
    first = causes.setdefault(("cause", f"{station.name}\0{exc.cause}"), item.nodeid)
    if first == item.nodeid:
        return None
    first = first.split("::")[-1].split("[")[0]  # the check's name, as the report lists it
    return _not_checked(item, report, f"not checked because {first} failed on the same cause: {exc.cause}")


def lost_way(item: pytest.Item, report: pytest.TestReport, call: pytest.CallInfo[None]) -> Classified | None:
    """A check whose way to the station failed mid-run (golive.station.transport.TransportError; an endpoint that had
    answered /health and then refused, timed out connecting or cut an answer; an endpoint check that failed while
    the station stopped answering /health, as vLLM does once its engine died): not checked, one line naming the
    station, the time and the check that met it first; recorded so that later checks of that station are not
    checked with the same line without trying again (golive.run.fixtures.station_not_gone). None for anything else."""
    exc = call.excinfo.value if call.excinfo is not None else None
    cache = item.config.stash.get(CONNECTIONS, None)
    if isinstance(exc, TransportError):
        gone, way = exc.gone, "host"
    elif report.failed and cache is not None and layer_of(item) == "endpoint":
        station = station_of(item)
        if station is None or cache.get(("health", station.name), "never asked") is not None:
            return None  # never healthy in this run: the /health check and its dependents say so (golive.run.fixtures)
        lost = exc.found if isinstance(exc, EndpointError) and exc.transport else None  # refused, timed out, cut
        known = cache.get(("gone-endpoint", station.name))
        if known is not None:
            gone = known
        elif (problem := _health_problem(cache, station.name)) is None:  # the station is up
            if lost is None:
                return None  # this failure is its own answer
            return _not_checked(
                item,
                report,
                f"station {station.name}'s answer was lost over HTTP at {now()}: "
                f"{lost}; GET /health still answers 200: re-run this check",
            )
        else:  # going down: a refused or cut answer, or one it gave while going down, is not the station's verdict
            gone = Gone(station.name, "HTTP", now(), lost or f"GET /health {problem} (the engine or server went down)")
        way = "endpoint"
    else:
        return None
    if not gone.first_seen_by:
        gone.first_seen_by = _check_name(item)
    if cache is not None:
        cache.setdefault((f"gone-{way}", gone.station), gone)
    return _not_checked(item, report, gone.line())


def _check_name(item: pytest.Item) -> str:
    return getattr(item, "originalname", None) or item.name


def _health_problem(cache: dict, station: str) -> str | None:
    """None when the station's GET /health answers 200 now, else what it did ("answers HTTP 503", "…refused")."""
    client = cache.get(("endpoint", station))
    if client is None:
        return "was never asked"
    try:
        status = client.get("/health", with_key=False).status_code
    except EndpointError as exc:
        return f"no longer answers: {exc.what}"
    return None if status == 200 else f"answers HTTP {status}"


def _not_checked(item: pytest.Item, report: pytest.TestReport, reason: str) -> Classified:
    reason = clipped(printable(reason))
    report.outcome, report.longrepr = "skipped", (str(item.path), item.location[1] or 0, reason)
    return rules.NOT_CHECKED, reason


def _skipped(report: pytest.TestReport, exc: BaseException | None) -> Classified:
    if isinstance(exc, pytest.skip.Exception):
        reason = str(exc.msg)
        if isinstance(exc, OutOfScope):
            report.user_properties.append((keys.SCOPED_OUT, True))
        if isinstance(exc, NotApplicable) and isinstance(report.longrepr, tuple):
            kind = "Not applicable, out of scope" if isinstance(exc, OutOfScope) else "Not applicable"
            report.longrepr = (*report.longrepr[:2], f"{kind}: {reason}")
    else:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
    # reasons quote exception text and server output (a model list of megabytes): escaped like findings, and cut
    # as they are, in the terminal's SKIPPED line too
    reason = clipped(printable(reason))
    if isinstance(report.longrepr, tuple) and clipped(printable(report.longrepr[2])) != report.longrepr[2]:
        report.longrepr = (*report.longrepr[:2], clipped(printable(report.longrepr[2])))
    return (rules.NOT_APPLICABLE if isinstance(exc, NotApplicable) else rules.NOT_CHECKED), reason


def _station_finding(report: pytest.TestReport, exc: FactError | EndpointError) -> Classified:
    """A station that cannot give a fact the recipe needs is a finding about the station, not a golive crash; so is
    an endpoint that answers what no vLLM server would."""
    if isinstance(exc, EndpointError):
        finding = Finding(found=exc.found, recipe=report_rule(report), fix=exc.hint)
    else:
        finding = Finding(
            found=f"could not read what this check needs: {exc}",
            recipe=report_rule(report),
            fix=exc.fix or "make that command or file work on the station (golive only reads), then re-run",
        )
    report.longrepr = str(finding.msg)
    report.user_properties.append((keys.FINDING, finding.as_dict()))
    report.outcome = "failed"
    return rules.FAILED, str(finding.msg)


def apply_waiver(item: pytest.Item, report: pytest.TestReport, classified: Classified) -> Classified:
    """A failure a waiver in force covers ends waived (the finding stays in results.json); an expired one stands."""
    loaded = inventory(item.config)
    if loaded is None or loaded.waivers is None:
        return classified
    props = keys.props(report)
    station = props.get(keys.STATION, "")
    case = str(props.get(keys.ID, report.nodeid)).removesuffix(f"@{station}" if station else "")
    waiver = loaded.waivers.find(case, props.get(keys.RULE, ""), station)
    if waiver is None:
        return classified
    report.user_properties.append((keys.WAIVER, waiver.as_dict()))
    if waiver.expired():
        message = f"{expired_message(waiver)}\n{classified[1]}"
        report.longrepr = message
        return rules.FAILED, message
    reason = f"Waived by '{waiver.name}' (owner {waiver.owner}, until {waiver.expires}): {waiver.justification}"
    report.outcome = "skipped"  # JUnit and the HTML table show it as not failing, with the waiver as the reason
    report.longrepr = (str(item.path), item.location[1] or 0, reason)
    return rules.WAIVED, f"{reason}\n{classified[1]}"


def report_rule(report: pytest.TestReport) -> str:
    return str(keys.props(report).get(keys.RULE, report.nodeid))


def redact(report: pytest.TestReport, secrets: list[str]) -> None:
    """Keys never reach a report, a log or JUnit: the failure text, every captured section and every user property
    pass through golive.core.secrets.scrub (secrets by shape, then every secret the run knows)."""
    if report.longrepr is not None:
        if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:  # a skip: (path, line, reason)
            path, line, reason = report.longrepr
            report.longrepr = (path, line, scrub(str(reason), secrets))
        else:
            text = str(report.longrepr)
            scrubbed = scrub(text, secrets)
            if scrubbed != text:  # left as pytest made it otherwise (the terminal formats a traceback itself)
                report.longrepr = scrubbed
    report.sections = [(title, scrub(body, secrets)) for title, body in report.sections]
    report.user_properties = [scrub_data(prop, secrets) for prop in report.user_properties]
