"""Efficiency of the online search against an exhaustive sweep of the same space.

The measurement function is the performance model itself with *other* parameters than the
planner starts from — the "deployment" is a known truth: every efficiency and fixed cost the
model has is multiplied by a seeded random factor (log-normal, σ = ``--spread``), so the truth is
unevenly slower or faster than the shipped model (slower links hurt TP, a heavier framework
step hurts small batches, KV transfer hurts disaggregation…). A run is one candidate unit
"measured" at one of the concurrencies (ISL/OSL at 1, 4, 16 or 64 clients) the service may run
genai-bench at.

Per scenario and truth: the exhaustive sweep measures every run of every unit of the space
(aggregated engines and prefill/decode pairs, as the offline planner considers them) and picks the
unit with the best score; the online search (``workers.online.profile_online``, its Optuna study in
a temporary SQLite file) measures run by run until it converges or its budget (a third of the
space's runs) is used. Reported: the space, the runs each used, the runs the same stop rule needs
when the truth itself predicts (what the landscape alone asks for), whether the online pick is the
sweep's pick, and the online pick's true score as a share of the sweep's.

    python benchmarks/online_search.py [--truths 5] [--spread 0.3] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SWEEP = (1, 4, 16, 64)
SCENARIOS = [  # (label, request fields)
    ("Llama-3.1-8B · A100 · 3000/500 · TTFT 500 ms, ITL 20 ms",
     dict(model="meta-llama/Llama-3.1-8B-Instruct", gpu="a100_sxm", isl_tokens=3000, osl_tokens=500, ttft_ms=500,
          itl_ms=20, max_gpus_per_engine=8)),
    ("Llama-3.1-70B · H100 · 2000/300 · TTFT 600 ms, ITL 30 ms",
     dict(model="meta-llama/Llama-3.1-70B-Instruct", gpu="h100_sxm", isl_tokens=2000, osl_tokens=300, ttft_ms=600,
          itl_ms=30, max_gpus_per_engine=8)),
    ("Qwen3-32B · H200 · 4000/1000 · TTFT 1000 ms, ITL 25 ms",
     dict(model="Qwen/Qwen3-32B", gpu="h200_sxm", isl_tokens=4000, osl_tokens=1000, ttft_ms=1000, itl_ms=25,
          max_gpus_per_engine=8)),
    ("Qwen3-30B-A3B (MoE) · H100 · 1000/200 · TTFT 300 ms, ITL 15 ms",
     dict(model="Qwen/Qwen3-30B-A3B", gpu="h100_sxm", isl_tokens=1000, osl_tokens=200, ttft_ms=300, itl_ms=15,
          max_gpus_per_engine=8)),
]


def truth(seed: int, spread: float) -> dict[str, float]:
    """The shipped parameters, each efficiency and fixed cost off by a seeded random factor."""
    from profiler.model.params import PARAMS, shipped_params

    rng = random.Random(seed)
    out = dict(shipped_params())
    for name, (_, lo, hi) in PARAMS.items():
        if name.startswith(("eff_", "kv_transfer")) or name.endswith(("_us", "_ms")) or "_ms_" in name:
            out[name] = min(hi, max(lo, out[name] * math.exp(rng.gauss(0.0, spread))))
    return out


class Everywhere:
    """A target that runs every unit: the measurements come from the truth model."""

    def supports(self, unit):
        return None


def run(label: str, fields: dict, seed: int, spread: float) -> dict:
    from planner import online as search
    from planner import plan
    from planner.types import PlanRequest
    from profiler.bench.standin import model_iterations
    from profiler.hub import load_model
    from workers import online

    request = PlanRequest(name="bench", **fields, max_trials=None, sweep_concurrency=SWEEP)
    arch = load_model(request.model)
    true = truth(seed, spread)
    units = search.units(plan(request, model=arch).candidates)
    measured = search.predict(units, request, SWEEP, true, arch[0])
    scores = {k: search.score(measured[k], units[k].total_gpus, request) for k in units}
    sweep_pick = max(scores, key=scores.get)
    gpus = {k: u.total_gpus for k, u in units.items()}
    runs = search.runs(measured)
    known: dict = {}
    while (key := search.next_run(runs, known, gpus, request)) is not None:  # the stop rule, knowing the truth
        known[key] = runs[key]

    calls: list[tuple[str, int]] = []

    def measure(unit, clients, req, name):
        calls.append((search.unit_key(unit), clients))
        points = search.predict({"u": unit}, req, (clients,), true, arch[0])["u"]
        return model_iterations(points, req.isl_tokens, req.osl_tokens, name), "", None

    budget = max(1, len(runs) // 3)
    with tempfile.TemporaryDirectory() as tmp:
        setup = online.Online(database_url=f"sqlite:///{tmp}/study.db", target=Everywhere(), target_name="model",
                              runner=None, max_trials=budget)
        started = time.perf_counter()
        result, fit, _ = online.profile_online(request, uid=f"bench-{seed}", generation=1, setup=setup, model=arch,
                                               measure=measure)
        seconds = time.perf_counter() - started
    pick = result.online.best
    best = scores[sweep_pick]
    return {"scenario": label, "truth": seed, "units": len(units), "space": len(runs), "runs": len(calls),
            "budget": budget,
            "oracle": len(known),
            "same": pick == sweep_pick, "share": scores[pick] / best if best > 0 else float("nan"),
            "sweep_pick": sweep_pick, "online_pick": pick, "scale": fit.scale, "seconds": seconds,
            "stopped": result.online.stopped}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--truths", type=int, default=5, help="random truths per scenario")
    parser.add_argument("--spread", type=float, default=0.3, help="σ of the log-normal parameter factors")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rows = []
    print("| scenario | truth | units (runs) | online runs | runs knowing the truth | same pick as the sweep |"
          " online pick's true score / sweep's | sweep pick | online pick | stopped |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, fields in SCENARIOS:
        for i in range(args.truths):
            r = run(label, fields, args.seed * 1000 + i, args.spread)
            rows.append(r)
            print(f"| {label} | {r['truth']} | {r['units']} ({r['space']}) | {r['runs']} | {r['oracle']} | {'yes' if r['same'] else 'no'} | "
                  f"{r['share']:.3f} | {r['sweep_pick']} | {r['online_pick']} | {r['stopped']} |", flush=True)
    runs, space = sum(r["runs"] for r in rows), sum(r["space"] for r in rows)
    same = sum(r["same"] for r in rows)
    worst = min(r["share"] for r in rows)
    print(f"\n{len(rows)} searches: the online search reached the sweep's pick in {same}/{len(rows)}, "
          f"with {runs} benchmark runs against the sweeps' {space} ({runs / space:.1%}; "
          f"{sum(r['oracle'] for r in rows)} knowing the truth); "
          f"at most {max(r['runs'] / r['space'] for r in rows):.1%} of a sweep in one search; "
          f"worst online pick {worst:.1%} of the sweep's score; "
          f"median search {sorted(r['seconds'] for r in rows)[len(rows) // 2]:.1f} s of computing besides the runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
