"""Budget use: the load slaplan's plan and AIConfigurator's serve within the SLA on the same GPU budget.

Three requests with a budget and no load stated (issue: budget use), all vLLM, ISL 3000 / OSL 500
(a v1alpha1 request's lengths), TTFT ≤ 500 ms and ITL (TPOT) ≤ 20 ms: Llama-3.1-70B on 16 H200,
Llama-3.1-8B on 8 H100, Qwen3-32B on 8 H200. For each, side by side:

- slaplan: its plan (``planner.plan``), with the GPUs it uses and the output tokens/s and
  requests/s its own model predicts for the whole deployment;
- AIConfigurator: ``CMD --model-path … --total-gpus … --system … --backend vllm --isl --osl --ttft
  --tpot --save-dir …`` (``--compare "CMD"``, e.g. ``"/path/to/venv/bin/aiconfigurator cli
  default"``, run in its own environment), with the GPUs, tokens/s and requests/s of its best
  configuration as its own model predicts them;
- each deployment judged by the other tool's model, so that the two plans are compared under
  one model at a time: AIConfigurator's deployment (same engines, workers and replicas) by
  slaplan's model at the most closed-loop clients it serves within the SLA (found by bisection); slaplan's deployment
  by ``aiconfigurator cli estimate`` (the same command with ``default`` replaced by ``estimate``)
  at the clients per engine slaplan planned, each shape of a mix on its own, summed.

Run from the repository root::

    .venv/bin/python benchmarks/budget_use.py [--compare "AIC CLI default"] [--work DIR]

Without ``--compare`` only slaplan's columns are filled. AIConfigurator takes 15–25 s a request
and about 13 s an estimate on the 2-core machine.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

ISL, OSL, TTFT_MS, ITL_MS = 3000, 500, 500.0, 20.0
MAX_CLIENTS = 8192  # closed-loop clients tried at most when judging a deployment


@dataclass(frozen=True)
class Case:
    """One request: the model as each tool names it, the GPU type and the budget."""

    model: str
    aic_model: str
    gpu: str
    budget: int


CASES = (
    Case("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Meta-Llama-3.1-70B", "h200_sxm", 16),
    Case("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B", "h100_sxm", 8),
    Case("Qwen/Qwen3-32B", "Qwen/Qwen3-32B", "h200_sxm", 8),
)


@dataclass(frozen=True)
class Served:
    """A deployment and the load it serves within the SLA: GPUs, output tokens/s, requests/s."""

    shape: str
    gpus: int
    tok_s: float
    req_s: float


@dataclass(frozen=True)
class AicBest:
    """AIConfigurator's best configuration, as its summary and top-configuration table state it."""

    served: Served
    mode: str  # "agg" or "disagg"
    replicas: int
    tp: int = 0  # aggregated engines
    prefill_tp: int = 0
    prefill_workers: int = 0
    decode_tp: int = 0
    decode_workers: int = 0


def slaplan_plan(case: Case):
    """slaplan's plan of ``case`` (no load stated: the most load within the SLA on the budget)."""
    from planner import plan
    from planner.types import PlanRequest

    req = PlanRequest(name="budget", model=case.model, gpu=case.gpu, backend="vllm", isl_tokens=ISL, osl_tokens=OSL,
                      ttft_ms=TTFT_MS, itl_ms=ITL_MS, total_gpus=case.budget)
    return plan(req).chosen


def served_by_plan(chosen) -> Served:
    p = chosen.predicted
    return Served(chosen.shape(), chosen.total_gpus, p.output_tok_s_per_gpu * chosen.total_gpus, p.requests_per_s)


def _number(text: str, label: str) -> float:
    found = re.search(rf"{re.escape(label)}:\s*([\d,.]+)", text)
    if not found:
        raise SystemExit(f"AIConfigurator's output has no {label!r}")
    return float(found.group(1).replace(",", ""))


