"""The operating characteristic of golive's gates: how often each gate (and the whole sweep) says NO-GO, INCOMPLETE
or GO to a station that is healthy or worse by a known amount, at the shipped profiles' budgets, with the runner
quiet and loaded.

    .venv/bin/python bench/operating_characteristic.py                 # tier (a): ~200 go-lives a point, every point
    .venv/bin/python bench/operating_characteristic.py --golives 50 --profiles reference-cpu   # a quick look
    .venv/bin/python bench/operating_characteristic.py --validate      # tier (b): the real client, HTTP, against
                                                                       # the scripted station, quiet and loaded

Tier (a) runs golive's own rules, not a copy: golive.endpoint.load.run_plan (the levels, batches, ratio rounds, the
extra rounds while a gate is undecided, load.max_requests and max_duration_s), golive.endpoint.load_batch.summarize
(each batch's row from its requests), golive.endpoint.gates (the median of the rounds, its order-statistic interval,
the decision, the batch check), with the batches drawn from a station model (bench/station_model.py) on a virtual
clock: thousands of go-lives a minute. A go-live's verdict over the sweep's gates: NO-GO when one fails, else
INCOMPLETE when one is not checked, else GO (golive.endpoint.gates.decisions; the stream-shape, stall and path checks
read token timelines and are not in it). Each probability comes with its Wilson 95 % interval
(golive.endpoint.uncertainty.share_interval).

Tier (b) checks the model's rounds against what the real client measures: golive's sweep over HTTP
(golive.endpoint.load.sweep_async, the reference profile's plan) against bench/scripted_stream.py --script station at
the reference pace, with no noise on the server, quiet and with CPU hogs (`yes`, one per core) beside it; the rounds'
medians and spread against the model's for the same truth (the client's own time is what the model's `Client` adds).

Writes bench/results/operating-characteristic[-LABEL].json, the table for docs/performance.md on stdout, and
docs/operating-characteristic.png (the curves; a file of `--label before` drawn beside, where there is one).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from station_model import (
    CLIENT_LOADED,
    CLIENT_QUIET,
    DEGRADATIONS,
    HEALTHY,
    PACES,
    REFERENCE,
    STATION_LOADED,
    STATION_QUIET,
    Client,
    Degradation,
    Noise,
    Pace,
    SimulatedStation,
)

from golive.endpoint import gates
from golive.endpoint.load import SweepPlan, run_plan
from golive.endpoint.uncertainty import Decision, share_interval
from golive.profile.schema import Load, Profile
from golive.site.loader import load_profile

REPO = Path(__file__).resolve().parents[1]
PROFILES = {"reference-cpu": "reference", "glm-5.3-flash-gb300": "gb300", "glm-5.3-2x-station-tp2": "tp2"}
SITE = "reference-site"  # the reference profile's budget, floors at the healthy station's own truth, tolerance 10 %
RUNNERS = ("quiet", "loaded")
# the gate level's batches vLLM's counts are read beside: every measured one since the rules' change (golive 0.2.0
# read them during the ratio rounds only: GOLIVE_OC_RULES=before gives its curve from its checkout)
POLLED = ("round",) if os.environ.get("GOLIVE_OC_RULES") == "before" else ("level", "round")
WORDS = {Decision.FAILS: "NO-GO", Decision.UNDECIDED: "INCOMPLETE", Decision.PASSES: "GO"}


def drive(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never waits (the simulated station's batches take no time): no event loop needed."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("the simulated sweep waited on something")


def truth_load(load: Load, pace: Pace, output_tokens: int) -> Load:
    """`load` with floors at the healthy station's own medians (what a site sets after measuring it) and a 10 %
    tolerance: the rules' power at the pace and noise of the reference station, where its shipped floors cannot
    fail (they are 30 % of the worst run of this machine kind)."""

    def aggregate(users: int) -> float:
        return users * output_tokens / (pace.ttft(users) + (output_tokens - 1) * pace.step(users))

    top, gate = max(load.concurrency), load.gate_level
    floors = {
        "single_user_decode_tok_s": 1 / pace.step(1),
        "single_user_ttft_p50_s": pace.ttft(1),
        "aggregate_tok_s": aggregate(gate),
        "per_user_tok_s_p50": 1 / pace.step(gate),
        "ttft_p50_s": pace.ttft(gate),
        "peak_tok_s": max(aggregate(c) for c in load.concurrency if c <= top),
        "scaling_ratio": aggregate(gate) / aggregate(1),
        "per_user_ratio": pace.step(1) / pace.step(gate),
        "goodput_share": load.floors.goodput_share,
    }
    return load.model_copy(update={"floors": load.floors.model_copy(update=floors), "tolerance": 0.1})


@dataclass
class Setting:
    """One profile at one pace: its load budget and floors, the batch its recipe serves."""

    name: str
    load: Load
    max_num_seqs: int
    pace: Pace


def settings(names: list[str]) -> list[Setting]:
    found = []
    for name in names:
        shipped = name if name != SITE else "reference-cpu"
        profile: Profile = load_profile(shipped).profile
        assert profile.load is not None
        setting = Setting(
            name, profile.load, profile.vllm.max_num_seqs or max(profile.load.concurrency), PACES[PROFILES[shipped]]
        )
        setting.pace = calibrated(setting)
        if name == SITE:
            setting.load = truth_load(profile.load, REFERENCE, profile.load.output_tokens)
        found.append(setting)
    return found


def calibrated(setting: Setting, golives: int = 15) -> Pace:
    """The pace whose healthy go-lives, quiet, read the recipe's own numbers as golive measures them: the closed
    loop's tail (the last answer of a batch ends late) and the noise lower the measured aggregate below C answers
    over one answer's time, so each level's step and TTFT are scaled until the simulated medians (aggregate tok/s,
    TTFT p50) match the table's (three passes)."""
    pace = setting.pace
    load = setting.load
    for _ in range(3):
        trial = Setting(setting.name, load, setting.max_num_seqs, pace)
        measured: dict[int, list[tuple[float, float]]] = {}
        for i in range(golives):
            station_noise, client = noise_of(pace, "quiet")
            station = SimulatedStation(
                pace,
                HEALTHY,
                station_noise,
                client,
                trial.max_num_seqs,
                load.prompt_tokens,
                load.output_tokens,
                load.gate_level,
                np.random.default_rng([7, i]),
            )
            rows, _ = drive(run_plan(SweepPlan.of(load, load.concurrency), station.run, station.clock))
            for row in rows:
                if row.ttft_p50_s:
                    measured.setdefault(row.concurrency, []).append((row.aggregate_tok_s, row.ttft_p50_s))
        steps, ttfts = dict(pace.step_s), dict(pace.ttft_s)
        for users in pace.step_s:
            if users not in measured or users > setting.max_num_seqs:
                continue
            aggregate = statistics.median(a for a, _ in measured[users])
            ttft = statistics.median(t for _, t in measured[users])
            truth = PACES[pace.name]
            want = users * load.output_tokens / (truth.ttft(users) + (load.output_tokens - 1) * truth.step(users))
            ttfts[users] = pace.ttft_s[users] * truth.ttft(users) / ttft
            steps[users] = pace.step_s[users] * aggregate / want
        pace = Pace(pace.name, ttfts, steps, pace.remote)
    return pace


