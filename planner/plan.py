"""``plan``: the cheapest deployment that meets a request's SLA, with everything evaluated.

request → valid engine shapes that fit in memory → candidates (aggregated engines and
prefill/decode pairs) → Optuna search, each candidate sized for the load and checked with
the full performance model → the cheapest that meets the SLA within the GPU budget.
"""

from __future__ import annotations

import math
from collections.abc import Collection

from planner.choice import margin, margin_text, preference, shortfall
from planner.mix import Unit, best_mix, mixed_plan
from planner.rounds import run, run_together
from planner.search import search
from planner.sizing import Candidate, Sized, Target, size_aggregated, size_disaggregated, size_units
from planner.space import check_bounds, describe, engine_options
from planner.types import Engine, Plan, PlanRequest, PlanResult
from profiler.model import (FREE_FRACTION_BACKENDS, GPUS, MEMORY_FRACTION, Model, ModelError, PART_LABELS,
                         Parallel, Prepared, ServingConfig, check_precision, default_kv_dtype,
                         default_max_num_tokens, get_gpu, is_hub_id, ms_text, prepare,
                         resolve_model, runs_on, shipped_params, ttft_error_factor)


def _target(req: PlanRequest, ttft_error_factor: float) -> Target:
    """The SLA and load sizing checks: the TTFT target divided by the error factor a predicted
    TTFT is multiplied by (so that prediction × factor stays within the target)."""
    if req.concurrency is not None:
        load, closed = float(req.concurrency), True
    elif req.request_rate is not None:
        load, closed = float(req.request_rate), False
    else:
        load, closed = None, True
    return Target(req.ttft_ms / ttft_error_factor, req.itl_ms, req.e2e_ms, load, closed, req.isl_tokens, req.osl_tokens, req.total_gpus)


def _error_factor(req: PlanRequest, given: float | None) -> float:
    """The factor a predicted TTFT is multiplied by before it is held to the target: 1 with the
    request's error margin off, else ``given`` or the shipped one. Raises ModelError below 1."""
    if not req.ttft_error_margin:
        return 1.0
    factor = ttft_error_factor() if given is None else given
    if not factor >= 1.0:
        raise ModelError("ttft_error_factor", f"a TTFT error factor is at least 1, not {factor:g}")
    return factor


def _measured_by(prep: Prepared, req: PlanRequest) -> Prepared:
    """``prep`` as the request's measuring client sees it: its ``harness_ttft_ms`` in every TTFT."""
    if not req.harness_ttft_ms:
        return prep
    return prep._replace(load={**prep.load, "harness_ms": req.harness_ttft_ms})


def _disagg_prepared(pre: Prepared, dec: Prepared, n_p: int, n_d: int, t: Target, offered: float) -> Prepared:
    """A disaggregated deployment assembled from two single-engine preparations, at ``offered``
    load (closed-loop clients, or requests/s). A closed loop's decode engines hold the running
    limit the manifest pins (``running_limit``, in whole sequences per attention rank as the engines
    take it): the clients placed at random on a full engine wait for its slots, so the plan is
    evaluated with the slots it deploys."""
    load = {**dec.load, "decode_engines": n_d, "prefill_servers": n_p * pre.prefill["dp"], "disagg": 1.0,
            "closed": 1.0 if t.closed else 0.0, "load": offered}
    if t.closed:
        per_rank = math.ceil(running_limit(dec, n_d, offered, True, 0.0, at_random=True) / dec.decode["dp"] - 1e-9)
        load["batch_cap"] = min(dec.load["batch_cap"], per_rank)
    return Prepared(dec.decode, pre.prefill, load, n_p * pre.total_gpus + n_d * dec.total_gpus,
                    {"prefill": pre.memory["engine"], "decode": dec.memory["engine"]})


