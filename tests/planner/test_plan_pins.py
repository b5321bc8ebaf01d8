"""What a plan pins for its manifests: the checkpoint named, shapes the backend can run, the
running-sequence limit at the load the SLA was checked at, and a stored plan that reads back whole."""

from __future__ import annotations

import json
import math

import pytest

from api.cli import main
from planner import plan
from planner.results import ProfilingResults
from planner.sizing import Candidate
from planner.space import engine_options
from planner.types import PlanRequest
from profiler.model.config import Parallel, ServingConfig
from profiler.model.estimate import estimate
from profiler.model.gpus import get_gpu
from profiler.model.model_catalog import resolve_model
from paths import ROOT


def _request(**kw) -> PlanRequest:
    base = dict(name="pins", model="meta-llama/Llama-3.1-70B-Instruct", gpu="h200_sxm", ttft_ms=500, itl_ms=20,
                isl_tokens=3000, osl_tokens=500)
    return PlanRequest(**{**base, **kw})


@pytest.mark.parametrize("model,precision", [("meta-llama/Llama-3.1-70B-Instruct", "bf16"),
                                             ("Qwen/Qwen3-235B-A22B-FP8", "fp8")])
def test_the_checkpoint_named_is_the_one_served(model, precision):
    result = plan(_request(model=model, ttft_ms=3000, itl_ms=60, max_gpus_per_engine=8))
    assert result.feasible
    assert {p.model for p in result.candidates} == {model}  # not the catalog's base or bf16 checkpoint
    assert result.chosen.precision == precision and result.chosen.kv_dtype == precision


def test_an_alias_serves_the_catalog_checkpoint():
    result = plan(_request(model="llama-3.1-70b", ttft_ms=3000, itl_ms=60))
    assert result.chosen.model == resolve_model("llama-3.1-70b")[0].hf_id


def test_trtllm_candidates_never_mix_attention_tp_and_dp():
    model, _ = resolve_model("deepseek-ai/DeepSeek-V3")
    gpu = get_gpu("h200_sxm")
    trt = engine_options(model, gpu, 8, 16, 8, "trtllm")
    sgl = engine_options(model, gpu, 8, 16, 8, "sglang")
    assert trt and all(p.tp == 1 or p.dp == 1 for p in trt)
    assert any(p.tp > 1 and p.dp > 1 for p in sgl)  # SGLang runs attention TP inside DP ranks
    assert set(trt) < set(sgl)
    result = plan(_request(model="deepseek-ai/DeepSeek-V3", backend="trtllm", ttft_ms=2000, itl_ms=50,
                           min_gpus_per_engine=8, max_gpus_per_engine=16, isl_tokens=4000, osl_tokens=1000))
    assert all(e.tp == 1 or e.dp == 1 for p in result.candidates for e in p.engines)


def _deployed(p, req: PlanRequest, *, max_batch: int) -> ServingConfig:
    """The configuration the plan's manifests deploy, with ``max_batch`` running sequences per engine."""
    pars = {e.role: Parallel(tp=e.tp, pp=e.pp, dp=e.dp, moe_ep=e.ep) for e in p.engines}
    load = {"concurrency": req.concurrency} if req.concurrency else (
        {"request_rate": req.request_rate} if req.request_rate else {"concurrency": p.predicted.concurrency})
    shape = ({"engine": pars["aggregated"], "replicas": p.engines[0].replicas} if p.mode == "agg" else
             {"prefill": pars["prefill"], "decode": pars["decode"], "prefill_workers": p.role("prefill").replicas,
              "decode_workers": p.role("decode").replicas})
    return ServingConfig(model=p.model, gpu=p.gpu, backend=p.backend, precision=p.precision, kv_dtype=p.kv_dtype,
                         mode=p.mode, max_batch=max_batch, isl_tokens=req.isl_tokens, osl_tokens=req.osl_tokens,
                         **shape, **load)


@pytest.mark.parametrize("load", [{}, {"concurrency": 64}, {"request_rate": 4.0}],
                         ids=["goodput", "clients", "poisson"])