def noise_of(pace: Pace, runner: str) -> tuple[Noise, Client]:
    """Quiet: the station's own noise and the client's. Loaded (CPU hogs on the client's cores, as CI is): the client's
    loaded time; the station's too where it shares the runner's cores (the reference station), not a remote one."""
    if runner == "quiet":
        return STATION_QUIET, CLIENT_QUIET
    return (STATION_QUIET if pace.remote else STATION_LOADED), CLIENT_LOADED


@dataclass
class GoLive:
    decisions: dict[str, Decision]
    verdict: Decision
    detectable: dict[str, float]  # gate → this run's detectable degradation (golive.endpoint.gates.Gate.detectable)
    simulated_s: float
    requests: int


def go_live(setting: Setting, degradation: Degradation, runner: str, seed: list[int]) -> GoLive:
    """One simulated go-live through golive's own rules."""
    station_noise, client = noise_of(setting.pace, runner)
    load = setting.load
    station = SimulatedStation(
        setting.pace,
        degradation,
        station_noise,
        client,
        setting.max_num_seqs,
        load.prompt_tokens,
        load.output_tokens,
        load.gate_level,
        np.random.default_rng(seed),
        polled=POLLED,
    )
    plan = SweepPlan.of(load, load.concurrency)
    rows, _ = drive(run_plan(plan, station.run, station.clock))
    for row in rows:
        if row.concurrency == load.gate_level and station.engine_samples:
            row.engine_samples = station.engine_samples
    found = gates.decisions(load, rows, setting.max_num_seqs)
    detectable = {}
    for name in found:
        if name in gates.GATE_NAMES:
            measured = gates.peak(load, rows) if name == "peak_tok_s" else gates.gate(load, rows, name)  # type: ignore[arg-type]
            if measured is not None and measured.detectable is not None:
                detectable[name] = measured.detectable
    return GoLive(found, gates.verdict_of(found), detectable, station.now, sum(r.requests for r in rows))