def plan(request: PlanRequest, *, model: tuple[Model, str] | None = None,
         params: dict[str, float] | None = None, seed: int = 0, suggest: bool = True,
         only: Collection[Candidate] | None = None, ttft_error_factor: float | None = None) -> PlanResult:
    """Plan ``request``.

    ``model`` is the architecture and the weights precision its name implies, as
    ``profiler.hub.load_model`` returns them (for a local config.json or a Hub id outside
    the catalog); by default the catalog resolves ``request.model``. Raises ModelError
    (naming the field) for an unknown model or GPU or impossible bounds; an SLA nothing
    meets is not an error but an infeasible PlanResult that says why, and (with
    ``suggest``) what would meet it: larger engines or another GPU type.

    With ``request.ttft_error_margin``, a predicted TTFT meets its target when it does
    multiplied by ``ttft_error_factor`` (≥ 1; by default the shipped quantile of the model's
    held-out TTFT error, ``profiler.model.ttft_error_factor``). Every predicted TTFT includes
    ``request.harness_ttft_ms``, what the client that measures the SLA adds.
    """
    p = params or shipped_params()
    model, implied = model or resolve_model(request.model)
    precision = check_precision(request.precision or implied)
    gpu = get_gpu(request.gpu)
    check_bounds(request.min_gpus_per_engine, request.max_gpus_per_engine)
    node = request.gpus_per_node or gpu.gpus_per_node
    factor = _error_factor(request, ttft_error_factor)
    t = _target(request, factor)
    base = ServingConfig(model=model.hf_id, gpu=gpu.name, backend=request.backend, precision=precision,
                         engine=Parallel(), isl_tokens=request.isl_tokens, osl_tokens=request.osl_tokens,
                         concurrency=1.0)
    shapes: dict[Parallel, Prepared] = {}
    pruned: list[str] = []
    for par in engine_options(model, gpu, request.min_gpus_per_engine, request.max_gpus_per_engine, node,
                              request.backend):
        try:
            shapes[par] = _measured_by(prepare(base.model_copy(update={"engine": par}), model), request)
        except ModelError as exc:
            pruned.append(f"{describe(par)}: {exc.message}")
    assumptions = _assumptions(request, precision, node, t, len(shapes), len(pruned), factor)
    if not shapes:
        reason = (f"{model.hf_id} ({precision}) fits no engine of {request.min_gpus_per_engine}–"
                  f"{request.max_gpus_per_engine} {gpu.name} GPUs: {pruned[-1] if pruned else 'no valid parallelism'}; "
                  f"allow more GPUs per engine (maxNumGPUsPerEngine) or use a GPU with more memory")
        return PlanResult(request=request, feasible=False, chosen=None, reason=reason, assumptions=assumptions)

    def build(c: Candidate, n_p: int, n_d: int, load: float) -> Prepared:
        return _disagg_prepared(shapes[c.prefill], shapes[c.decode], n_p, n_d, t, load)

    def size(batch: list[Candidate]) -> list[Sized]:
        agg = [c for c in batch if c.mode == "agg"]
        dis = [c for c in batch if c.mode == "disagg"]
        aggregated, disaggregated = run_together([size_aggregated(agg, [shapes[c.engine] for c in agg], t),
                                                  size_disaggregated(dis, shapes, shapes, t, p, build)], p)
        return aggregated + disaggregated

    cands = [Candidate("agg", engine=par) for par in shapes]
    cands += [Candidate("disagg", prefill=a, decode=b) for a in shapes for b in shapes]
    if only is not None:
        cands = [c for c in cands if c in only]
        if not cands:
            return PlanResult(request=request, feasible=False, chosen=None, assumptions=assumptions,
                              reason="none of the given configurations fits in memory under these bounds")
    evaluated = search(cands, size, budget=request.total_gpus, price=request.gpu_price_per_hour,
                       goodput=t.load is None, strategy=request.search_strategy, seed=seed)
    plans = tuple(_plan(s, request, model, gpu.name, precision, node, shapes, t, p) for s in evaluated)
    ok = [pl for pl in plans if pl.feasible]
    if not ok:
        closest = _closest(evaluated, plans, request)
        reason = _infeasible_reason(request, evaluated, plans, closest, gpu.name, t, factor)
        if suggest and not any(s.meets_sla for s in evaluated):
            reason += _suggestion(request, (model, implied), p, factor)
        return PlanResult(request=request, feasible=False, chosen=None, candidates=plans, reason=reason,
                          closest=closest[1], assumptions=assumptions, evaluated=len(evaluated))
    chosen = min(ok, key=lambda pl: preference(pl, request))
    if t.load is None and request.total_gpus:
        mix = _mix(evaluated, plans, chosen, request, model, gpu.name, precision, node, shapes, t, p)
        if mix is not None:
            chosen, plans = mix, (*plans, mix)
            assumptions += (f"a mix of engine shapes ({mix.shape()}) serves more than any one shape on the budget; the "
                            "router must send each engine its own share (" + ", ".join(
                                f"{part.shape()}: {part.predicted.requests_per_s:.2f} req/s" for part in mix.parts) + ")",)
    kept = margin(chosen, request, ttft_error_factor=factor)
    assumptions += (f"margin kept: {margin_text(kept)}; of plans that cost the same, the one with the most "
                    "headroom (in steps of 10% of the target) is chosen, then the simpler",)
    return PlanResult(request=request, feasible=True, chosen=chosen, candidates=plans, margin=kept,
                      assumptions=assumptions, evaluated=len(evaluated))