def table_rows(text: str, mode: str) -> list[dict[str, str]]:
    """The rows of AIConfigurator's ``<mode> Top Configurations`` table, best first, by column name."""
    lines: list[str] = []
    for line in text.split(f"{mode} Top Configurations", 1)[1].splitlines()[1:]:
        if line.startswith("|"):
            lines.append(line)
        elif lines and not line.startswith("+"):
            break  # the table ended
    head, *rows = ([c.strip() for c in line.strip("|").split("|")] for line in lines)
    return [dict(zip(head, row)) for row in rows]


def _table_row(text: str, mode: str) -> dict[str, str]:
    """The first row of AIConfigurator's ``<mode> Top Configurations`` table, by column name."""
    return table_rows(text, mode)[0]


def tp_of(parallel: str) -> int:
    return int(re.match(r"tp(\d+)", parallel).group(1))


def parse_aic(text: str) -> AicBest:
    """AIConfigurator ``cli default``'s chosen configuration from its printed summary."""
    mode = re.search(r"Best Experiment Chosen:\s*(\w+)", text).group(1)
    tok_s, per_gpu = _number(text, "Best Throughput"), _number(text, "Per-GPU Throughput")
    row = _table_row(text, mode)
    replicas = int(row["replicas"])
    gpus = round(tok_s / per_gpu)
    if mode == "agg":
        tp = tp_of(row["parallel"])
        return AicBest(Served(f"{replicas}×tp{tp}", gpus, tok_s, _number(text, "Request Rate")), mode, replicas, tp=tp)
    p_tp, d_tp = tp_of(row["(p)parallel"]), tp_of(row["(d)parallel"])
    n_p, n_d = int(row["(p)workers"]) * replicas, int(row["(d)workers"]) * replicas
    return AicBest(Served(f"P{n_p}×tp{p_tp} + D{n_d}×tp{d_tp}", gpus, tok_s, _number(text, "Request Rate")), mode,
                   replicas, prefill_tp=p_tp, prefill_workers=n_p, decode_tp=d_tp, decode_workers=n_d)


def run(argv: list[str], *, answer_if: str | None = None) -> str:
    """``argv``'s output (stdout and stderr); a failure is an error unless its output holds ``answer_if``."""
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if done.returncode and not (answer_if and answer_if in done.stdout + done.stderr):
        raise SystemExit(f"{shlex.join(argv)} exited with {done.returncode}:\n{done.stderr[-2000:]}")
    return done.stdout + done.stderr


def run_aic(command: list[str], case: Case, work: Path) -> AicBest:
    argv = [*command, "--model-path", case.aic_model, "--total-gpus", str(case.budget), "--system", case.gpu,
            "--backend", "vllm", "--isl", str(ISL), "--osl", str(OSL), "--ttft", f"{TTFT_MS:g}",
            "--tpot", f"{ITL_MS:g}", "--save-dir", str(work / case.gpu / case.aic_model.replace("/", "_"))]
    return parse_aic(run(argv))


def slaplan_judges(case: Case, best: AicBest) -> Served:
    """AIConfigurator's deployment under slaplan's model: the most closed-loop clients (of a grid)
    it serves within the SLA, and the tokens/s and requests/s there."""
    from profiler.model.config import Parallel, ServingConfig
    from profiler.model.estimate import estimate

    if best.mode == "agg":
        roles = {"mode": "agg", "engine": Parallel(tp=best.tp), "replicas": best.replicas}
    else:
        roles = {"mode": "disagg", "prefill": Parallel(tp=best.prefill_tp), "decode": Parallel(tp=best.decode_tp),
                 "prefill_workers": best.prefill_workers, "decode_workers": best.decode_workers}
    def at(clients: int):
        return estimate(ServingConfig(model=case.model, gpu=case.gpu, backend="vllm", isl_tokens=ISL, osl_tokens=OSL,
                                      concurrency=float(clients), **roles))

    def meets(clients: int) -> bool:
        e = at(clients)
        return e.ttft_ms <= TTFT_MS and e.itl_ms <= ITL_MS and not e.saturated

    clients = most_clients(meets)
    if clients == 0:
        return Served(best.served.shape, best.served.gpus, 0.0, 0.0)
    e = at(clients)
    return Served(best.served.shape, best.served.gpus, e.output_tok_s_per_gpu * best.served.gpus, e.requests_per_s)


