"""Budget plans judged by measurement: slaplan's and AIConfigurator's plans of requests drawn from
measured workloads, each scored by the measured rows of the engines it deploys.

A workload is measured aggregated engines of one model, GPU type, backend, precision and ISL/OSL
at several parallel shapes and concurrencies (``WORKLOADS``; the rows of the calibration data,
read with what their recipes state, as in ``benchmarks/accuracy.py``). A request asks for the
workload on a budget of ``BUDGET`` GPUs with no load stated, under an SLA drawn from the
workload's measurements: mean TTFT and TPOT at the same quantile of its measured TTFTs and TPOTs,
for each of ``SLA_QUANTILES`` (an SLA no measured row meets is skipped). Both tools plan it:

- slaplan (``planner.plan``) twice: with the shipped parameters, which were fitted on these very
  rows, and with parameters fitted without the workload's model family (one cross-validation
  fold's fit, ``profiler.model.calibrate.fit_without``, as ``benchmarks/accuracy.py`` makes it).
  The SLA is in measured TTFTs, which include what the source that measured them adds to each
  request, so each request states that term and the plan's TTFT includes it: SLA, plan and
  measurement are then the same quantity. ``--harness typical`` (default): the per-backend term
  fitted beside the column's parameters (``harness_ttft_ms``, ``profiler/model/harness.py``);
  ``source``: the term read off the source's OTHER workloads on the backend, as a user measures
  their client once and states it (``source_term``: median of measured less the engine's
  predicted TTFT of those rows under the column's parameters; the judged workload's rows never
  read, the family's neither in the family-held-out column); ``none``: the engine's TTFT alone
  held to the measured SLA. With
  ``--error-margin`` plans keep the TTFT error margin (``profiler.model.ttft_error_factor``; the
  family-held-out column's fitted without the family too);
- AIConfigurator (``--compare "CMD"``, e.g. ``"/path/to/venv/bin/aiconfigurator cli default"``)
  restricted to aggregated deployments (``--serving-mode agg``), the only mode measured here.

A plan is judged by the measured rows of its engine shape (same model, GPU, backend, precision,
parallelism, aggregated): the most clients per engine the measurements show within the SLA
(log-log interpolation between the measured concurrencies where the SLA is first missed, in
whole clients, never beyond the measured range), times the plan's engines, as output tokens/s
and requests/s of the deployment. Where the SLA holds at the most clients measured, the
capacity is a lower bound (``≥``). A plan with an engine shape nobody measured, or whose
engine misses the SLA at the fewest clients measured (above one), is not judged; when a
tool's pick has an unmeasured shape (slaplan: a disaggregated pick), its best measured
aggregated alternative (the next it ranks) is judged instead, labelled ``alt``.

Reported over the judged requests, for each slaplan column against AIConfigurator: how often
each plan serves more, the median ratio of served output tokens/s, the SLA misses in reality
(a plan whose clients per engine measure over the SLA), and the measured capacity over the
clients each tool planned (above 1: load the measurements say the engines could carry).

    .venv/bin/python benchmarks/budget_measured.py [--compare "AIC CLI default"] [--work DIR]
                                                   [--max-evals N] [--data CSV] [--recipes CSV]
                                                   [--harness typical|source|none] [--error-margin]

Each family held out costs one fit (about a minute on the 2-core machine); AIConfigurator takes
15–35 s a request: 9–15 min for the 33 requests.
"""

from __future__ import annotations

import argparse
import math
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.accuracy import SLA_QUANTILES, add_recipes_argument, with_recipes_of  # noqa: E402
from benchmarks.budget_use import run, table_rows  # noqa: E402

BUDGET = 8  # GPUs of every request: one node of the GPU types below
# What a request states its harness adds to TTFT (``--harness``), and how the run says so.
HARNESS_CHOICES = {
    "source": "the measuring source's TTFT term, read off the source's other workloads on the backend (the judged "
              "workload's rows left out; family held out: the family's rows too)",
    "typical": "the per-backend typical harness term fitted beside the column's parameters",
    "none": "no harness: plans predict the engine's TTFT alone",
}
NOTHING_FEASIBLE = "found no SLA-feasible configuration"  # AIConfigurator's words when nothing meets the SLA