def _mix(evaluated: list[Sized], plans: tuple[Plan, ...], single: Plan, req: PlanRequest, model: Model, gpu: str,
         precision: str, node: int, shapes: dict[Parallel, Prepared], t: Target, p: dict) -> Plan | None:
    """The mix of two aggregated shapes that serves more output tokens/s on the budget than
    ``single``, the best deployment of one shape (``planner.mix``), or None. Each shape's units
    are evaluated by the model at the load one of them serves within the SLA."""
    sized = {s.candidate: s for s, pl in zip(evaluated, plans) if s.candidate.mode == "agg" and pl.feasible}
    units = [Unit(c, s.total_gpus // s.replicas, s.prediction.output_tok_s_per_gpu * s.total_gpus / s.replicas)
             for c, s in sized.items()]
    found = best_mix(units, req.total_gpus, single.predicted.output_tok_s_per_gpu * single.total_gpus)
    if found is None:
        return None
    counts = [(unit.key, shapes[unit.key.engine], count, sized[unit.key].load / sized[unit.key].replicas)
              for unit, count in found]
    parts = [_plan(part, req, model, gpu, precision, node, shapes, t, p) for part in run(size_units(counts, t), p)]
    mix = mixed_plan(parts)
    return mix if mix.feasible else None


def _engine(role: str, par: Parallel, replicas: int, max_batch: int, node: int, chunk: int,
            units: int = 1) -> Engine:
    """One engine role; a deployment of several whole ``units`` (a budget filled with no load
    stated) may shrink to one unit's engines when idle."""
    replicas = max(1, replicas)
    return Engine(role=role, tp=par.tp, pp=par.pp, dp=par.dp, ep=par.moe_ep, replicas=replicas,
                  min_replicas=max(1, replicas // units) if units > 1 else None,
                  max_batch=max(1, max_batch), max_num_tokens=chunk, gpus_per_node=min(node, par.gpus))


# A limit's headroom over the mean sequences in flight, in standard deviations: of a Poisson
# load (in flight is Poisson-distributed in an M/G/∞ system), and of closed-loop clients placed
# on decode engines at random (Binomial(C, 1/E) each), so the limit binds about 0.1% of the time.
HEADROOM_SIGMAS = 3.0


def running_limit(prep: Prepared, engines: int, load: float, closed: bool, e2e_s: float, *,
                  at_random: bool = False) -> int:
    """Running sequences one (decode or aggregated) engine may hold: what it holds at the load the
    SLA was checked at (``load`` closed-loop clients or requests/s over ``engines`` engines; a
    Poisson load's mean in flight, rate × ``e2e_s``, plus headroom; closed-loop clients the router
    places ``at_random``, as on disaggregated decode engines, their mean plus headroom for the
    engines that draw more), at most what its KV cache holds (which an overloaded engine, whose
    requests take unboundedly long, runs at). The manifest sets it, and a disaggregated closed loop
    is evaluated with it (``_disagg_prepared``): the plan's waits are those of the slots deployed."""
    memory = math.floor(prep.load["batch_cap"] * prep.decode["dp"] + 1e-9)
    mean = load / engines if closed else load * e2e_s / engines
    if not math.isfinite(mean):
        return max(1, memory)
    spread = math.sqrt(mean) if not closed else math.sqrt(mean * (1.0 - 1.0 / engines)) if at_random else 0.0
    wanted = math.ceil(mean + HEADROOM_SIGMAS * spread) if spread > 0 else math.ceil(mean - 1e-9)
    return max(1, min(wanted, memory))


def served_model(request: PlanRequest, model: Model) -> str:
    """The checkpoint the manifest serves: the Hub id the request named (an Instruct or FP8
    checkpoint of a catalog architecture is served as named), else the catalog's id for an alias
    (``llama-3.1-70b``) or the id a local config.json names."""
    return request.model.strip() if is_hub_id(request.model) else model.hf_id


def _plan(s: Sized, req: PlanRequest, model: Model, gpu: str, precision: str, node: int,
          shapes: dict[Parallel, Prepared], t: Target, p: dict) -> Plan:
    c, pr = s.candidate, s.prediction
    chunk = default_max_num_tokens(req.backend, get_gpu(gpu))
    e2e_s = (pr.ttft_ms + (req.osl_tokens - 1) * pr.itl_ms) / 1e3
    if c.mode == "agg":
        limit = running_limit(shapes[c.engine], s.replicas, s.load, t.closed, e2e_s)
        units = s.replicas if t.load is None else 1
        engines = (_engine("aggregated", c.engine, s.replicas, limit, node, chunk, units),)
    else:
        limit = running_limit(shapes[c.decode], s.decode_workers, s.load, t.closed, e2e_s, at_random=True)
        prompts = max(1, chunk // req.isl_tokens)
        units = s.decode_workers if t.load is None else 1  # a unit with no load stated: one decode engine
        engines = (_engine("prefill", c.prefill, s.prefill_workers, prompts * c.prefill.dp, node, chunk, units),
                   _engine("decode", c.decode, s.decode_workers, limit, node, chunk, units))
    within_budget = req.total_gpus is None or s.total_gpus <= req.total_gpus
    reason = None if s.meets_sla else "misses the SLA"
    if s.meets_sla and not within_budget:
        reason = f"needs {s.total_gpus} GPUs, over the budget of {req.total_gpus}"
    cost = s.total_gpus * req.gpu_price_per_hour if req.gpu_price_per_hour else None
    return Plan(model=served_model(req, model), gpu=gpu, backend=req.backend, precision=precision,
                kv_dtype=default_kv_dtype(precision), memory_fraction=MEMORY_FRACTION[req.backend], mode=c.mode,
                engines=engines, predicted=pr, feasible=s.meets_sla and within_budget,
                reason=reason, cost_per_hour=cost)


def _closest(evaluated: list[Sized], plans: tuple[Plan, ...], req: PlanRequest) -> tuple[Sized, Plan]:
    """The configuration an infeasible answer names: the cheapest that meets the SLA (only the
    budget stands in its way), else the one nearest to the SLA (``shortfall``)."""
    return min(zip(evaluated, plans), key=lambda x: (not x[0].meets_sla, shortfall(x[1], req), x[1].total_gpus,
                                                     -x[1].predicted.output_tok_s_per_gpu))


def _named(plan: Plan, s: Sized, t: Target) -> str:
    """``agg 1×tp8 on 8 GPUs``, saying so when its numbers are at a lighter load than the stated one
    (a shape that misses the SLA even at the lightest load is reported there)."""
    unit = "requests/s" if not t.closed else "client" if s.load == 1 else "clients"
    lighter = "" if t.load is None or s.load >= t.load else f" at {s.load:g} {unit} (it misses the SLA even there)"
    return f"{plan.mode} {plan.shape()} on {plan.total_gpus} GPUs{lighter}"


def _infeasible_reason(req: PlanRequest, evaluated: list[Sized], plans: tuple[Plan, ...],
                       closest: tuple[Sized, Plan], gpu: str, t: Target, factor: float) -> str:
    """Why nothing is feasible, naming the ``closest`` configuration with its numbers, and where another
    configuration reaches a lower TTFT or ITL, that one with its own numbers."""
    closest_s, closest = closest
    c = closest.predicted
    if any(s.meets_sla for s in evaluated):
        return (f"the cheapest deployment that meets the SLA needs {closest.total_gpus} {gpu} GPUs, over the budget "
                f"of {req.total_gpus} (hardware.totalGpus): {_named(closest, closest_s, t)}, TTFT {ms_text(c.ttft_ms, 0)}, "
                f"ITL {ms_text(c.itl_ms)}")
    held = (f" (its predicted TTFT × {factor:.2f}, the model's held-out error: {t.ttft_ms:.0f} ms predicted at most)"
            if factor > 1 else "")
    text = (f"no configuration of up to {req.max_gpus_per_engine} {gpu} GPUs per engine meets TTFT {req.ttft_ms:g} ms"
            f"{held} and ITL {req.itl_ms:g} ms at ISL {req.isl_tokens} / OSL {req.osl_tokens}. Closest: {_named(closest, closest_s, t)}, "
            f"TTFT {ms_text(c.ttft_ms, 0)}{_largest(closest, 'ttft')} and ITL {ms_text(c.itl_ms)}{_largest(closest, 'itl')}")
    for metric, other in (("ttft", "itl"), ("itl", "ttft")):
        i = min(range(len(plans)), key=lambda j: getattr(plans[j].predicted, f"{metric}_ms"))
        best = plans[i].predicted
        if getattr(best, f"{metric}_ms") < getattr(c, f"{metric}_ms"):
            text += (f"; lowest {metric.upper()}: {ms_text(getattr(best, f'{metric}_ms'))}, "
                     f"{_named(plans[i], evaluated[i], t)} (its {other.upper()} {ms_text(getattr(best, f'{other}_ms'))})")
    return text + ". Allow more GPUs per engine (maxNumGPUsPerEngine), a faster GPU type, or a looser SLA"


def _largest(plan: Plan, metric: str) -> str:
    """`` (x ms of it the prefill pass)``: the largest part of ``plan``'s ``metric`` ("ttft" or
    "itl"), or nothing when the parts are not known or the time is unbounded."""
    parts = plan.predicted.ttft_parts if metric == "ttft" else plan.predicted.itl_parts
    total = plan.predicted.ttft_ms if metric == "ttft" else plan.predicted.itl_ms
    if parts is None or not math.isfinite(total):
        return ""
    name, ms = max(dict(parts).items(), key=lambda kv: kv[1])
    return f" ({ms_text(ms, 0 if metric == 'ttft' else 1)} of it the {PART_LABELS[name]})"


MAX_SUGGESTED_ENGINE_GPUS = 64


def _suggestion(req: PlanRequest, model: tuple[Model, str], p: dict, factor: float) -> str:
    """What would meet the SLA: the same GPU with larger engines, else the fastest other GPU type."""
    trials = []
    bigger = req.max_gpus_per_engine
    while bigger * 2 <= MAX_SUGGESTED_ENGINE_GPUS and len(trials) < 2:
        bigger *= 2
        trials.append((f"engines of up to {bigger} GPUs", {"max_gpus_per_engine": bigger, "total_gpus": None}))
    others = sorted((g for g in GPUS if g.name != get_gpu(req.gpu).name and runs_on(req.backend, g)),
                    key=lambda g: -g.hbm_gb_s)
    trials += [(f"{g.name}", {"gpu": g.name, "total_gpus": None, "gpus_per_node": None}) for g in others]
    for label, change in trials:
        result = plan(req.model_copy(update=change), model=model, params=p, suggest=False, ttft_error_factor=factor)
        if result.feasible:
            c = result.chosen
            return f". It would be met with {label}: {c.mode}, {c.total_gpus} GPUs"
    return ". No GPU type in the catalog meets it with engines of this size"


def _assumptions(req: PlanRequest, precision: str, node: int, t: Target, fit: int, pruned: int,
                 factor: float) -> tuple[str, ...]:
    load = ((f"no load stated: whole units sized for the best goodput, as many as {req.total_gpus} GPUs hold"
             if req.total_gpus else "no load stated: one deployment unit sized for the best goodput per GPU")
            if t.load is None
            else f"closed-loop concurrency {t.load:g}" if t.closed else f"Poisson arrivals at {t.load:g} requests/s")
    return (
        f"weights {precision}, KV cache {default_kv_dtype(precision)}",
        f"{req.backend} memory fraction {MEMORY_FRACTION[req.backend]}"
        f"{' of the memory left after weights' if req.backend in FREE_FRACTION_BACKENDS else ''}, "
        f"prefill chunk {default_max_num_tokens(req.backend, get_gpu(req.gpu))} tokens",
        f"{node} GPUs per node",
        f"load: {load}",
        f"ISL {req.isl_tokens} / OSL {req.osl_tokens} tokens",
        f"{fit} engine shapes fit in memory, {pruned} pruned before evaluation",
        "TTFT and ITL targets apply to the mean; p90/p99 are reported alongside",
        (f"TTFT error margin: the predicted TTFT × {factor:.2f} (a quantile of the model's TTFT error with model "
         f"families held out) is held to the target, so at most {t.ttft_ms:.0f} ms is predicted") if factor > 1
        else "TTFT error margin off: the predicted TTFT itself is held to the target (errorMargin: true keeps the "
             "model's held-out error in hand)",
        (f"TTFT as the SLA's measuring client sees it: {req.harness_ttft_ms:g} ms a request of the client's in every "
         "predicted TTFT (in its frontend part)") if req.harness_ttft_ms
        else "TTFT of the deployment alone: a measuring client's own time is not in it (harnessTtftMs)",
    )