def most_clients(meets, limit: int = MAX_CLIENTS) -> int:
    """The most closed-loop clients (a whole number up to ``limit``) for which ``meets`` holds,
    taking the SLA to hold up to some load and not beyond (0 when it fails for one client)."""
    if not meets(1):
        return 0
    lo, hi = 1, 2
    while hi <= limit and meets(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, limit + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if meets(mid) else (lo, mid)
    return lo


def aic_judges(command: list[str], case: Case, chosen) -> tuple[Served, bool]:
    """slaplan's aggregated deployment under AIConfigurator's model (``cli estimate`` per engine shape,
    at the clients per engine slaplan planned, summed), and whether every shape meets the SLA there."""
    estimate_cmd = [("estimate" if word == "default" else word) for word in command]
    parts = chosen.parts or (chosen,)
    tok_s = req_s = 0.0
    meets = True
    for part in parts:
        engine = part.engines[0]
        clients = round(part.predicted.concurrency / engine.replicas)
        text = run([*estimate_cmd, "--model-path", case.aic_model, "--system", case.gpu, "--backend", "vllm",
                    "--isl", str(ISL), "--osl", str(OSL), "--estimate-mode", "agg", "--tp-size", str(engine.tp),
                    "--batch-size", str(clients)])
        tok_s += _number(text, "tokens/s") * engine.replicas
        req_s += _number(text, "seq/s") * engine.replicas
        meets &= _number(text, "TTFT") <= TTFT_MS and _number(text, "TPOT") <= ITL_MS
    return Served(chosen.shape(), chosen.total_gpus, tok_s, req_s), meets


def _cells(s: Served | None, *, gpus: bool = True) -> str:
    """``GPUs | tok/s | req/s`` (without the GPUs for a deployment named in another column)."""
    if s is None:
        return "— | — | —" if gpus else "— | —"
    return (f"{s.gpus} | " if gpus else "") + f"{s.tok_s:,.0f} | {s.req_s:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare", metavar="CMD", help='AIConfigurator\'s CLI, e.g. "venv/bin/aiconfigurator cli default"')
    ap.add_argument("--work", type=Path, help="where AIConfigurator saves its results (default: a temporary directory)")
    args = ap.parse_args(argv)
    command = shlex.split(args.compare) if args.compare else None
    work = args.work or Path(tempfile.mkdtemp(prefix="budget-use-"))
    print(f"vLLM, ISL {ISL} / OSL {OSL}, TTFT ≤ {TTFT_MS:g} ms, ITL ≤ {ITL_MS:g} ms, no load stated; "
          "output tokens/s and requests/s of the whole deployment at the SLA\n")
    print("| request | budget | slaplan's plan | GPUs | tok/s | req/s | AIConfigurator's plan | GPUs | tok/s | req/s "
          "| AIConfigurator's plan by slaplan's model: tok/s | req/s "
          "| slaplan's plan by AIConfigurator's model: tok/s | req/s |")
    print("|---|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for case in CASES:
        chosen = slaplan_plan(case)
        mine = served_by_plan(chosen)
        theirs = judged = mine_judged = None
        meets = True
        if command:
            best = run_aic(command, case, work)
            theirs = best.served
            judged = slaplan_judges(case, best)
            mine_judged, meets = aic_judges(command, case, chosen) if chosen.mode == "agg" else (None, True)
        name = case.model.split("/")[-1].removesuffix("-Instruct")
        print(f"| {name} on {case.gpu} | {case.budget} | {mine.shape} | {_cells(mine)} | "
              f"{theirs.shape if theirs else '—'} | {_cells(theirs)} | {_cells(judged, gpus=False)} | "
              f"{_cells(mine_judged, gpus=False)}{'' if meets else ' (misses the SLA there)'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