def test_the_running_limit_is_the_load_the_sla_was_checked_at(load):
    req = _request(**load)
    result = plan(req)
    chosen = result.chosen
    engine = chosen.role("decode") or chosen.role("aggregated")
    in_flight = chosen.predicted.concurrency / engine.replicas
    if req.request_rate is None:  # closed loop: exactly the clients each engine holds
        assert engine.max_batch == math.ceil(in_flight - 1e-9)
    else:  # Poisson: the mean in flight with headroom, which the engine rarely reaches
        assert in_flight < engine.max_batch <= in_flight + 3 * math.sqrt(in_flight) + 1
    # An engine held to the limit performs as planned ...
    at_limit = estimate(_deployed(chosen, req, max_batch=engine.max_batch))
    assert at_limit.ttft_ms == pytest.approx(chosen.predicted.ttft_ms, rel=0.01)
    assert at_limit.itl_ms == pytest.approx(chosen.predicted.itl_ms, rel=0.01)
    # ... and the limit binds: with no load stated, the memory's batch misses the SLA it was sized for.
    if not load:
        memory = estimate(_deployed(chosen, req, max_batch=1_000_000).model_copy(
            update={"concurrency": 4 * chosen.predicted.concurrency}))
        assert memory.itl_ms > req.itl_ms or memory.ttft_ms > req.ttft_ms


def test_the_stored_plan_reads_back_whole():
    result = plan(_request(model="deepseek-ai/DeepSeek-V3", backend="sglang", ttft_ms=2000, itl_ms=50,
                           min_gpus_per_engine=8, max_gpus_per_engine=16, isl_tokens=4000, osl_tokens=1000),
                  only={Candidate("disagg", prefill=Parallel(tp=8, moe_ep=8), decode=Parallel(tp=2, dp=8, moe_ep=16))})
    stored = ProfilingResults.of(result)
    text = json.dumps(stored.stored(), allow_nan=False)
    back = ProfilingResults.read(text)
    assert back == stored and back.chosen == result.chosen
    assert ProfilingResults.read(json.dumps({"chosen": 5})) is None  # another shape reads as absent
    assert ProfilingResults.read("configmap/results") is None


def test_unbounded_times_are_null_when_stored_and_infinite_when_read():
    result = plan(_request(request_rate=500.0, max_gpus_per_engine=2, total_gpus=4))
    unbounded = [p for p in result.candidates if math.isinf(p.predicted.ttft_ms)]
    assert unbounded, "a rate far beyond 4 GPUs leaves some candidate's queue unbounded"
    doc = unbounded[0].stored()
    assert doc["predicted"]["ttftMs"] is None
    back = type(unbounded[0]).model_validate(doc)
    assert math.isinf(back.predicted.ttft_ms) and back == unbounded[0]


DGDR = """apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeploymentRequest
metadata: {{name: {name}}}
spec:
  modelName: {model}
  backend: {backend}
  sla: {{ttft: 2000, itl: 50, isl: 4000, osl: 1000}}
  gpu: {{type: {gpu}, maxNumGPUsPerEngine: {max_gpus}}}
"""


def test_every_target_answers_for_moe_models_on_every_backend(tmp_path, capsys):
    paths = []
    for model, gpu, max_gpus in (("deepseek-ai/DeepSeek-V3", "h200_sxm", 16), ("Qwen/Qwen3-235B-A22B-FP8", "h200_sxm", 8),
                                 ("openai/gpt-oss-120b", "h100_sxm", 8)):
        for backend in ("vllm", "sglang", "trtllm"):
            path = tmp_path / f"{model.split('/')[1].lower()}-{backend}.yaml"
            path.write_text(DGDR.format(name=path.stem.replace(".", "-"), model=model, backend=backend, gpu=gpu,
                                        max_gpus=max_gpus))
            paths.append(str(path))
    rc = main(["plan", *paths, "--target", "all", "--out", str(tmp_path / "out"), "--quiet", "--workers", "1"])
    err = capsys.readouterr().err
    assert rc in (0, 2) and "Traceback" not in err
    written = {p.name for p in (tmp_path / "out").iterdir()}
    for path in paths:
        stem = path.rsplit("/", 1)[1].removesuffix(".yaml").replace(".", "-")
        assert f"{stem}.dgd.yaml" in written and f"{stem}.ome.yaml" in written and f"{stem}.kthena.yaml" in written
        if f"{stem}.kubeai.yaml" not in written:  # said in one line why
            assert f"note: {stem}: kubeai: " in err


@pytest.mark.parametrize("model,gpu,budget", [("meta-llama/Llama-3.1-70B-Instruct", "h200_sxm", 16),
                                              ("meta-llama/Llama-3.1-8B-Instruct", "h100_sxm", 8),
                                              ("Qwen/Qwen3-32B", "h200_sxm", 8)])
