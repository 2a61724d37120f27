"""The concurrency sweep (metrics `load_c<C>_<name>`, suites/endpoint/test_throughput.py) as rows and as one SVG.

Pure functions of results.json's metrics list. The SVG is drawn by matplotlib (Agg backend: no display needed), text
kept as text (`svg.fonttype: none`: no embedded glyphs, small, searchable) and no date in its metadata, so the same
metrics draw the same file. It is inlined in go-live.html, which stays one self-contained file that opens offline.
"""
from __future__ import annotations

import io
import re
from collections import defaultdict

SWEEP_METRIC = re.compile(r"^load_c(\d+)_(.+)$")
# the sweep table's columns: metric suffix → heading
SWEEP_COLUMNS = {
    "aggregate_tok_s": "aggregate tok/s",
    "per_user_tok_s_p50": "per-user tok/s p50",
    "ttft_p50_s": "TTFT p50 s",
    "itl_mean_s": "ITL mean s",
    "e2e_mean_s": "E2E mean s",
    "requests": "requests",
    "failures": "failures",
}


def sweep(metrics: list[dict]) -> dict[str, dict[int, dict[str, float]]]:
    """station → concurrency → {metric suffix: value}, concurrencies ascending; {} when no sweep was recorded."""
    found: dict[str, dict[int, dict[str, float]]] = defaultdict(dict)
    for metric in metrics or []:
        match = SWEEP_METRIC.match(str(metric.get("name", "")))
        if match and isinstance(metric.get("value"), (int, float)):
            level = found[metric.get("station") or "-"].setdefault(int(match.group(1)), {})
            level[match.group(2)] = metric["value"]
    return {station: dict(sorted(levels.items())) for station, levels in sorted(found.items())}


def sweep_rows(metrics: list[dict]) -> list[dict]:
    """The sweep as table rows: one per station and concurrency, with the SWEEP_COLUMNS values (None where absent)."""
    return [{"station": station, "users": users, **{name: values.get(name) for name in SWEEP_COLUMNS}}
            for station, levels in sweep(metrics).items() for users, values in levels.items()]


def sweep_svg(metrics: list[dict]) -> str | None:
    """Aggregate throughput and TTFT p50 against concurrent users, one line per station, as an inline <svg> element
    (no XML prolog); None when the metrics hold no sweep."""
    data = sweep(metrics)
    if not data:
        return None
    import matplotlib

    matplotlib.use("Agg")  # no display: never a GUI backend on a station or a CI runner
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "golive", "font.size": 9}):
        figure = Figure(figsize=(9, 3.4), layout="constrained")
        throughput, ttft = figure.subplots(1, 2)
        for station, levels in data.items():
            users = list(levels)
            for axes, name in ((throughput, "aggregate_tok_s"), (ttft, "ttft_p50_s")):
                points = [(u, levels[u][name]) for u in users if name in levels[u]]
                if points:
                    axes.plot([u for u, _ in points], [v for _, v in points], marker="o", label=station)
        users = sorted({u for levels in data.values() for u in levels})
        for axes, title, unit in ((throughput, "Aggregate throughput", "tok/s"), (ttft, "TTFT p50", "s")):
            axes.set_title(f"{title} vs concurrent users")
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
    return text[text.index("<svg"):]