@dataclass(frozen=True)
class Workload:
    """Measured aggregated engines of one model on one GPU type, backend, precision and ISL/OSL."""

    model: str  # as the data names it, and as slaplan plans it
    aic_model: str  # the checkpoint AIConfigurator plans the same weights with
    gpu: str
    backend: str
    precision: str  # as the data records it ("": the model's own)
    isl: int
    osl: int

    @property
    def name(self) -> str:
        return (f"{self.model.split('/')[-1].removesuffix('-Instruct')} {self.precision or 'bf16'} {self.backend} "
                f"{self.gpu} {self.isl}/{self.osl}")


# Dense models both tools plan in the measured precision, measured at three or more engine shapes:
# every Llama-3.1-70B FP8 sweep (AIConfigurator has that checkpoint; it has no FP4 one) and two of the
# nine Llama-3.1-8B TRT-LLM sweeps (the shortest and longest prompts with the median output length).
_FP8_70B = ("meta-llama/Llama-3.1-70B", "nvidia/Llama-3.1-70B-Instruct-FP8")
_8B = ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B")
_LENGTHS_70B = ((1024, 1024), (1024, 8192), (8192, 1024))
WORKLOADS = (
    *(Workload(*_FP8_70B, gpu, backend, "fp8", isl, osl) for gpu, backend in
      (("h100_sxm", "vllm"), ("b200_sxm", "vllm"), ("b200_sxm", "trtllm")) for isl, osl in _LENGTHS_70B),
    Workload(*_8B, "h100_sxm", "trtllm", "", 1024, 256),
    Workload(*_8B, "h100_sxm", "trtllm", "", 4096, 256),
)


@dataclass(frozen=True)
class Curve:
    """One engine shape's measurements, by ascending clients: mean TTFT and TPOT (ms) and output
    tokens/s of one engine (duplicates at one concurrency averaged)."""

    clients: tuple[float, ...]
    ttft_ms: tuple[float, ...]
    tpot_ms: tuple[float, ...]
    tok_s: tuple[float, ...]


def _number(text) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def _of(rows: list[dict], w: Workload) -> list[dict]:
    """The aggregated calibration rows of ``w``."""
    return [row for row in rows
            if row.get("mode") == "agg" and row.get("model") == w.model and row.get("gpu") == w.gpu
            and row.get("backend") == w.backend and str(row.get("precision") or "").strip() == w.precision
            and _number(row.get("isl")) == w.isl and _number(row.get("osl")) == w.osl]


def harness_ttft_ms(rows: list[dict], w: Workload, params: dict[str, float]) -> float:
    """What the harnesses that measured ``w`` add to its TTFTs (ms, mean over its rows): the typical
    terms fitted beside ``params`` per backend (``profiler/model/harness.py``)."""
    from profiler.model.harness import harness_of, term_ms

    return statistics.fmean(term_ms(params, harness_of(row), w.backend) for row in _of(rows, w))


@dataclass(frozen=True)
class SourceTerm:
    """What one measuring source adds to TTFT on one backend, read off its other workloads: the
    median over their rows of measured TTFT less the engine's predicted TTFT (ms), and the rows
    and workloads (model, GPU, ISL/OSL, mode) it was read from."""

    source: str
    ms: float
    rows: int
    workloads: int


def source_of(rows: list[dict], w: Workload) -> str:
    """The measuring source of ``w``'s rows (their ``provenance``'s first field; the most common one
    when several, the first of the rows among equally common ones)."""
    from profiler.model.harness import harness_of

    named = [harness_of(row) for row in _of(rows, w)]
    return max(dict.fromkeys(named), key=named.count)


def source_term(data, engine_ttft_ms, rows: list[dict], w: Workload, without_family: str | None = None) -> SourceTerm:
    """What ``w``'s measuring source adds to TTFT on ``w``'s backend, estimated as a user states their
    client's cost: from the source's rows of that backend outside ``w`` (any mode, precision or
    model but ``w``'s model, GPU and ISL/OSL), and outside the family ``without_family`` when
    given. ``data`` is ``prepare_rows(rows)``, ``engine_ttft_ms`` the engine's predicted TTFT of
    each of its rows (ms, no harness term). Raises ValueError when the source has no such rows."""
    import numpy as np

    from profiler.model.calibrate import family

    source = source_of(rows, w)
    picked = [rows[i] for i in data.index]
    same = np.array([r.get("model") == w.model and r.get("gpu") == w.gpu and _number(r.get("isl")) == w.isl
                     and _number(r.get("osl")) == w.osl for r in picked])
    mask = ((data.harness == source) & (data.labels["backend"] == w.backend) & ~same & ~data.repeats
            & np.isfinite(data.ttft_ms) & (data.ttft_ms > 0) & np.isfinite(engine_ttft_ms))
    if without_family is not None:
        mask &= data.labels["family"] != without_family
    if not mask.any():
        raise ValueError(f"source {source!r} has no {w.backend} rows outside {w.name}")
    workloads = {(r.get("model"), r.get("gpu"), r.get("isl"), r.get("osl"), r.get("mode"))
                 for r, m in zip(picked, mask) if m}
    residual = data.ttft_ms[mask] - engine_ttft_ms[mask]
    return SourceTerm(source, max(0.0, float(np.median(residual))), int(mask.sum()), len(workloads))


