"""A plan is a promise: every target's manifest, read back, deploys what was predicted.

Over a matrix of real plans (vLLM / SGLang / TRT-LLM × aggregated and disaggregated × dense, MoE
with expert parallelism, attention data-parallelism and engines spanning nodes), each target of
the registry (Dynamo in both DGD versions, Kthena in both API groups) renders the stored plan;
``manifest_reader`` parses the manifests back into an engine configuration, and ``estimate`` of
that configuration must give the plan's predicted TTFT, ITL and throughput within 1%. A target
that cannot run a plan must refuse it with the reason it documents; the exact set of refusals is
fixed below, so a new one fails. Every rendered object is also checked against the real CRDs.
Plans with a replica range (a budget filled with no load stated) read back with that range from
every target that says it emits one (``Target.scaling``), and with fixed replicas from the others.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import Any

import pytest

from manifest_reader import Deployed, DeployedEngine, read_deployment
from planner.manifests.common import UnsupportedPlan, scales
from planner.manifests.dynamo import hpa_scales
from planner.manifests.kthena import CURRENT_GROUP, LEGACY_GROUP
from planner.manifests.targets import REGISTRY, Options, Rendered, render_target
from planner.plan import plan
from planner.results import ProfilingResults
from planner.sizing import Candidate
from planner.types import Engine, Plan, PlanRequest, PlanResult
from profiler.model.config import Parallel, ServingConfig
from profiler.model.estimate import estimate
from paths import CRD_DIRS, SHARED

CRD_DIR = SHARED / "crds"
TOLERANCE = 0.01  # relative: the re-estimate of what is deployed against the plan's prediction


@dataclass(frozen=True)
class Case:
    """A request to plan (its name says what it covers); ``only`` forces a shape the search would
    not pick at this load."""

    request: dict[str, Any]
    only: tuple[Candidate, ...] | None = None


def _req(model: str, gpu: str, backend: str, **kw: Any) -> dict[str, Any]:
    return dict(name="rt", namespace="serving", model=model, gpu=gpu, backend=backend, **kw)


LLAMA_8B, LLAMA_70B, LLAMA_405B = ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct",
                                   "meta-llama/Llama-3.1-405B")
DEEPSEEK, QWEN_FP8, GPT_OSS = "deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-235B-A22B-FP8", "openai/gpt-oss-120b"
_SHORT = dict(isl_tokens=3000, osl_tokens=300, ttft_ms=500, itl_ms=20)
_LONG = dict(isl_tokens=8000, osl_tokens=200, ttft_ms=800, itl_ms=25)
_MOE = dict(isl_tokens=4000, osl_tokens=500, ttft_ms=1500, itl_ms=40, min_gpus_per_engine=8, max_gpus_per_engine=16)
_FP8 = dict(isl_tokens=3000, osl_tokens=500, ttft_ms=600, itl_ms=25)
_RANGE = dict(isl_tokens=3000, osl_tokens=300, ttft_ms=500, itl_ms=30)


def _agg(tp: int = 1, dp: int = 1, ep: int = 1) -> tuple[Candidate, ...]:
    return (Candidate("agg", engine=Parallel(tp=tp, dp=dp, moe_ep=ep)),)


def _disagg(prefill: Parallel, decode: Parallel) -> tuple[Candidate, ...]:
    return (Candidate("disagg", prefill=prefill, decode=decode),)


CASES: dict[str, Case] = {
    "vllm-agg-dense": Case(_req(LLAMA_8B, "h100_sxm", "vllm", concurrency=32, **_SHORT)),
    "vllm-disagg-dense": Case(_req(LLAMA_70B, "h100_sxm", "vllm", request_rate=6.0, **_LONG)),
    "vllm-disagg-pp-multinode": Case(_req(LLAMA_405B, "h100_sxm", "vllm", concurrency=32, isl_tokens=2000,
                                          osl_tokens=300, ttft_ms=1500, itl_ms=60, max_gpus_per_engine=16)),
    "vllm-disagg-moe-ep-multinode": Case(_req(DEEPSEEK, "h200_sxm", "vllm", concurrency=512, **_MOE),
                                         only=_disagg(Parallel(tp=2, dp=4), Parallel(tp=2, dp=8, moe_ep=16))),
    "vllm-agg-moe-dp-ep": Case(_req(GPT_OSS, "h100_sxm", "vllm", request_rate=5.0, isl_tokens=2000, osl_tokens=500,
                                    ttft_ms=500, itl_ms=15), only=_agg(dp=4, ep=4)),
    "sglang-agg-dense": Case(_req(LLAMA_70B, "h100_sxm", "sglang", request_rate=4.0, **{**_SHORT, "itl_ms": 30})),
    "sglang-disagg-moe-ep-multinode": Case(_req(DEEPSEEK, "h200_sxm", "sglang", concurrency=512, **_MOE)),
    "sglang-disagg-moe-fp8": Case(_req(QWEN_FP8, "h200_sxm", "sglang", request_rate=8.0, **_FP8)),
    "sglang-agg-moe-dp-ep-multinode": Case(_req(DEEPSEEK, "h200_sxm", "sglang", concurrency=128, **_MOE),
                                           only=_agg(dp=16, ep=16)),
    "trtllm-agg-dense": Case(_req(LLAMA_8B, "h100_sxm", "trtllm", concurrency=32, **_SHORT)),
    "trtllm-disagg-dense": Case(_req(LLAMA_70B, "h100_sxm", "trtllm", concurrency=64, **_LONG)),
    "trtllm-agg-moe-attention-dp-ep": Case(_req(QWEN_FP8, "h200_sxm", "trtllm", concurrency=128, **_FP8),
                                           only=_agg(dp=8, ep=8)),
    "trtllm-agg-moe-attention-dp-multinode": Case(_req(DEEPSEEK, "h200_sxm", "trtllm", concurrency=128,
                                                       **{**_MOE, "min_gpus_per_engine": 16})),
    "trtllm-disagg-moe-attention-dp": Case(_req(QWEN_FP8, "h200_sxm", "trtllm", request_rate=8.0, **_FP8)),
    "trtllm-disagg-moe-ep-multinode": Case(_req(DEEPSEEK, "h200_sxm", "trtllm", concurrency=512, **_MOE)),
    # no load stated: 12 GPUs hold one TP8 engine and one TP4, which serve more than three TP4
    "vllm-agg-mix-budget": Case(_req(LLAMA_70B, "h200_sxm", "vllm", total_gpus=12, isl_tokens=3000, osl_tokens=500,
                                     ttft_ms=500, itl_ms=20)),
    # no load stated, one shape: the budget's engines, and an autoscaler may shrink them to one
    "vllm-agg-range": Case(_req(LLAMA_70B, "h200_sxm", "vllm", total_gpus=16, **_RANGE)),
    "sglang-agg-range": Case(_req(LLAMA_70B, "h200_sxm", "sglang", total_gpus=16, **_RANGE), only=_agg(tp=4)),
    "vllm-agg-pp-multinode-range": Case(_req(LLAMA_405B, "h100_sxm", "vllm", total_gpus=32, isl_tokens=2000,
                                             osl_tokens=300, ttft_ms=1500, itl_ms=60, max_gpus_per_engine=16),
                                        only=(Candidate("agg", engine=Parallel(tp=8, pp=2)),)),
}
MIXED = "vllm-agg-mix-budget"
RANGED = ("vllm-agg-range", "sglang-agg-range", "vllm-agg-pp-multinode-range")


def _variants() -> dict[str, tuple[str, dict[str, str]]]:
    """Every target of the registry, once per API version (Dynamo) or group (Kthena) it renders."""
    out: dict[str, tuple[str, dict[str, str]]] = {}
    for name, target in REGISTRY.items():
        if name == "dynamo":
            out.update({f"dynamo-{v}": (name, {"dynamo_version": v}) for v in target.versions})
        elif name == "kthena":
            assert set(target.groups) == {CURRENT_GROUP, LEGACY_GROUP}
            out.update({f"kthena-{g.split('.')[1]}": (name, {"kthena_group": g}) for g in target.groups})
        else:
            out[name] = (name, {})
    return out


VARIANTS = _variants()
PAIRS = [(case, variant) for case in CASES for variant in VARIANTS]

# What each target documents it cannot run (its UnsupportedPlan reason), per (case, target).
_KUBEAI_VLLM_ONLY = "KubeAI runs vLLM, not"
_KUBEAI_ONE_POD = "KubeAI runs one engine per pod"
_KUBEAI_NO_DISAGG = "KubeAI has no prefill/decode disaggregation"
_TRTLLM_MULTINODE = "multi-node TRT-LLM engines outside Dynamo need MPI wiring"
EXPECTED_REFUSALS: dict[tuple[str, str], str] = {
    ("vllm-disagg-pp-multinode", "kubeai"): _KUBEAI_ONE_POD,
    ("vllm-disagg-moe-ep-multinode", "kubeai"): _KUBEAI_NO_DISAGG,  # only the pair is planned: no alternative
    ("sglang-agg-dense", "kubeai"): _KUBEAI_VLLM_ONLY,
    ("sglang-disagg-moe-ep-multinode", "kubeai"): _KUBEAI_VLLM_ONLY,  # its aggregated alternative fits one node
    ("sglang-disagg-moe-fp8", "kubeai"): _KUBEAI_VLLM_ONLY,
    ("sglang-agg-moe-dp-ep-multinode", "kubeai"): _KUBEAI_ONE_POD,
    ("trtllm-agg-dense", "kubeai"): _KUBEAI_VLLM_ONLY,
    ("trtllm-disagg-dense", "kubeai"): _KUBEAI_VLLM_ONLY,
    ("trtllm-agg-moe-attention-dp-ep", "kubeai"): _KUBEAI_VLLM_ONLY,
    ("trtllm-agg-moe-attention-dp-multinode", "ome"): _TRTLLM_MULTINODE,
    ("trtllm-agg-moe-attention-dp-multinode", "kthena-serving"): _TRTLLM_MULTINODE,
    ("trtllm-agg-moe-attention-dp-multinode", "kthena-volcano"): _TRTLLM_MULTINODE,
    ("trtllm-agg-moe-attention-dp-multinode", "kubeai"): _KUBEAI_ONE_POD,
    ("trtllm-disagg-moe-attention-dp", "kubeai"): _KUBEAI_VLLM_ONLY,
    ("trtllm-disagg-moe-ep-multinode", "kubeai"): _KUBEAI_VLLM_ONLY,
    ("sglang-agg-range", "kubeai"): _KUBEAI_VLLM_ONLY,
    ("vllm-agg-pp-multinode-range", "kubeai"): _KUBEAI_ONE_POD,
}


@pytest.fixture(scope="module")
def planned() -> dict[str, tuple[PlanResult, ProfilingResults]]:
    """Every case planned once, with the results document its targets render from."""
    out = {}
    for name, case in CASES.items():
        result = plan(PlanRequest(**case.request), only=case.only)
        assert result.feasible, f"{name}: {result.reason}"
        out[name] = (result, ProfilingResults.of(result))
    return out


def _render(results: ProfilingResults, request: PlanRequest, variant: str) -> Rendered:
    target, options = VARIANTS[variant]
    return render_target(results, request, target, **options)


def _deployed_plan(results: ProfilingResults, rendered: Rendered) -> Plan:
    """The plan the target rendered: the chosen one, or (with a note) the aggregated alternative of
    one shape, for a disaggregated plan or a mix of shapes."""
    if not rendered.notes:
        return results.chosen
    assert results.chosen.mode == "disagg" or results.chosen.parts, rendered.notes
    assert results.aggregated_alternative is not None and not results.aggregated_alternative.parts
    return results.aggregated_alternative


def _shares(deployed: Deployed, promised: Plan) -> list[tuple[Deployed, Plan]]:
    """(what is deployed, what the plan promised of it) per share of the load: the whole deployment,
    or each engine shape of a mix with the part of the plan that serves its share."""
    if not promised.parts:
        return [(deployed, promised)]
    out = []
    for engine in deployed.engines:
        part = next(p for p in promised.parts
                    if (p.engines[0].tp, p.engines[0].pp, p.engines[0].dp, p.engines[0].ep) ==
                    (engine.tp, engine.pp, engine.dp, engine.ep))
        out.append((replace(deployed, engines=(engine,)), part))
    return out


def _parallel(engine: DeployedEngine) -> Parallel:
    return Parallel(tp=engine.tp, pp=engine.pp, dp=engine.dp, moe_ep=engine.ep)


def serving_config(deployed: Deployed, request: PlanRequest, promised: Plan) -> ServingConfig:
    """The performance model's configuration of what ``deployed`` runs under ``request``'s load
    (with none stated, the clients ``promised`` serves within the SLA)."""
    load = ({"concurrency": float(request.concurrency)} if request.concurrency is not None
            else {"request_rate": request.request_rate} if request.request_rate is not None
            else {"concurrency": promised.predicted.concurrency})
    if deployed.mode == "agg":
        batch = deployed.role("aggregated")
        roles: dict[str, Any] = {"engine": _parallel(batch), "replicas": batch.replicas}
        tokens = batch.max_prompt_tokens
    else:
        prefill, batch = deployed.role("prefill"), deployed.role("decode")
        roles = {"prefill": _parallel(prefill), "decode": _parallel(batch),
                 "prefill_workers": prefill.replicas, "decode_workers": batch.replicas}
        # The model takes one prompt-token budget for both roles.
        assert prefill.max_prompt_tokens == batch.max_prompt_tokens
        tokens = batch.max_prompt_tokens
    return ServingConfig(model=deployed.model, gpu=deployed.gpu, backend=deployed.backend,
                         precision=deployed.precision, kv_dtype=batch.kv_dtype, mode=deployed.mode,
                         max_batch=batch.max_running, max_num_tokens=tokens, isl_tokens=request.isl_tokens,
                         osl_tokens=request.osl_tokens, **load, **roles)


def emitted_min(variant: str, plan: Plan, engine: Engine) -> int:
    """The fewest engines of ``engine``'s role that ``variant``'s manifests let an autoscaler run: the
    plan's range where the target says it emits one (``Target.scaling``; a v1alpha1 DGD for
    single-node workers only), else the planned count."""
    target, options = VARIANTS[variant]
    if not scales(engine) or REGISTRY[target].scaling(plan, Options(**options)) is None:
        return engine.replicas
    if target == "dynamo" and options["dynamo_version"] == "v1alpha1" and not hpa_scales(engine):
        return engine.replicas
    return engine.min_replicas


def _close(got: float, want: float) -> bool:
    return math.isclose(got, want, rel_tol=TOLERANCE)


@pytest.mark.parametrize("case,variant", PAIRS, ids=[f"{c}-{v}" for c, v in PAIRS])
def test_manifest_round_trips_to_the_prediction(planned, case: str, variant: str):
    result, results = planned[case]
    request = result.request
    refusal = EXPECTED_REFUSALS.get((case, variant))
    if refusal is not None:
        with pytest.raises(UnsupportedPlan, match=refusal):
            _render(results, request, variant)
        return
    rendered = _render(results, request, variant)
    promised = _deployed_plan(results, rendered)
    deployed = read_deployment(rendered.objects)

    assert (deployed.model, deployed.gpu, deployed.backend) == (request.model, promised.gpu, promised.backend)
    assert deployed.precision == promised.precision and deployed.mode == promised.mode
    if variant != "kubeai":  # KubeAI serves a Model under the Model's own name
        assert deployed.served_name == request.model
    assert [e.role for e in deployed.engines] == [e.role for e in promised.engines]
    for got, want in zip(deployed.engines, promised.engines):
        assert (got.tp, got.pp, got.dp, got.ep, got.replicas) == (want.tp, want.pp, want.dp, want.ep, want.replicas)
        assert got.min_replicas == emitted_min(variant, promised, want)
        assert got.gpus == got.tp * got.pp * got.dp, f"{got.role}: pods give {got.gpus} GPUs"
        assert (got.kv_dtype, got.memory_fraction) == (promised.kv_dtype, promised.memory_fraction)
        assert got.max_prompt_tokens == want.max_num_tokens
        # Running sequences: the planned limit, rounded up to whole per-rank limits.
        assert got.max_running is not None and want.max_batch <= got.max_running < want.max_batch + got.dp

    tok_s = rate = 0.0
    for share, part in _shares(deployed, promised):
        again = estimate(serving_config(share, request, part))
        predicted = part.predicted
        pairs = {"ttft_ms": (again.ttft_ms, predicted.ttft_ms), "itl_ms": (again.itl_ms, predicted.itl_ms),
                 "output_tok_s_per_gpu": (again.output_tok_s_per_gpu, predicted.output_tok_s_per_gpu),
                 "requests_per_s": (again.requests_per_s, predicted.requests_per_s)}
        off = {k: f"re-estimated {g:.4g} vs predicted {w:.4g}" for k, (g, w) in pairs.items() if not _close(g, w)}
        assert not off, (share.engines[0].role, off)
        tok_s += again.output_tok_s_per_gpu * part.total_gpus
        rate += again.requests_per_s
    # a mix serves the sum of its shares; one shape, what it was predicted to
    whole = promised.predicted
    assert _close(tok_s, whole.output_tok_s_per_gpu * promised.total_gpus) and _close(rate, whole.requests_per_s)


def test_the_budget_case_is_a_mix(planned):
    """The no-load budget case round-trips a mix of two engine shapes (else the matrix misses one)."""
    chosen = planned[MIXED][0].chosen
    assert len(chosen.parts) == 2 and len({e.tag for e in chosen.engines}) == 2


@pytest.mark.skipif(not CRD_DIR.is_dir(), reason="../shared/crds (real CRD schemas) is not beside the repository")
@pytest.mark.parametrize("case,variant", PAIRS, ids=[f"{c}-{v}" for c, v in PAIRS])
def test_rendered_objects_validate_against_crds(planned, case: str, variant: str):
    from infra.crds import find_crds, validate

    if (case, variant) in EXPECTED_REFUSALS:
        return
    result, results = planned[case]
    for obj in _render(results, result.request, variant).objects:
        if not find_crds(obj["apiVersion"], obj["kind"], CRD_DIRS):
            assert obj["apiVersion"] == f"{LEGACY_GROUP}/v1alpha1"  # the seed's group: no published CRD
            continue
        assert validate(obj, CRD_DIRS) == []


def test_reader_sees_a_dropped_setting(planned):
    """The reader reads the manifest, not the plan: a flag taken out is a setting not deployed."""
    result, results = planned["vllm-disagg-moe-ep-multinode"]
    dgd = copy.deepcopy(_render(results, result.request, "dynamo-v1alpha1").objects)
    decode = dgd[0]["spec"]["services"]["VllmDecodeWorker"]["extraPodSpec"]["mainContainer"]
    args = decode["args"]
    del args[args.index("--kv-cache-dtype"):args.index("--kv-cache-dtype") + 2]
    args.remove("--enable-expert-parallel")
    got = read_deployment(dgd).role("decode")
    want = results.chosen.role("decode")
    assert want.ep > 1 and results.chosen.kv_dtype == "fp8"
    assert (got.ep, got.kv_dtype) == (1, "bf16")


@pytest.mark.parametrize("case", RANGED)
def test_a_replica_range_reads_back_from_every_target_that_scales(planned, case: str):
    """Each ranged case reads back shrinkable (min < replicas) from exactly the targets that can scale
    it: Dynamo v1beta1 always; v1alpha1 for single-node workers; Kthena's current group for engines
    that publish gauges (vLLM, SGLang); KubeAI for what it runs (vLLM on one pod); never OME or the
    seed's Kthena group."""
    result, results = planned[case]
    chosen = results.chosen
    assert all(scales(e) for e in chosen.engines), "the case must plan a range"
    single_node = all(e.nodes == 1 for e in chosen.engines)
    expected = {"dynamo-v1beta1", "kthena-serving"} | ({"dynamo-v1alpha1"} if single_node else set())
    if chosen.backend == "vllm" and single_node:
        expected.add("kubeai")
    shrinks = set()
    for variant in VARIANTS:
        if (case, variant) in EXPECTED_REFUSALS:
            continue
        rendered = _render(results, result.request, variant)
        assert not rendered.notes  # the chosen plan itself
        for got, want in zip(read_deployment(rendered.objects).engines, chosen.engines):
            if got.min_replicas < got.replicas:
                assert got.min_replicas == want.min_replicas, variant
                shrinks.add(variant)
    assert shrinks == expected


def test_reader_refuses_a_range_that_does_not_top_at_the_replicas(planned):
    """A range whose maximum is not the count the manifest starts is not the plan's: the reader says so."""
    result, results = planned["vllm-agg-range"]
    model = copy.deepcopy(_render(results, result.request, "kubeai").objects)
    model[0]["spec"]["maxReplicas"] += 1
    with pytest.raises(ValueError, match="replica range tops at"):
        read_deployment(model)
