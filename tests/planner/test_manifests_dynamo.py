"""DynamoGraphDeployment rendering and DGDR status, checked against the real CRD schemas."""

from __future__ import annotations

import json

import pytest

from planner.manifests.dynamo import render_dgd, service_name
from planner.results import ProfilingResults, pareto_front
from planner.status import dgdr_status, validation_failed_status
from planner.types import Engine, Plan, PlanRequest, PlanResult
from profiler.model import Prediction
from paths import CRD_DIRS, SHARED

CRD_DIR = SHARED / "crds"
BACKENDS = ("vllm", "sglang", "trtllm")
NOW = "2026-01-01T00:00:00Z"


def _validate(obj: dict) -> list[str]:
    if not CRD_DIR.exists():
        pytest.skip(f"CRD schemas not found beside the repository ({CRD_DIR})")
    from infra.crds import validate

    return validate(obj, CRD_DIRS)


def _pred(**kw) -> Prediction:
    base = dict(
        ttft_ms=180.0, ttft_p90_ms=250.0, ttft_p99_ms=320.0, itl_ms=14.0,
        output_tok_s_per_gpu=900.0, tok_s_per_user=70.0, requests_per_s=5.0, concurrency=40.0,
    )
    base.update(kw)
    return Prediction(**base)


def _request(backend: str = "vllm", **kw) -> PlanRequest:
    base = dict(
        name="llama-70b", namespace="team-a", model="meta-llama/Llama-3.1-70B-Instruct",
        backend=backend, gpu="h200_sxm", ttft_ms=500, itl_ms=20,
    )
    base.update(kw)
    return PlanRequest(**base)


def _dense_agg(backend: str) -> Plan:
    return Plan(
        model="meta-llama/Llama-3.1-70B-Instruct", gpu="h200_sxm", backend=backend, precision="bf16", kv_dtype="bf16", memory_fraction=0.9,
        mode="agg",
        engines=(Engine(role="aggregated", tp=4, replicas=3, max_batch=128, max_num_tokens=8192, gpus_per_node=8),),
        predicted=_pred(), cost_per_hour=42.0,
    )


def _dense_disagg(backend: str) -> Plan:
    return Plan(
        model="meta-llama/Llama-3.1-70B-Instruct", gpu="h200_sxm", backend=backend, precision="fp8", kv_dtype="fp8", memory_fraction=0.9,
        mode="disagg",
        engines=(
            Engine(role="prefill", tp=2, replicas=2, max_batch=4, max_num_tokens=16384, gpus_per_node=8),
            Engine(role="decode", tp=4, replicas=1, max_batch=256, gpus_per_node=8),
        ),
        predicted=_pred(),
    )


def _moe_disagg(backend: str) -> Plan:
    return Plan(
        model="deepseek-ai/DeepSeek-V3", gpu="h200_sxm", backend=backend, precision="fp8", kv_dtype="fp8", memory_fraction=0.9, mode="disagg",
        engines=(
            Engine(role="prefill", tp=8, ep=8, replicas=1, max_batch=8, max_num_tokens=16384, gpus_per_node=8),
            Engine(role="decode", tp=1, dp=8, ep=8, replicas=1, max_batch=512, gpus_per_node=8),
        ),
        predicted=_pred(),
    )


def _multinode(backend: str) -> Plan:
    return Plan(
        model="meta-llama/Llama-3.1-405B-Instruct", gpu="h100_sxm", backend=backend, precision="bf16", kv_dtype="bf16", memory_fraction=0.9,
        mode="disagg",
        engines=(
            Engine(role="prefill", tp=16, replicas=1, max_batch=4, gpus_per_node=8),
            Engine(role="decode", tp=16, replicas=2, max_batch=128, gpus_per_node=8),
        ),
        predicted=_pred(),
    )


PLANS = {"dense-agg": _dense_agg, "dense-disagg": _dense_disagg, "moe-disagg": _moe_disagg, "multinode": _multinode}


def _workers_v1alpha1(dgd: dict) -> dict[str, dict]:
    return {k: v for k, v in dgd["spec"]["services"].items() if v["componentType"] == "worker"}


def _args(svc: dict) -> list[str]:
    return svc["extraPodSpec"]["mainContainer"]["args"]


