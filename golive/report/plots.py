"""The concurrency sweep (results.json `sweep`: golive.report.results.SweepPoint) as table rows and as one SVG.

Pure functions of the sweep's rows. The SVG is drawn by matplotlib (Agg backend: no display needed), text kept as text
(`svg.fonttype: none`: no embedded glyphs, small, searchable) and no date in its metadata, so the same sweep draws the
same file. It is inlined in go-live.html, which stays one self-contained file that opens offline.
"""

from __future__ import annotations

import io
from collections import defaultdict

from golive.report.results import SweepPoint

# the sweep table's columns: LevelResult field → heading
SWEEP_COLUMNS = {
    "aggregate_tok_s": "aggregate tok/s",
    "per_user_tok_s_p50": "per-user tok/s p50",
    "ttft_p50_s": "TTFT p50 s",
    "goodput_share": "goodput share",
    "itl_mean_s": "ITL mean s",
    "e2e_mean_s": "E2E mean s",
    "requests": "requests",
    "failures": "failures",
}


def by_station(points: list[SweepPoint]) -> dict[str, list[SweepPoint]]:
    """station → its levels, concurrency ascending; stations sorted."""
    found: dict[str, list[SweepPoint]] = defaultdict(list)
    for point in points:
        found[point.station or "-"].append(point)
    return {station: sorted(levels, key=lambda p: p.level.concurrency) for station, levels in sorted(found.items())}


def sweep_rows(points: list[SweepPoint]) -> list[dict]:
    """The sweep as table rows: one per station and concurrency, with the SWEEP_COLUMNS values and, under
    `<name>_ci`, a value's 95 % interval where the level has one."""
    return [
        {
            "station": station,
            "users": p.level.concurrency,
            **{name: getattr(p.level, name) for name in SWEEP_COLUMNS},
            **{f"{name}_ci": getattr(p.level, f"{name}_ci", None) for name in SWEEP_COLUMNS},
        }
        for station, levels in by_station(points).items()
        for p in levels
    ]


def sweep_svg(points: list[SweepPoint]) -> str | None:
    """Aggregate throughput and TTFT p50 against concurrent users, one line per station, as an inline <svg> element
    (no XML prolog); None when there is no sweep."""
    data = by_station(points)
    if not data:
        return None
    import matplotlib

    matplotlib.use("Agg")  # no display: never a GUI backend on a station or a CI runner
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "golive", "font.size": 9}):
        figure = Figure(figsize=(9, 3.4), layout="constrained")
        throughput, ttft = figure.subplots(1, 2)
        for station, levels in data.items():
            for axes, name in ((throughput, "aggregate_tok_s"), (ttft, "ttft_p50_s")):
                shown = [p.level for p in levels if getattr(p.level, name) is not None]
                if not shown:
                    continue
                values = [getattr(lv, name) for lv in shown]
                # error bars: the 95 % interval (golive.endpoint.uncertainty); none where a level has no interval
                intervals = [getattr(lv, f"{name}_ci") or [v, v] for lv, v in zip(shown, values, strict=True)]
                axes.errorbar(
                    [lv.concurrency for lv in shown],
                    values,
                    marker="o",
                    capsize=3,
                    label=station,
                    yerr=[
                        [max(v - ci[0], 0) for v, ci in zip(values, intervals, strict=True)],
                        [max(ci[1] - v, 0) for v, ci in zip(values, intervals, strict=True)],
                    ],
                )
        users = sorted({p.level.concurrency for levels in data.values() for p in levels})
        for axes, title, unit in ((throughput, "Aggregate throughput", "tok/s"), (ttft, "TTFT p50", "s")):
            axes.set_title(f"{title} vs concurrent users (95 % CI)")
            axes.set_xlabel("concurrent users")
            axes.set_ylabel(unit)
            axes.set_xscale("log", base=2)  # the sweep doubles-ish: 1, 32, 256 users spread evenly
            axes.set_xticks(users, [str(u) for u in users])
            axes.minorticks_off()
            axes.grid(True, alpha=0.3)
            axes.legend()
        out = io.StringIO()
        figure.savefig(out, format="svg", metadata={"Date": None})
    text = out.getvalue()
    return text[text.index("<svg") :]