def engine_ttft_ms(data, params: dict[str, float]):
    """The engine's predicted TTFT (ms) of each of ``data``'s rows, in the statistic each reports,
    no harness term: what a deployment's prediction is."""
    from profiler.model.calibrate import reported_ttft_ms
    from profiler.model.estimate import evaluate

    return reported_ttft_ms(data, params, evaluate(data.batch, params))


def curves(rows: list[dict], w: Workload) -> dict[tuple[int, int], Curve]:
    """The measured engines of ``w`` in ``rows`` (calibration rows), keyed by (TP, PP)."""
    points: dict[tuple[int, int], dict[float, list[tuple[float, float, float]]]] = {}
    for row in _of(rows, w):
        values = [_number(row.get(k)) for k in ("concurrency", "ttft_ms", "tpot_ms", "derived_output_tok_s_per_gpu",
                                                 "num_gpus", "tp")]
        if not all(math.isfinite(v) and v > 0 for v in values) or any(
                _number(row.get(k)) > 1 for k in ("attn_dp", "moe_ep")):  # dense engines alone
            continue
        clients, ttft, tpot, per_gpu, gpus, tp = values
        pp = _number(row.get("pp"))
        pp = int(pp) if math.isfinite(pp) and pp > 0 else 1
        points.setdefault((int(tp), pp), {}).setdefault(clients, []).append((ttft, tpot, per_gpu * gpus))
    out = {}
    for shape, by_clients in points.items():
        xs = sorted(by_clients)
        means = [tuple(statistics.fmean(v) for v in zip(*by_clients[x])) for x in xs]
        out[shape] = Curve(tuple(xs), *(tuple(m[k] for m in means) for k in range(3)))
    return out


def slas(curves_: dict[tuple[int, int], Curve]) -> list[tuple[float, float]]:
    """(TTFT, TPOT) targets (ms): the same quantile of the measured TTFTs and of the TPOTs, for each
    of ``SLA_QUANTILES``; only those some measured row meets."""
    import numpy as np

    ttft = [t for c in curves_.values() for t in c.ttft_ms]
    tpot = [p for c in curves_.values() for p in c.tpot_ms]
    out = []
    for q in SLA_QUANTILES:
        sla = float(np.quantile(ttft, q)), float(np.quantile(tpot, q))
        if any(t <= sla[0] and p <= sla[1] for c in curves_.values() for t, p in zip(c.ttft_ms, c.tpot_ms)):
            out.append(sla)
    return out