def test_a_budget_with_no_load_is_filled_with_whole_units(model, gpu, budget):
    from planner.manifests.kubeai import render_kubeai
    from planner.manifests.ome import render_ome

    req = _request(model=model, gpu=gpu, total_gpus=budget)
    filled = plan(req).chosen
    one_unit = plan(req.model_copy(update={"total_gpus": None})).chosen
    assert filled.total_gpus == budget  # every GPU of the budget serves
    served = filled.predicted.output_tok_s_per_gpu * filled.total_gpus
    copies = one_unit.predicted.output_tok_s_per_gpu * one_unit.total_gpus * (budget // one_unit.total_gpus)
    assert served >= copies * (1 - 1e-9)  # at least as many copies of the best unit serve
    assert filled.predicted.ttft_ms <= req.ttft_ms and filled.predicted.itl_ms <= req.itl_ms
    # the prediction is the model's own for the whole deployment, at the load it serves
    engine = filled.role("decode") or filled.role("aggregated")
    whole = estimate(_deployed(filled, req, max_batch=engine.max_batch))
    assert whole.output_tok_s_per_gpu == pytest.approx(filled.predicted.output_tok_s_per_gpu, rel=0.01)
    assert whole.ttft_ms == pytest.approx(filled.predicted.ttft_ms, rel=0.01)
    # it may shrink to one unit when idle where a target's autoscaler follows the load (KubeAI);
    # OME's does not, so its replicas stay at the planned count
    if filled.mode == "agg" and engine.replicas > 1:
        assert engine.min_replicas == 1
        (model_obj,) = render_kubeai(filled, req) if filled.backend == "vllm" else (None,)
        assert model_obj["spec"]["minReplicas"] == 1 and model_obj["spec"]["maxReplicas"] == engine.replicas
        ome = render_ome(filled, req)[0]["spec"]["engine"]
        assert ome["minReplicas"] == ome["maxReplicas"] == engine.replicas


def test_a_stated_load_still_takes_the_fewest_gpus():
    req = _request(concurrency=8, total_gpus=16)
    chosen = plan(req).chosen
    assert chosen.total_gpus < 16 and all(e.min_replicas is None for e in chosen.engines)


def test_the_cli_reports_the_capacity_a_filled_budget_reaches(tmp_path, capsys):
    from pathlib import Path

    example = ROOT / "examples" / "llama-70b-h200.dgdr.yaml"  # 16-GPU budget
    assert main(["plan", str(example), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    line = next(x for x in out if x.strip().startswith("capacity:"))
    doc = json.loads((tmp_path / "llama-70b-h200.plan.json").read_text())
    assert f"{doc['results']['chosen']['predicted']['requestsPerSec']:.2f} req/s" in line
    assert "of the 16-GPU budget" in line
    scaled = [e for e in doc["results"]["chosen"]["engines"] if e.get("minReplicas", e["replicas"]) < e["replicas"]]
    ranges = next(x for x in out if x.strip().startswith("autoscaling range:"))
    assert scaled and all(f"{e['minReplicas']}–{e['replicas']}" in ranges for e in scaled)


def test_a_disaggregated_closed_loop_performs_as_planned_on_the_decode_limit_it_pins():
    """Clients placed at random on several decode engines: the limit leaves room for the engines
    that draw more than the mean, and the deployment held to it re-estimates to the plan."""
    req = _request(concurrency=100, itl_ms=25, ttft_ms=3000, isl_tokens=500, osl_tokens=2000)
    chosen = plan(req, only={Candidate("disagg", prefill=Parallel(tp=2), decode=Parallel(tp=2))}).chosen
    decode = chosen.role("decode")
    mean = req.concurrency / decode.replicas
    assert decode.replicas > 1 and mean < decode.max_batch
    again = estimate(_deployed(chosen, req, max_batch=decode.max_batch))
    assert again.ttft_ms == pytest.approx(chosen.predicted.ttft_ms, rel=0.01)
    assert again.itl_ms == pytest.approx(chosen.predicted.itl_ms, rel=0.01)
    at_mean = estimate(_deployed(chosen, req, max_batch=math.ceil(mean)))
    assert at_mean.ttft_ms > chosen.predicted.ttft_ms  # held to the mean, the unlucky engines' clients wait