@dataclass
class Point:
    setting: str
    runner: str
    degradation: str
    golives: int
    by_gate: dict[str, Counter] = field(default_factory=dict)
    verdicts: Counter = field(default_factory=Counter)
    detectable: dict[str, list[float]] = field(default_factory=dict)
    simulated_s: list[float] = field(default_factory=list)

    def add(self, run: GoLive) -> None:
        for name, decision in run.decisions.items():
            self.by_gate.setdefault(name, Counter())[WORDS[decision]] += 1
        self.verdicts[WORDS[run.verdict]] += 1
        for name, value in run.detectable.items():
            self.detectable.setdefault(name, []).append(value)
        self.simulated_s.append(run.simulated_s)

    def as_dict(self) -> dict[str, Any]:
        def shares(counts: Counter) -> dict[str, Any]:
            n = sum(counts.values())
            return {
                word: {"count": counts[word], "p": counts[word] / n, "wilson95": share_interval(counts[word], n)}
                for word in WORDS.values()
            }

        return {
            "setting": self.setting,
            "runner": self.runner,
            "degradation": self.degradation,
            "golives": self.golives,
            "verdict": shares(self.verdicts),
            "gates": {name: shares(counts) for name, counts in self.by_gate.items()},
            "detectable_median": {name: statistics.median(v) for name, v in self.detectable.items()},
            "simulated_s_median": statistics.median(self.simulated_s),
        }


def operating_characteristic(
    names: list[str], runners: list[str], degradations: tuple[Degradation, ...], golives: int, seed: int
) -> list[Point]:
    points = []
    for setting in settings(names):
        for runner in runners:
            for degradation in degradations:
                number = DEGRADATIONS.index(degradation)
                point = Point(setting.name, runner, degradation.name, golives)
                for i in range(golives):  # seeded by where it stands: a point's go-lives are the same in every run
                    where = [seed, [*PROFILES, SITE].index(setting.name), RUNNERS.index(runner), number, i]
                    point.add(go_live(setting, degradation, runner, where))
                points.append(point)
                print(_line(point), file=sys.stderr, flush=True)
    return points


def _p(counts: Counter, word: str) -> str:
    n = sum(counts.values())
    low, high = share_interval(counts[word], n) or (0.0, 1.0)
    return f"{counts[word] / n:.1%} ({low:.1%}–{high:.1%})".replace("%", " %")


def _line(point: Point) -> str:
    v = point.verdicts
    return (
        f"{point.setting:<24} {point.runner:<6} {point.degradation:<22} NO-GO {_p(v, 'NO-GO'):<26} "
        f"INCOMPLETE {_p(v, 'INCOMPLETE'):<26} GO {_p(v, 'GO')}"
    )