def _log_between(x: float, x0: float, x1: float, y0: float, y1: float) -> float:
    """y at x on the straight line through (x0, y0) and (x1, y1) in log-log."""
    if x1 == x0 or y0 <= 0 or y1 <= 0:
        return y0
    return math.exp(math.log(y0) + (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
                    * (math.log(y1) - math.log(y0)))


@dataclass(frozen=True)
class Capacity:
    """What one engine serves within the SLA, by its measurements."""

    clients: int  # the most closed-loop clients within the SLA
    tok_s: float  # output tokens/s of the engine there
    at_least: bool  # the SLA holds at the most clients measured: the engine may serve more
    bound_by: str = ""  # "TTFT" or "TPOT": the target reached first as clients grow ("" if neither)


def capacity(c: Curve, ttft_ms: float, tpot_ms: float) -> Capacity | None:
    """The most clients ``c`` shows within the SLA: up to the first measured concurrency over it,
    the crossing interpolated in log-log from the one before; None when the fewest clients
    measured (more than one) are already over it."""
    ok = [t <= ttft_ms and p <= tpot_ms for t, p in zip(c.ttft_ms, c.tpot_ms)]
    if not ok[0]:
        bound = "TTFT" if c.ttft_ms[0] > ttft_ms else "TPOT"
        return Capacity(0, 0.0, False, bound) if c.clients[0] <= 1 else None
    miss = next((i for i, good in enumerate(ok) if not good), None)
    if miss is None:
        return Capacity(int(c.clients[-1]), c.tok_s[-1], True)
    lo, hi = c.clients[miss - 1], c.clients[miss]
    crossings = {name: _log_between(target, values[miss - 1], values[miss], lo, hi)
                 for name, values, target in (("TTFT", c.ttft_ms, ttft_ms), ("TPOT", c.tpot_ms, tpot_ms))
                 if values[miss] > target}  # the targets first missed between lo and hi
    bound = min(crossings, key=crossings.__getitem__)
    clients = max(int(lo), math.floor(crossings[bound] + 1e-9))
    return Capacity(clients, _log_between(clients, lo, hi, c.tok_s[miss - 1], c.tok_s[miss]), False, bound)


@dataclass(frozen=True)
class Engines:
    """A plan's aggregated engines: per shape (TP, PP), its engines and the clients per engine the
    tool planned for it."""

    label: str
    shapes: tuple[tuple[tuple[int, int], int, float], ...]  # ((tp, pp), engines, planned clients per engine)


@dataclass(frozen=True)
class Judged:
    """A plan scored by the measurements: the deployment's output tokens/s and requests/s within
    the SLA, whether its planned load measures over the SLA (None: beyond the measured range),
    and the measured capacity over the planned clients."""

    engines: Engines
    tok_s: float
    req_s: float
    at_least: bool
    missed: bool | None
    capacity_over_planned: float
    bound_by: frozenset[str] = frozenset()  # the targets that bound the capacity of the engines planned over it


def judge(engines: Engines, measured: dict[tuple[int, int], Curve], sla: tuple[float, float], osl: int) -> Judged | None:
    """``engines`` scored by ``measured`` under ``sla`` (TTFT, TPOT ms); None when a shape is not
    measured or not judged (``capacity``)."""
    caps = []
    for shape, _, _ in engines.shapes:
        cap = capacity(measured[shape], *sla) if shape in measured else None
        if cap is None:
            return None
        caps.append(cap)
    tok_s = sum(cap.tok_s * n for cap, (_, n, _) in zip(caps, engines.shapes))
    over = [None if cap.at_least and planned > cap.clients else planned > cap.clients + 1e-9
            for cap, (_, _, planned) in zip(caps, engines.shapes)]
    missed = True if any(over) else (False if all(o is False for o in over) else None)
    planned = sum(n * clients for _, n, clients in engines.shapes)
    served = sum(cap.clients * n for cap, (_, n, _) in zip(caps, engines.shapes))
    bound = frozenset(cap.bound_by for cap, o in zip(caps, over) if o and cap.bound_by)
    return Judged(engines, tok_s, tok_s / osl, any(cap.at_least for cap in caps), missed,
                  served / planned if planned > 0 else math.nan, bound)


def best_measured(measured: dict[tuple[int, int], Curve], sla: tuple[float, float], osl: int) -> Judged | None:
    """The yardstick: of the deployments of one measured shape on the budget, each engine at its
    measured capacity, the one serving the most output tokens/s within the SLA (None: none judged)."""
    best = None
    for (tp, pp), curve in measured.items():
        cap = capacity(curve, *sla) if BUDGET >= tp * pp else None
        if cap is None:
            continue
        n = BUDGET // (tp * pp)
        label = f"{n}×tp{tp}" + (f"pp{pp}" if pp > 1 else "")
        judged = judge(Engines(label, (((tp, pp), n, float(cap.clients)),)), measured, sla, osl)
        if best is None or judged.tok_s > best.tok_s:
            best = judged
    return best


def _slaplan_engines(plan) -> Engines | None:
    """An aggregated plan's (or a mix's) engines and the clients per engine it planned; None for a
    disaggregated plan."""
    if plan.mode != "agg":
        return None
    shapes = []
    for part in plan.parts or (plan,):
        e = part.engines[0]
        shapes.append(((e.tp, e.pp), e.replicas, part.predicted.concurrency / e.replicas))
    return Engines(plan.shape(), tuple(shapes))


@dataclass(frozen=True)
class Planning:
    """How slaplan plans one column: its parameters (None: shipped), the harness term its requests
    state (ms; 0: the engine's TTFT alone) and its TTFT error factor (None: the margin off)."""

    params: dict | None
    harness_ms: float
    error_factor: float | None


def slaplan_engines(w: Workload, sla: tuple[float, float], how: Planning,
                    measured: dict[tuple[int, int], Curve]) -> Engines | None:
    """slaplan's plan of ``w`` on the budget under ``sla``, planned ``how``: its pick, or when the
    pick's engines were not measured its best feasible aggregated alternative (``alt``); None when
    nothing is feasible."""
    from planner import plan
    from planner.choice import preference
    from planner.types import PlanRequest

    req = PlanRequest(name="budget", model=w.model, gpu=w.gpu, backend=w.backend, precision=w.precision or None,
                      isl_tokens=w.isl, osl_tokens=w.osl, ttft_ms=sla[0], itl_ms=sla[1], total_gpus=BUDGET,
                      harness_ttft_ms=how.harness_ms, ttft_error_margin=how.error_factor is not None)
    result = plan(req, params=how.params, ttft_error_factor=how.error_factor)
    if not result.feasible:
        return None
    pick = _slaplan_engines(result.chosen)
    if pick is not None and all(shape in measured for shape, _, _ in pick.shapes):
        return pick
    ranked = sorted((p for p in result.candidates if p.feasible), key=lambda p: preference(p, req))
    for alternative in ranked:
        engines = _slaplan_engines(alternative)
        if engines is not None and all(shape in measured for shape, _, _ in engines.shapes):
            return Engines(f"{engines.label} (alt; pick {result.chosen.mode} {result.chosen.shape()})", engines.shapes)
    return pick


def _parallel(text: str) -> tuple[int, int]:
    """(TP, PP) of AIConfigurator's ``tp4pp1``."""
    tp, pp = text.removeprefix("tp").split("pp")
    return int(tp), int(pp)


def aic_engines(command: list[str], w: Workload, sla: tuple[float, float], work: Path,
                measured: dict[tuple[int, int], Curve]) -> Engines | None:
    """AIConfigurator's aggregated pick on the budget (its best-ranked row), or when that shape was
    not measured the best-ranked row it lists whose shape was (``alt``); None when it lists none."""
    argv = [*command, "--model-path", w.aic_model, "--total-gpus", str(BUDGET), "--system", w.gpu, "--backend",
            w.backend, "--isl", str(w.isl), "--osl", str(w.osl), "--ttft", f"{sla[0]:.1f}", "--tpot", f"{sla[1]:.2f}",
            "--serving-mode", "agg", "--save-dir", str(work / f"{w.gpu}-{w.backend}-{w.isl}-{w.osl}-{sla[0]:.0f}")]
    text = run(argv, answer_if=NOTHING_FEASIBLE)
    if "agg Top Configurations" not in text:
        return None
    listed = [Engines(f"{int(r['replicas'])}×tp{_parallel(r['parallel'])[0]}",
                      ((_parallel(r["parallel"]), int(r["replicas"]), float(r["bs"])),)) for r in table_rows(text, "agg")]
    if not listed:
        return None
    for rank, engines in enumerate(listed):
        if all(shape in measured for shape, _, _ in engines.shapes):
            return engines if rank == 0 else Engines(f"{engines.label} (alt; pick {listed[0].label})", engines.shapes)
    return listed[0]


def held_out_params(rows: list[dict], data_path: Path, model: str, max_evals: int) -> dict[str, float]:
    """Parameters fitted on every row but those of ``model``'s family: one fold of the grouped
    cross-validation ``benchmarks/accuracy.py`` runs."""
    from api.commands.calibrate import read_kernels
    from profiler.model.calibrate import family, fit_without, kernel_prior, prepare_rows

    data = prepare_rows(rows)
    return fit_without(data, data.labels["family"] == family(model), kernel_prior(read_kernels(data_path, None)[0]),
                       max_evals=max_evals)


def compare(a: Judged, b: Judged) -> str | None:
    """"more", "same" or "less": what ``a`` serves against ``b``; None when a lower bound leaves it open."""
    if math.isclose(a.tok_s, b.tok_s, rel_tol=1e-9) and a.at_least == b.at_least:
        return "same"
    if a.tok_s > b.tok_s and not b.at_least:
        return "more"
    if a.tok_s < b.tok_s and not a.at_least:
        return "less"
    return None


def _cell(j: Judged | None, engines: Engines | None) -> str:
    """``2×tp4 (25 → 24) | 3,410 · 3.33``: plan (planned → measured clients per engine) | tok/s · req/s."""
    if engines is None:
        return "nothing feasible | —"
    if j is None:
        return f"{engines.label}: not judged | —"
    planned = "+".join(f"{c:.0f}" for _, _, c in engines.shapes)
    flag = "≥ " if j.at_least else ""
    missed = " **over the SLA**" if j.missed else ""
    return (f"{engines.label} ({planned} planned, ×{j.capacity_over_planned:.2f} measured){missed} | "
            f"{flag}{j.tok_s:,.0f} · {j.req_s:.2f}")


def summary(label: str, pairs: list[tuple[Judged, Judged]]) -> str:
    """How ``label``'s plans compare with AIConfigurator's over the requests both had judged."""
    verdicts = [compare(a, b) for a, b in pairs]
    ratios = [a.tok_s / b.tok_s for a, b in pairs if b.tok_s > 0]
    bounded = sum(a.at_least or b.at_least for a, b in pairs)
    median = (f"{statistics.median(ratios):.2f}× (geometric mean {statistics.geometric_mean(ratios):.2f}×)"
              if ratios else "—")
    return (f"{label} against AIConfigurator, {len(pairs)} requests judged for both: serves more in "
            f"{verdicts.count('more')}, the same in {verdicts.count('same')}, less in {verdicts.count('less')}, "
            f"undecided (a lower bound) in {verdicts.count(None)}; median ratio of served tok/s {median} "
            f"({bounded} of the pairs involve a lower bound, taken at its value)")


def tool_line(label: str, plans: list[Engines | None], judged: list[Judged | None], best: list[Judged | None]) -> str:
    """Of one tool's plans: how many were made, judged, measured over the SLA at their planned load,
    the measured capacity over the clients planned, and the share of the best measured deployment
    of one shape (``best_measured``, per request) they serve."""
    made = [j for e, j in zip(plans, judged) if e is not None]
    done = [j for j in made if j is not None]
    known = [j for j in done if j.missed is not None]
    ratios = [j.capacity_over_planned for j in done if not j.at_least and math.isfinite(j.capacity_over_planned)]
    spread = (f"median {statistics.median(ratios):.2f} (quartiles {statistics.quantiles(ratios, n=4)[0]:.2f}–"
              f"{statistics.quantiles(ratios, n=4)[2]:.2f}), {sum(r > 1.1 for r in ratios)} of {len(ratios)} "
              "more than 10% under the capacity" if len(ratios) > 1 else "—")
    shares = [j.tok_s / b.tok_s for j, b in zip(judged, best) if j is not None and b is not None and b.tok_s > 0]
    of_best = (f"{sum(s >= 1 - 1e-9 for s in shares)} of {len(shares)} serve the best measured one-shape deployment, "
               f"median share of it {statistics.median(shares):.2f}" if shares else "—")
    return (f"{label}: {len(made)} of {len(plans)} requests planned (the rest: nothing feasible), {len(done)} judged; "
            f"planned load measured over the SLA in {sum(j.missed for j in known)} of {len(known)} decidable "
            f"({sum(j.bound_by == {'TTFT'} for j in known if j.missed)} on TTFT alone); "
            f"measured capacity / planned clients (exact capacities): {spread}; {of_best}")


def main(argv: list[str] | None = None) -> int:
    from api.commands.calibrate import given_data_path, read_rows
    from profiler.model import shipped_params, ttft_error_factor
    from profiler.model.calibrate import family, prepare_rows
    from profiler.model.harness import shipped_terms

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare", metavar="CMD", help='AIConfigurator\'s CLI, e.g. "venv/bin/aiconfigurator cli default"')
    ap.add_argument("--work", type=Path, help="where AIConfigurator saves its results (default: a temporary directory)")
    ap.add_argument("--data", help="calibration CSV (default: ../shared/data next to the repository)")
    ap.add_argument("--max-evals", type=int, default=200, help="model evaluations of each family-held-out fit")
    ap.add_argument("--harness", choices=HARNESS_CHOICES, default="typical",
                    help="what each request states its harness adds to TTFT: the per-backend typical term fitted "
                         "(default), the measuring source's term read off its other workloads, or none")
    ap.add_argument("--error-margin", action="store_true", help="plan with the TTFT error margin on")
    add_recipes_argument(ap)
    args = ap.parse_args(argv)
    if (path := given_data_path(args.data)) is None:
        return 1
    command = shlex.split(args.compare) if args.compare else None
    work = args.work or Path(tempfile.mkdtemp(prefix="budget-measured-"))
    started = time.perf_counter()
    rows = with_recipes_of(read_rows(path), args)
    data = prepare_rows(rows)
    engine: dict[str | None, object] = {}  # per column's held-out family (None: shipped): engine TTFTs of data's rows
    fitted: dict[str, dict[str, float]] = {}
    stated: dict[str, list[str]] = {}  # per workload: the harness terms and error factors its columns planned with
    print(f"budget {BUDGET} GPUs, no load stated; SLA: mean TTFT and TPOT at the workload's measured quantiles "
          f"{', '.join(f'{q:g}' for q in SLA_QUANTILES)}; AIConfigurator restricted to aggregated deployments. "
          "Cells: plan (clients per engine planned, measured capacity over them) | measured output tok/s · req/s "
          "of the deployment at the SLA")
    print("slaplan's requests state " + HARNESS_CHOICES[args.harness]
          + "; TTFT error margin " + ("off" if not args.error_margin else
                                      "on (the shipped factor; family held out: fitted without the family)") + "\n")
    print("| workload | SLA TTFT / TPOT ms | slaplan, shipped | tok/s · req/s | slaplan, family held out | tok/s · req/s "
          "| AIConfigurator | tok/s · req/s | best measured, one shape | tok/s |")
    print("|---|---|---|---:|---|---:|---|---:|---|---:|")
    results: list[tuple[list[Engines | None], list[Judged | None], Judged | None]] = []
    for w in WORKLOADS:
        measured = curves(rows, w)
        key = family(w.model)
        if key not in fitted:
            fitted[key] = held_out_params(rows, path, w.model, args.max_evals)
        columns = []
        for params, terms, without in ((None, shipped_params() | shipped_terms(), None), (fitted[key], fitted[key], key)):
            if args.harness == "source":
                if without not in engine:
                    engine[without] = engine_ttft_ms(data, terms)
                term = source_term(data, engine[without], rows, w, without)
                harness, said = term.ms, f"{term.source} {term.ms:.1f} ms ({term.rows} rows, {term.workloads} workloads)"
            else:
                harness = harness_ttft_ms(rows, w, terms) if args.harness == "typical" else 0.0
                said = f"{harness:.1f} ms"
            error_factor = None if not args.error_margin else ttft_error_factor(without)
            columns.append(Planning(params, harness, error_factor))
            stated.setdefault(w.name, []).append(f"{said}, ×{error_factor or 1:.2f}")
        for sla in slas(measured):
            plans = [slaplan_engines(w, sla, columns[0], measured), slaplan_engines(w, sla, columns[1], measured),
                     aic_engines(command, w, sla, work, measured) if command else None]
            judged = [judge(e, measured, sla, w.osl) if e is not None else None for e in plans]
            best = best_measured(measured, sla, w.osl)
            results.append((plans, judged, best))
            cells = " | ".join([_cell(j, e) for j, e in zip(judged[:2], plans[:2])]
                               + [_cell(judged[2], plans[2]) if command else "— | —"])
            yardstick = f"{best.engines.label} | {'≥ ' if best.at_least else ''}{best.tok_s:,.0f}" if best else "— | —"
            print(f"| {w.name} | {sla[0]:.0f} / {sla[1]:.1f} | {cells} | {yardstick} |", flush=True)
    print()
    labels = ("slaplan, shipped", "slaplan, family held out", "AIConfigurator")
    for i, label in enumerate(labels[:3] if command else labels[:2]):
        if command and i < 2:
            print(summary(label, [(j[i], j[2]) for _, j, _ in results if j[i] is not None and j[2] is not None]))
        print(tool_line(label, [e[i] for e, _, _ in results], [j[i] for _, j, _ in results], [b for *_, b in results]))
    print("\nharness term and TTFT error factor planned with (shipped / family held out): "
          + "; ".join(f"{name}: {' / '.join(said)}" for name, said in stated.items()))
    print(f"\n{len(results)} requests; {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