def _flag(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


# ----------------------------------------------------------------------------- schema validity


@pytest.mark.parametrize("api_version", ["v1alpha1", "v1beta1"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", sorted(PLANS))
def test_rendered_dgd_validates_against_crds(kind, backend, api_version):
    dgd = render_dgd(PLANS[kind](backend), _request(backend), api_version=api_version)
    assert dgd["apiVersion"] == f"nvidia.com/{api_version}"
    assert _validate(dgd) == []


def test_validator_catches_a_broken_dgd():
    dgd = render_dgd(_dense_disagg("vllm"), _request())
    dgd["spec"]["services"]["VllmDecodeWorker"]["multinode"] = {"nodeCount": 1}
    dgd["spec"]["backendFramework"] = "tgi"
    errors = _validate(dgd)
    assert any("nodeCount" in e for e in errors) and any("backendFramework" in e for e in errors)


# ----------------------------------------------------------------------------- structure


@pytest.mark.parametrize("backend", BACKENDS)
def test_disagg_service_names_and_roles(backend):
    dgd = render_dgd(_dense_disagg(backend), _request(backend))
    services = dgd["spec"]["services"]
    assert services["Frontend"]["componentType"] == "frontend"
    prefill, decode = service_name(backend, "prefill"), service_name(backend, "decode")
    expected = {
        "vllm": ("VllmPrefillWorker", "VllmDecodeWorker"),
        "sglang": ("prefill", "decode"),
        "trtllm": ("TRTLLMPrefillWorker", "TRTLLMDecodeWorker"),
    }[backend]
    assert (prefill, decode) == expected
    assert set(_workers_v1alpha1(dgd)) == {prefill, decode}
    assert services[prefill]["subComponentType"] == "prefill"
    assert services[decode]["subComponentType"] == "decode"
    assert services[prefill]["replicas"] == 2 and services[decode]["replicas"] == 1
    assert services[prefill]["resources"]["limits"]["gpu"] == "2"
    assert services[decode]["resources"]["limits"]["gpu"] == "4"
    assert "multinode" not in services[prefill]
    assert dgd["spec"]["backendFramework"] == backend
    for svc in (services[prefill], services[decode]):
        assert svc["extraPodSpec"]["mainContainer"]["command"] == ["python3", "-m", f"dynamo.{backend}"]
        assert _flag(_args(svc), "--disaggregation-mode") == svc["subComponentType"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_agg_has_one_worker_without_sub_component(backend):
    dgd = render_dgd(_dense_agg(backend), _request(backend))
    workers = _workers_v1alpha1(dgd)
    assert list(workers) == [{"vllm": "VllmDecodeWorker", "sglang": "decode", "trtllm": "TRTLLMWorker"}[backend]]
    (svc,) = workers.values()
    assert "subComponentType" not in svc
    assert svc["replicas"] == 3 and svc["resources"]["limits"]["gpu"] == "4"
    assert "--disaggregation-mode" not in _args(svc)


def test_tp_flags_per_backend():
    tp_flag = {"vllm": "--tensor-parallel-size", "sglang": "--tp-size", "trtllm": "--tensor-parallel-size"}
    for backend in BACKENDS:
        dgd = render_dgd(_dense_disagg(backend), _request(backend))
        svc = dgd["spec"]["services"][service_name(backend, "decode")]
        assert _flag(_args(svc), tp_flag[backend]) == "4"


def test_vllm_disagg_uses_nixl_kv_transfer():
    dgd = render_dgd(_dense_disagg("vllm"), _request())
    args = _args(dgd["spec"]["services"]["VllmPrefillWorker"])
    assert json.loads(_flag(args, "--kv-transfer-config"))["kv_connector"] == "NixlConnector"
    assert _flag(args, "--model") == "meta-llama/Llama-3.1-70B-Instruct"


def test_sglang_moe_dp_attention_and_ep():
    dgd = render_dgd(_moe_disagg("sglang"), _request("sglang", model="deepseek-ai/DeepSeek-V3"))
    decode = dgd["spec"]["services"]["decode"]
    args = _args(decode)
    assert _flag(args, "--tp-size") == "8" and _flag(args, "--dp-size") == "8"
    assert "--enable-dp-attention" in args and _flag(args, "--ep-size") == "8"
    assert _flag(args, "--disaggregation-transfer-backend") == "nixl"
    assert decode["resources"]["limits"]["gpu"] == "8" and "multinode" not in decode


def test_vllm_moe_data_parallel_and_expert_parallel():
    dgd = render_dgd(_moe_disagg("vllm"), _request(model="deepseek-ai/DeepSeek-V3"))
    args = _args(dgd["spec"]["services"]["VllmDecodeWorker"])
    assert _flag(args, "--tensor-parallel-size") == "1" and _flag(args, "--data-parallel-size") == "8"
    assert "--enable-expert-parallel" in args


@pytest.mark.parametrize("backend", BACKENDS)
def test_multinode_engine_spans_pods(backend):
    dgd = render_dgd(_multinode(backend), _request(backend))
    for svc in _workers_v1alpha1(dgd).values():
        assert svc["multinode"] == {"nodeCount": 2}
        assert svc["resources"]["limits"]["gpu"] == "8"  # 2 pods x 8 GPUs = tp 16
        assert "--nnodes" not in _args(svc)
    beta = render_dgd(_multinode(backend), _request(backend), api_version="v1beta1")
    for comp in beta["spec"]["components"][1:]:
        assert comp["multinode"] == {"nodeCount": 2}
        (container,) = comp["podTemplate"]["spec"]["containers"]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"


def test_uneven_engine_split_is_refused():
    plan = _dense_agg("vllm").model_copy(
        update={"engines": (Engine(role="aggregated", tp=9, replicas=1, max_batch=8, gpus_per_node=8),)}
    )
    with pytest.raises(ValueError):
        render_dgd(plan, _request())


def test_plan_mode_must_match_engines():
    plan = _dense_agg("vllm").model_copy(update={"mode": "disagg"})
    with pytest.raises(ValueError):
        render_dgd(plan, _request())
    with pytest.raises(ValueError):
        render_dgd(_dense_agg("vllm"), _request(), api_version="v2")


def test_v1beta1_components():
    dgd = render_dgd(_dense_disagg("vllm"), _request(), api_version="v1beta1")
    comps = {c["name"]: c for c in dgd["spec"]["components"]}
    assert comps["Frontend"]["type"] == "frontend"
    assert comps["VllmPrefillWorker"]["type"] == "prefill" and comps["VllmDecodeWorker"]["type"] == "decode"
    (container,) = comps["VllmPrefillWorker"]["podTemplate"]["spec"]["containers"]
    assert container["name"] == "main" and container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    agg = render_dgd(_dense_agg("trtllm"), _request("trtllm"), api_version="v1beta1")
    assert [c["type"] for c in agg["spec"]["components"]] == ["frontend", "worker"]


def _with_range(plan: Plan, low: int = 1) -> Plan:
    """``plan`` with each engine's replicas ranging from ``low`` to its planned count (at least 2)."""
    engines = tuple(e.model_copy(update={"replicas": max(2, e.replicas), "min_replicas": low}) for e in plan.engines)
    return plan.model_copy(update={"engines": engines})


@pytest.mark.parametrize("backend", BACKENDS)
def test_v1alpha1_single_node_workers_with_a_range_get_an_hpa(backend):
    plan = _with_range(_dense_disagg(backend))
    dgd = render_dgd(plan, _request(backend), api_version="v1alpha1")
    workers = {n: s for n, s in dgd["spec"]["services"].items() if s["componentType"] == "worker"}
    for engine in plan.engines:
        svc = workers[service_name(backend, engine.role)]
        scaling = svc["autoscaling"]
        assert scaling["enabled"] and (scaling["minReplicas"], scaling["maxReplicas"]) == (1, engine.replicas)
        assert svc["replicas"] == engine.replicas  # starts at the planned count
        (metric,) = scaling["metrics"]
        assert metric["pods"]["metric"]["name"] == "dynamo_component_inflight_requests"
        assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": str(engine.max_batch)}
    assert dgd["metadata"]["annotations"]["nvidia.com/enable-grove"] == "false"  # HPAs exist in component mode
    assert _validate(dgd) == []
    beta = render_dgd(plan, _request(backend), api_version="v1beta1")
    assert "nvidia.com/enable-grove" not in beta["metadata"]["annotations"]
    assert not any("autoscaling" in c for c in beta["spec"]["components"])


def test_v1alpha1_multinode_workers_keep_fixed_replicas():
    plan = _with_range(_multinode("vllm"))
    dgd = render_dgd(plan, _request(), api_version="v1alpha1")
    assert not any("autoscaling" in s for s in dgd["spec"]["services"].values())
    assert "nvidia.com/enable-grove" not in dgd["metadata"]["annotations"]  # Grove stays for multi-node engines
    fixed = render_dgd(_dense_agg("vllm"), _request(), api_version="v1alpha1")
    assert not any("autoscaling" in s for s in fixed["spec"]["services"].values())
    assert "nvidia.com/enable-grove" not in fixed["metadata"]["annotations"]


def test_metadata_labels_and_overrides():
    req = _request(
        deployment_name="llama-prod", deployment_namespace="serving",
        labels={"team": "a"}, annotations={"owner": "me"}, image="registry.example/vllm-runtime:1",
    )
    dgd = render_dgd(_dense_agg("vllm"), req)
    meta = dgd["metadata"]
    assert (meta["name"], meta["namespace"]) == ("llama-prod", "serving")
    labels = meta["labels"]
    assert labels["dgdr.nvidia.com/name"] == "llama-70b"
    assert labels["dgdr.nvidia.com/namespace"] == "team-a"
    assert labels["nvidia.com/managed-by"] == "slaplan"
    assert labels["team"] == "a" and meta["annotations"]["owner"] == "me"
    assert "ownerReferences" not in meta
    for svc in dgd["spec"]["services"].values():
        assert svc["extraPodSpec"]["mainContainer"]["image"] == "registry.example/vllm-runtime:1"


def test_name_defaults_to_the_dgdr():
    meta = render_dgd(_dense_agg("vllm"), _request())["metadata"]
    assert (meta["name"], meta["namespace"]) == ("llama-70b", "team-a")


# ----------------------------------------------------------------------------- status


def _result(plan: Plan | None, *, feasible: bool = True, auto_apply: bool = False, **kw) -> PlanResult:
    return PlanResult(
        request=_request(auto_apply=auto_apply), feasible=feasible, chosen=plan,
        candidates=kw.pop("candidates", (plan,) if plan else ()), **kw,
    )


def _dgdr_with(status: dict) -> dict:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeploymentRequest",
        "metadata": {"name": "llama-70b", "namespace": "team-a"},
        "spec": {"model": "meta-llama/Llama-3.1-70B-Instruct", "backend": "vllm",
                 "profilingConfig": {"profilerImage": "x"}},
        "status": status,
    }


def _cond(status: dict, ctype: str) -> dict:
    return next(c for c in status["conditions"] if c["type"] == ctype)


def test_status_ready_without_auto_apply():
    plan = _dense_disagg("vllm")
    dgd = render_dgd(plan, _request())
    status = dgdr_status(_result(plan), dgd, observed_generation=2, state="Ready", now=NOW)
    assert status["state"] == "Ready" and status["observedGeneration"] == 2
    assert [c["type"] for c in status["conditions"]] == ["Validation", "Profiling", "SpecGenerated", "DeploymentReady"]
    assert all(c["observedGeneration"] == 2 and c["lastTransitionTime"] == NOW for c in status["conditions"])
    assert _cond(status, "SpecGenerated")["status"] == "True"
    assert _cond(status, "DeploymentReady")["reason"] == "AutoApplyDisabled"
    assert status["generatedDeployment"] == dgd and "deployment" not in status
    results = json.loads(status["profilingResults"])
    assert results["chosen"]["mode"] == "disagg" and results["chosen"]["totalGpus"] == 8
    assert results["chosen"]["predicted"]["ttftMs"] == 180.0
    assert _validate(_dgdr_with(status)) == []


def test_status_deploying_and_ready_with_auto_apply():
    plan = _dense_agg("vllm")
    dgd = render_dgd(plan, _request())
    deploying = dgdr_status(_result(plan, auto_apply=True), dgd, observed_generation=1, state="Deploying", now=NOW)
    assert _cond(deploying, "DeploymentReady")["status"] == "False"
    assert deploying["deployment"]["name"] == "llama-70b" and deploying["deployment"]["created"] is True
    later = "2026-01-01T00:05:00Z"
    ready = dgdr_status(
        _result(plan, auto_apply=True), dgd, observed_generation=1, state="Ready", now=later, previous=deploying
    )
    assert _cond(ready, "DeploymentReady")["status"] == "True"
    assert _cond(ready, "DeploymentReady")["lastTransitionTime"] == later
    assert _cond(ready, "Profiling")["lastTransitionTime"] == NOW  # unchanged since Deploying
    assert _validate(_dgdr_with(ready)) == []


def test_status_conditions_read_back_typed():
    from planner.conditions import MAX_MESSAGE, Condition, read_conditions

    plan = _dense_agg("vllm")
    previous = {"conditions": [5, {"type": "Profiling", "status": "Maybe"},
                               {**Condition.of("Validation", "True", "SpecValid", "ok", now="then", generation=1).stored(),
                                "owner": "another controller"}]}
    status = dgdr_status(_result(plan), render_dgd(plan, _request()), observed_generation=1, state="Ready", now=NOW,
                         previous=previous)
    conditions = read_conditions(status)
    assert [c.stored() for c in conditions] == status["conditions"]
    assert [c.last_transition_time for c in conditions] == ["then", NOW, NOW, NOW]  # kept where status held
    long = Condition.of("Profiling", "False", "ProfilingFailed", "x" * (MAX_MESSAGE + 5), now=NOW, generation=1)
    assert len(long.message) == MAX_MESSAGE and long.message.endswith("...")
    assert read_conditions({"conditions": "x"}) == () and read_conditions("x") == ()


def test_status_infeasible():
    cand = _dense_agg("vllm").model_copy(update={"feasible": False, "reason": "ITL 31 ms > 20 ms"})
    result = _result(
        None, feasible=False, candidates=(cand,), reason="ITL target below what H200 reaches",
        closest=cand, assumptions=("bf16 weights",), evaluated=40,
    )
    status = dgdr_status(result, None, observed_generation=1, state="Failed", now=NOW)
    prof = _cond(status, "Profiling")
    assert prof["status"] == "False" and prof["reason"] == "SLAInfeasible"
    assert "ITL target below" in prof["message"]
    results = json.loads(status["profilingResults"])
    assert results["feasible"] is False and results["chosen"] is None
    assert results["closest"] == cand.stored() and results["assumptions"] == ["bf16 weights"]
    # a document stored before ``closest`` (with the retired lowest TTFT and ITL) still reads
    older = {k: v for k, v in results.items() if k != "closest"} | {"bestTtftMs": 120.0, "bestItlMs": 31.0}
    assert ProfilingResults.read(json.dumps(older)).closest is None
    assert len(results["pareto"]) == 1 and results["pareto"][0]["feasible"] is False
    assert "generatedDeployment" not in status
    assert _validate(_dgdr_with(status)) == []


def test_status_pending_profiling_and_validation_failure():
    pending = dgdr_status(None, None, observed_generation=1, state="Pending", now=NOW)
    assert _cond(pending, "Validation")["status"] == "True"
    assert _cond(pending, "Profiling")["status"] == "Unknown"
    running = dgdr_status(None, None, observed_generation=1, state="Profiling", now=NOW)
    assert _cond(running, "Profiling")["reason"] == "ProfilingRunning"
    failed = validation_failed_status(["spec.sla.ttft: must be greater than 0"], observed_generation=1, now=NOW)
    assert failed["state"] == "Failed" and _cond(failed, "Validation")["status"] == "False"
    for status in (pending, running, failed):
        assert _validate(_dgdr_with(status)) == []


def test_status_results_ref_and_bad_states():
    plan = _dense_agg("vllm")
    dgd = render_dgd(plan, _request())
    status = dgdr_status(_result(plan), dgd, observed_generation=1, state="Ready", now=NOW,
                         results_ref="configmap/llama-70b-results")
    assert status["profilingResults"] == "configmap/llama-70b-results"
    with pytest.raises(ValueError):
        dgdr_status(_result(plan), None, observed_generation=1, state="Ready", now=NOW)
    with pytest.raises(ValueError):
        dgdr_status(_result(plan), dgd, observed_generation=1, state="Done", now=NOW)
    with pytest.raises(ValueError):
        dgdr_status(_result(plan), dgd, observed_generation=1, state="Deploying", now=NOW)  # no autoApply


def test_pareto_front_keeps_non_dominated_points():
    base = _dense_agg("vllm")
    pts = [(10, 100), (20, 90), (15, 80), (30, 50), (5, 120), (30, 40)]
    plans = [base.model_copy(update={"predicted": _pred(tok_s_per_user=u, output_tok_s_per_gpu=g)}) for u, g in pts]
    front = pareto_front(plans)
    assert [(p.predicted.tok_s_per_user, p.predicted.output_tok_s_per_gpu) for p in front] == [
        (30, 50), (20, 90), (10, 100), (5, 120)
    ]
    assert len(pareto_front(plans, limit=2)) == 2
    doc = ProfilingResults.of(_result(base, candidates=tuple(plans))).stored()
    assert len(doc["pareto"]) == 4
