"""What a plan says about itself: ties broken by headroom then simplicity, the margin it keeps,
unbounded times as text, and the one configuration an infeasible answer names."""

from __future__ import annotations

import json
import math
import re

from api.cli import main
from api.commands.plan import table
from planner import plan
from planner.choice import MARGIN_STEP_PCT, cost, margin, preference, shortfall
from planner.report import plan_document
from planner.results import ProfilingResults, pareto_front
from planner.sizing import Candidate
from planner.types import Engine, Plan, PlanRequest, PlanResult
from profiler.model import Prediction
from profiler.model.config import Parallel

LLAMA_70B = dict(name="l70", model="meta-llama/Llama-3.1-70B-Instruct", backend="vllm", gpu="h200_sxm",
                 isl_tokens=3000, osl_tokens=500, ttft_ms=500, itl_ms=20, max_gpus_per_engine=8)


def _request(**kw) -> PlanRequest:
    return PlanRequest(**{**LLAMA_70B, **kw})


def _plan(mode: str = "agg", *, replicas: int = 1, tp: int = 8, ttft: float = 200.0, p99: float = 300.0,
          itl: float = 15.0, per_user: float = 60.0, feasible: bool = True, reason: str | None = None) -> Plan:
    """A plan of 8 GPUs per engine group with the given predictions (ms, tokens/s)."""
    if mode == "agg":
        engines = (Engine(role="aggregated", tp=tp, replicas=replicas, max_batch=8, gpus_per_node=8),)
    else:
        engines = (Engine(role="prefill", tp=tp // 2, replicas=replicas, max_batch=2, gpus_per_node=8),
                   Engine(role="decode", tp=tp // 2, replicas=replicas, max_batch=8, gpus_per_node=8))
    pred = Prediction(ttft_ms=ttft, ttft_p90_ms=min(p99, ttft * 1.2), ttft_p99_ms=p99, itl_ms=itl,
                      output_tok_s_per_gpu=125.0, tok_s_per_user=per_user, requests_per_s=2.0, concurrency=1.0)
    return Plan(model=LLAMA_70B["model"], gpu="h200_sxm", backend="vllm", precision="bf16", kv_dtype="bf16",
                memory_fraction=0.9, mode=mode, engines=engines, predicted=pred, feasible=feasible, reason=reason)


# --- ties and margins ----------------------------------------------------------------------


def test_at_equal_cost_headroom_wins_over_tokens_per_user():
    req = _request(request_rate=2.0)
    tight = _plan("disagg", ttft=390, p99=880, per_user=65)
    roomy = _plan("agg", ttft=200, p99=400, per_user=60)
    assert cost(tight, req) == cost(roomy, req)
    assert min((tight, roomy), key=lambda p: preference(p, req)) is roomy


def test_under_a_rate_ttft_headroom_is_the_p99_and_under_a_closed_loop_the_mean():
    p = _plan(ttft=200, p99=450)
    rate, closed = margin(p, _request(request_rate=2.0)), margin(p, _request(concurrency=8))
    assert (rate.ttft_basis, closed.ttft_basis) == ("p99", "mean")
    assert rate.ttft_pct < closed.ttft_pct
    assert math.isclose(closed.ttft_pct, (500 - 200) / 500 * 100)


def test_within_a_headroom_step_the_simpler_deployment_wins_then_tokens_per_user():
    req = _request(concurrency=8)
    step = MARGIN_STEP_PCT / 100 * req.ttft_ms
    # the same step of headroom (both far above the ITL's), the disaggregated one a bit roomier
    agg = _plan("agg", ttft=200, itl=5, per_user=50)
    disagg = _plan("disagg", ttft=200 - step / 4, itl=5, per_user=90)
    assert min((disagg, agg), key=lambda p: preference(p, req)) is agg
    fewer, more = _plan(replicas=1, tp=8, itl=5), _plan(replicas=2, tp=4, itl=5, per_user=90)
    assert min((more, fewer), key=lambda p: preference(p, req)) is fewer
    slow, fast = _plan(itl=5, per_user=50), _plan(itl=5, per_user=70)
    assert min((slow, fast), key=lambda p: preference(p, req)) is fast


def test_llama_70b_at_2_requests_per_second_keeps_the_most_headroom_of_equal_cost_plans():
    req = _request(request_rate=2.0)
    result = plan(req)
    chosen = result.chosen
    assert result.feasible
    assert result.margin == margin(chosen, req, ttft_error_factor=result.margin.ttft_error_factor)
    same_cost = [p for p in result.candidates if p.feasible and cost(p, req) == cost(chosen, req)]
    assert len(same_cost) > 1, "the case is a tie on cost"
    assert all(margin(chosen, req).least_pct // MARGIN_STEP_PCT >= margin(p, req).least_pct // MARGIN_STEP_PCT
               for p in same_cost)
    if any(p.predicted.ttft_p99_ms <= req.ttft_ms for p in same_cost):
        assert chosen.predicted.ttft_p99_ms <= req.ttft_ms
    assert any(a.startswith("margin kept: TTFT p99") for a in result.assumptions)


def test_goodput_objective_is_unchanged_by_the_tie_breaks():
    result = plan(_request(max_gpus_per_engine=8))
    best = max(p.predicted.output_tok_s_per_gpu for p in result.candidates if p.feasible)
    assert result.chosen.predicted.output_tok_s_per_gpu == best


def test_the_cli_and_plan_json_say_the_margin(tmp_path, capsys):
    request = tmp_path / "r.yaml"
    request.write_text(json.dumps({
        "apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeploymentRequest", "metadata": {"name": "m"},
        "spec": {"modelName": LLAMA_70B["model"], "backend": "vllm", "sla": {"ttft": 500, "itl": 20, "isl": 3000,
                 "osl": 500}, "gpu": {"type": "h200_sxm", "maxNumGPUsPerEngine": 8}, "workload": {"requestRate": 2}}}))
    assert main(["plan", str(request), "--out", str(tmp_path)]) == 0
    assert re.search(r"margin: TTFT p99 \d+% (under|over) its target, ITL \d+% (under|over)", capsys.readouterr().out)
    doc = json.loads((tmp_path / "m.plan.json").read_text())
    assert doc["margin"]["ttft_basis"] == "p99"
    assert math.isclose(doc["margin"]["itl_pct"], (20 - doc["predicted"]["itl_ms"]) / 20 * 100, abs_tol=0.1)
    assert doc["results"]["margin"]["ttftBasis"] == "p99"


# --- infeasible and unbounded --------------------------------------------------------------


def _first_row(text: str) -> str:
    """The first candidate row of the CLI table: the line after its header."""
    lines = text.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.split()[:2] == ["mode", "shape"]) + 1]


def test_over_budget_answer_shows_the_configuration_it_names():
    loose = plan(_request(request_rate=2.0))
    result = plan(_request(request_rate=2.0, total_gpus=loose.chosen.total_gpus - 1))
    assert not result.feasible
    closest = result.closest
    assert f"needs {closest.total_gpus} " in result.reason and closest.shape() in result.reason
    assert closest.total_gpus == loose.chosen.total_gpus and shortfall(closest, result.request) == 0
    first = _first_row(table(result, top=1))
    assert closest.shape() in first and re.search(rf"\s{closest.total_gpus}\s", first)
    doc = plan_document(result)
    assert doc["closest"]["total_gpus"] == closest.total_gpus
    assert ProfilingResults.of(result).closest == closest


def test_best_reachable_numbers_each_belong_to_one_named_configuration():
    # a TP4 engine comes closest; a TP8 prefill pool reaches a lower TTFT, but with a TP2 decode's ITL
    only = (Candidate("agg", engine=Parallel(tp=4)), Candidate("disagg", prefill=Parallel(tp=8), decode=Parallel(tp=2)))
    result = plan(_request(ttft_ms=100, itl_ms=9, request_rate=2.0), only=only, suggest=False)
    assert not result.feasible and "lowest TTFT" in result.reason
    c = result.closest.predicted
    assert f"TTFT {c.ttft_ms:.0f} ms" in result.reason and f"ITL {c.itl_ms:.1f} ms" in result.reason
    # any lower TTFT or ITL named is another configuration's, stated with that one's other number
    for metric, other in (("TTFT", "ITL"), ("ITL", "TTFT")):
        found = re.search(rf"lowest {metric}: ([\d.]+) ms, (\w+) (\S+(?: \+ \S+)?) on (\d+) GPUs.*? \(its {other} "
                          rf"([\d.]+) ms\)", result.reason)
        if found:
            value, mode, shape, gpus, value2 = found.groups()
            named = [p for p in result.candidates if p.mode == mode and p.shape() == shape
                     and p.total_gpus == int(gpus)]
            assert len(named) == 1
            own = named[0].predicted
            mine, theirs = (own.ttft_ms, own.itl_ms) if metric == "TTFT" else (own.itl_ms, own.ttft_ms)
            assert math.isclose(float(value), mine, abs_tol=0.06) and math.isclose(float(value2), theirs, abs_tol=0.6)


def _unbounded_result() -> PlanResult:
    req = _request(request_rate=40.0)
    stuck = _plan("disagg", ttft=math.inf, p99=math.inf, feasible=False, reason="misses the SLA")
    near = _plan(ttft=520, p99=900, feasible=False, reason="misses the SLA")
    return PlanResult(request=req, feasible=False, chosen=None, candidates=(stuck, near), reason="nothing",
                      closest=near)


def test_an_unbounded_time_reads_unbounded_and_never_runs_into_the_gpu_count():
    result = _unbounded_result()
    text = table(result, top=5)
    assert "inf" not in text.replace("infeasible", "")
    row = next(line for line in text.splitlines() if "unbounded" in line)
    assert re.search(r"\s8\s+unbounded\s", row)
    assert _first_row(text).split()[2] == result.closest.shape().split()[0], "the named one comes first"
    doc = plan_document(result)
    results = doc["results"]
    stored = [row for row in results["candidates"]["rows"] if row[0] == "disagg"][0]
    assert stored[3] is None, "stored: null"
    assert "unbounded" not in json.dumps(results)


def test_unbounded_plans_are_never_on_the_pareto_front():
    result = _unbounded_result()
    front = pareto_front(result.candidates)
    assert all(math.isfinite(p.predicted.ttft_ms) for p in front) and front
    rows = ProfilingResults.of(result).candidates.rows
    assert not any(row.pareto for row in rows if not math.isfinite(row.ttft_ms))