SHORT = {
    "single_user_decode_tok_s": "1-user decode",
    "single_user_ttft_p50_s": "1-user TTFT",
    "aggregate_tok_s": "aggregate",
    "per_user_tok_s_p50": "per-user",
    "ttft_p50_s": "TTFT at gate",
    "peak_tok_s": "peak",
    "scaling_ratio": "scaling",
    "per_user_ratio": "per-user ratio",
    "goodput_share": "goodput",
    gates.BATCH_CHECK: "batch check",
}


def _share(cell: dict[str, Any]) -> str:
    low, high = cell["wilson95"]
    return f"{100 * cell['p']:.1f} ({100 * low:.1f}–{100 * high:.1f})"


def table(points: list[dict[str, Any]]) -> str:
    """The markdown table: the whole sweep's verdict with Wilson 95 % intervals, then each gate's P(NO-GO) /
    P(INCOMPLETE); the median detectable degradation each healthy run reported (Gate.detectable)."""
    lines = []
    for name in dict.fromkeys(p["setting"] for p in points):
        mine = [p for p in points if p["setting"] == name]
        gate_names = list(dict.fromkeys(g for p in mine for g in p["gates"]))
        lines += [
            f"**{name}** ({mine[0]['golives']} go-lives a row; verdict in %, with its Wilson 95 % interval; each gate "
            "P(NO-GO) / P(INCOMPLETE) in %)",
            "",
            "| runner | station | NO-GO | INCOMPLETE | GO | " + " | ".join(SHORT[g] for g in gate_names) + " |",
            "| --- | --- | --- | --- | --- | " + " | ".join("---" for _ in gate_names) + " |",
        ]
        for p in mine:
            v = p["verdict"]
            cells = []
            for g in gate_names:
                c = p["gates"].get(g)
                cells.append("–" if c is None else f"{100 * c['NO-GO']['p']:.0f} / {100 * c['INCOMPLETE']['p']:.0f}")
            lines.append(
                f"| {p['runner']} | {p['degradation']} | {_share(v['NO-GO'])} | {_share(v['INCOMPLETE'])} | "
                f"{_share(v['GO'])} | " + " | ".join(cells) + " |"
            )
        healthy = [p for p in mine if p["degradation"] == "healthy"]
        for p in healthy:
            caught = ", ".join(f"{SHORT[g]} {x:.2f}×" for g, x in p["detectable_median"].items())
            lines.append(f"\nDetectable degradation (median of the healthy runs' own, {p['runner']}): {caught}.")
        lines.append("")
    return "\n".join(lines)


def plot(points: list[dict[str, Any]], before: list[dict[str, Any]] | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    names = list(dict.fromkeys(p["setting"] for p in points))
    figure = Figure(figsize=(4.2 * len(names), 4.2), layout="constrained")
    axes_all = figure.subplots(1, len(names), squeeze=False)[0]
    slower = {"healthy": 1.0, "1.1× slower": 1.1, "1.25× slower": 1.25, "1.5× slower": 1.5, "2× slower": 2.0}
    for axes, name in zip(axes_all, names, strict=True):
        for data, style, label in ((before, ":", "before"), (points, "-", "")):
            for runner, colour in (("quiet", "tab:blue"), ("loaded", "tab:red")):
                mine = [p for p in data or [] if p["setting"] == name and p["runner"] == runner]
                curve = sorted((slower[p["degradation"]], p) for p in mine if p["degradation"] in slower)
                if not curve:
                    continue
                xs = [x for x, _ in curve]
                for word, marker in (("NO-GO", "o"), ("INCOMPLETE", "x")):
                    ys = [p["verdict"][word]["p"] for _, p in curve]
                    low = [max(0.0, p["verdict"][word]["p"] - p["verdict"][word]["wilson95"][0]) for _, p in curve]
                    high = [max(0.0, p["verdict"][word]["wilson95"][1] - p["verdict"][word]["p"]) for _, p in curve]
                    axes.errorbar(
                        xs,
                        ys,
                        yerr=[low, high],
                        linestyle=style if word == "NO-GO" else "--",
                        marker=marker,
                        color=colour,
                        alpha=0.45 if label else 1.0,
                        capsize=2,
                        label=f"P({word}), {runner}" + (f" ({label})" if label else ""),
                    )
        axes.axhline(0.95, color="grey", linewidth=0.8)
        axes.axhline(0.05, color="grey", linewidth=0.8, linestyle="--")
        axes.set_title(name)
        axes.set_xlabel("station slower than its recipe (×)")
        axes.set_ylim(-0.02, 1.02)
        axes.grid(True, alpha=0.3)
    axes_all[0].set_ylabel("probability (Wilson 95 % CI)")
    axes_all[-1].legend(fontsize=7, loc="center right")
    figure.savefig(path, dpi=110, metadata={"Software": None})


# --- tier (b): the real client against the scripted station ---------------------------------------------------------


def validate(rounds: int, out: dict[str, Any]) -> None:
    """The reference profile's sweep over HTTP against the scripted station at the reference pace (no server noise),
    quiet and with one CPU hog per core; each level's rounds (aggregate tok/s, TTFT p50) against the model's rounds
    for the same truth with the client's time only (no station noise)."""
    sys.path.insert(0, str(REPO / "bench"))
    from stream_truth import Server

    from golive.endpoint.load import sweep_async
    from golive.endpoint.load_request import Workload
    from golive.endpoint.target import EndpointTarget

    profile = load_profile("reference-cpu").profile
    assert profile.load is not None
    load = profile.load.model_copy(update={"ratio_rounds": rounds})
    pace = REFERENCE
    flags = ["--script", "station", "--role-with-first-token"]
    flags += ["--ttft-table", *(f"{k}:{v * 1000:g}" for k, v in pace.ttft_s.items())]
    flags += ["--step-table", *(f"{k}:{v * 1000:g}" for k, v in pace.step_s.items())]
    silent = Noise("none", 0, 0, 0, 0, 0, 0, (0, 0), 0, 0, 0, (1, 0), 0, 0.0)
    for runner in RUNNERS:
        hogs = (
            [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(os.cpu_count() or 2)]
            if (runner == "loaded")
            else []
        )
        try:
            with Server(*flags) as server:
                workload = Workload(
                    model="scripted", prompt_tokens=load.prompt_tokens, output_tokens=load.output_tokens
                )
                plan = SweepPlan.of(load, load.concurrency)
                plan = SweepPlan(**{**plan.__dict__, "undecided": None})
                began = time.perf_counter()
                swept = asyncio.run(sweep_async(EndpointTarget(server.url + "/v1"), workload, plan))
                took = time.perf_counter() - began
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
        model = {}
        for client in (CLIENT_QUIET, CLIENT_LOADED):
            station = SimulatedStation(
                pace, HEALTHY, silent, client, 16, 40, load.output_tokens, load.gate_level, np.random.default_rng(1)
            )
            rows, _ = drive(run_plan(SweepPlan.of(load, load.concurrency), station.run, station.clock))
            model[client.name] = {r.concurrency: r for r in rows}
        levels = {}
        for row in swept.levels:
            sim = model[runner][row.concurrency]
            levels[row.concurrency] = {
                quantity: {
                    "measured_rounds": row.rounds_of(quantity),
                    "measured_median": row.value_of(quantity),
                    "model_median": sim.value_of(quantity),
                    "model_rounds": sim.rounds_of(quantity),
                    "measured_spread_log_sd": _log_sd(row.rounds_of(quantity)),
                    "model_spread_log_sd": _log_sd(sim.rounds_of(quantity)),
                }
                for quantity in ("aggregate_tok_s", "ttft_p50_s")
            }
            print(
                f"validate {runner}: {row.concurrency} users: tok/s measured {row.aggregate_tok_s:,.1f} "
                f"model {sim.aggregate_tok_s:,.1f} ({row.aggregate_tok_s / sim.aggregate_tok_s:.3f}); TTFT p50 "
                f"measured {1000 * (row.ttft_p50_s or 0):.2f} ms model {1000 * (sim.ttft_p50_s or 0):.2f} ms; "
                f"rounds' σ(log) tok/s {_log_sd(row.rounds_of('aggregate_tok_s')):.3f}, TTFT "
                f"{_log_sd(row.rounds_of('ttft_p50_s')):.3f}",
                file=sys.stderr,
                flush=True,
            )
        out[runner] = {"took_s": took, "load_average": os.getloadavg(), "levels": levels}


def _log_sd(values: Any) -> float:
    kept = [math.log(v) for v in values or [] if v]
    return statistics.stdev(kept) if len(kept) > 1 else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golives", type=int, default=200)
    parser.add_argument("--profiles", nargs="+", default=[*PROFILES, SITE], choices=[*PROFILES, SITE])
    parser.add_argument("--runners", nargs="+", default=list(RUNNERS), choices=RUNNERS)
    parser.add_argument("--degradations", nargs="+", help="only these (by name, as the table says them)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--label", default="", help="a suffix for the results file (`before`: a rule's old curve)")
    parser.add_argument("--plot", type=Path, default=REPO / "docs/operating-characteristic.png")
    parser.add_argument("--validate", action="store_true", help="tier (b) only: the real client, over HTTP")
    parser.add_argument("--validate-rounds", type=int, default=7)
    parser.add_argument(
        "--render",
        nargs="+",
        type=Path,
        help="no run: the table and the plot of these results files (their points in order; a file named "
        "*before* drawn as the rules' old curve)",
    )
    args = parser.parse_args()
    suffix = f"-{args.label}" if args.label else ""
    results = REPO / "bench/results"
    results.mkdir(parents=True, exist_ok=True)
    if args.render:

        def read(before: bool) -> list[dict[str, Any]]:
            """The files' points in order; a point run again in a later file (a profile's new budget) replaces it."""
            found: dict[tuple[str, str, str], dict[str, Any]] = {}
            for f in args.render:
                if ("before" in f.name) == before:
                    for p in json.loads(f.read_text())["points"]:
                        found.pop((p["setting"], p["runner"], p["degradation"]), None)
                        found[(p["setting"], p["runner"], p["degradation"])] = p
            order = [*PROFILES, SITE]
            kinds = [d.name for d in DEGRADATIONS]
            return sorted(
                found.values(),
                key=lambda p: (order.index(p["setting"]), RUNNERS.index(p["runner"]), kinds.index(p["degradation"])),
            )

        now, old = read(False), read(True)
        plot(now, old or None, args.plot)
        print(table(now))
        if old:
            print("Before the rules' change:\n\n" + table(old))
        return 0
    if args.validate:
        out: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
        validate(args.validate_rounds, out)
        (results / "oc-validation.json").write_text(json.dumps(out, indent=1, default=str))
        return 0
    began = time.perf_counter()
    load_before = os.getloadavg()
    chosen = tuple(d for d in DEGRADATIONS if not args.degradations or d.name in args.degradations)
    points = operating_characteristic(args.profiles, args.runners, chosen, args.golives, args.seed)
    took = time.perf_counter() - began
    data = [p.as_dict() for p in points]
    path = results / f"operating-characteristic{suffix}.json"
    path.write_text(
        json.dumps(
            {
                "took_s": took,
                "load_average": [load_before, os.getloadavg()],
                "golives": args.golives,
                "seed": args.seed,
                "points": data,
            },
            indent=1,
        )
    )
    before_path = results / "operating-characteristic-before.json"
    before = json.loads(before_path.read_text())["points"] if before_path.exists() and suffix != "-before" else None
    if not suffix:
        plot(data, before, args.plot)
    print(table(data))
    print(f"{sum(p.golives for p in points)} go-lives in {took:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
