"""OME, Kthena and KubeAI renderers: structure, and validity against the real CRDs."""

from __future__ import annotations

import json

import pytest

from planner.manifests import common
from planner.manifests.kthena import render_kthena
from planner.manifests.kubeai import render_kubeai, resource_profile
from planner.manifests.ome import render_ome
from planner.types import Engine, Plan, PlanRequest
from profiler.model import Prediction
from paths import CRD_DIRS, SHARED

CRD_DIR = SHARED / "crds"
needs_crds = pytest.mark.skipif(
    not CRD_DIR.is_dir(), reason="../shared/crds (real CRD schemas) is not beside the repository")

PRED = Prediction(ttft_ms=200, ttft_p90_ms=300, ttft_p99_ms=400, itl_ms=20,
                  output_tok_s_per_gpu=1000, tok_s_per_user=50, requests_per_s=5, concurrency=64)


def _request(**kw) -> PlanRequest:
    base = dict(name="llm-sla", namespace="serving", model="Qwen/Qwen3-32B", gpu="h100_sxm",
                ttft_ms=500, itl_ms=30, labels={"team": "search"},
                annotations={"owner": "ml-platform"})
    return PlanRequest(**{**base, **kw})


def _engine(role, tp, replicas, *, pp=1, dp=1, ep=1, per_node=8, batch=64, tokens=None) -> Engine:
    return Engine(role=role, tp=tp, pp=pp, dp=dp, ep=ep, replicas=replicas, max_batch=batch,
                  max_num_tokens=tokens, gpus_per_node=per_node)


def _plan(mode, backend, *engines, model="Qwen/Qwen3-32B", gpu="h100_sxm") -> Plan:
    return Plan(model=model, gpu=gpu, backend=backend, precision="bf16", kv_dtype="bf16", memory_fraction=0.9, mode=mode,
                engines=tuple(engines), predicted=PRED)


DENSE_AGG = _engine("aggregated", 2, 3)
DENSE_P = _engine("prefill", 4, 2, tokens=8192)
DENSE_D = _engine("decode", 2, 3, batch=256)
BIG_P = _engine("prefill", 16, 1)  # tp16 on 8-GPU nodes: 2 pods per engine
MOE_P = _engine("prefill", 8, 1, ep=8)
MOE_D = _engine("decode", 2, 2, dp=8, ep=16, batch=512)  # 16 GPUs: 2 pods
MOE = "deepseek-ai/DeepSeek-V3"

# (id, plan) over modes, backends, dense/MoE, single/multi-node engines.
PLANS = [
    ("vllm-agg-dense", _plan("agg", "vllm", DENSE_AGG)),
    ("sglang-agg-dense", _plan("agg", "sglang", DENSE_AGG)),
    ("trtllm-agg-dense", _plan("agg", "trtllm", DENSE_AGG)),
    ("vllm-agg-tp8pp2", _plan("agg", "vllm", _engine("aggregated", 8, 1, pp=2))),
    ("vllm-disagg-dense", _plan("disagg", "vllm", DENSE_P, DENSE_D)),
    ("sglang-disagg-dense", _plan("disagg", "sglang", DENSE_P, DENSE_D)),
    ("sglang-disagg-tp16", _plan("disagg", "sglang", BIG_P, DENSE_D)),
    ("vllm-disagg-moe-multinode", _plan("disagg", "vllm", MOE_P, MOE_D, model=MOE)),
    ("sglang-disagg-moe-multinode", _plan("disagg", "sglang", MOE_P, MOE_D, model=MOE)),
    ("sglang-agg-moe", _plan("agg", "sglang", _engine("aggregated", 1, 2, dp=8, ep=8), model=MOE)),
]


def _validate(obj: dict) -> list[str]:
    from infra.crds import validate

    return validate(obj, CRD_DIRS)


def _gpus(container: dict) -> int:
    return int(container["resources"]["limits"][common.GPU_RESOURCE])


def _tp_arg(plan: Plan, engine: Engine) -> tuple[str, str]:
    """The flag and value that must carry the engine's tensor parallelism."""
    if plan.backend == "sglang":
        return "--tp-size", str(engine.tp * engine.dp)
    if plan.backend == "trtllm":
        return "--tp_size", str(engine.tp)
    return "--tensor-parallel-size", str(engine.tp)


def _has_pair(args: list[str], flag: str, value: str) -> bool:
    return any(a == flag and b == value for a, b in zip(args, args[1:])) or f"{flag}={value}" in args


# ---------------------------------------------------------------- common

def test_engine_args_per_backend():
    vllm = _plan("disagg", "vllm", MOE_P, MOE_D, model=MOE)
    args = common.engine_args(vllm, MOE_D)
    assert _has_pair(args, "--tensor-parallel-size", "2") and _has_pair(args, "--data-parallel-size", "8")
    assert "--enable-expert-parallel" in args and _has_pair(args, "--disaggregation-mode", "decode")
    assert _has_pair(args, "--max-num-seqs", "64")  # 512 per engine over 8 DP ranks
    standalone = common.engine_args(vllm, MOE_D, runtime="standalone")
    assert "--disaggregation-mode" not in standalone and "--kv-transfer-config" in standalone
    sgl = common.engine_args(_plan("disagg", "sglang", MOE_P, MOE_D, model=MOE), MOE_D)
    assert _has_pair(sgl, "--tp-size", "16") and _has_pair(sgl, "--dp-size", "8")
    assert "--enable-dp-attention" in sgl and _has_pair(sgl, "--ep-size", "16")
    assert _has_pair(sgl, "--max-running-requests", "512")
    # TRT-LLM's attention is tensor- or data-parallel, never both: a mixed engine is refused, a
    # pure attention-DP engine spans tp × dp GPUs with enable_attention_dp.
    with pytest.raises(common.UnsupportedPlan, match="attention TP2 × DP8"):
        common.engine_args(_plan("disagg", "trtllm", MOE_P, MOE_D, model=MOE), MOE_D)
    moe_dp = _engine("decode", 1, 2, dp=16, ep=16, batch=512)
    trt = common.engine_args(_plan("disagg", "trtllm", MOE_P, moe_dp, model=MOE), moe_dp)
    assert _has_pair(trt, "--tensor-parallel-size", "16") and "--enable-attention-dp" in trt
    assert _has_pair(trt, "--max-batch-size", "32")  # 512 per engine over 16 attention ranks
    # The prefill chunk is per attention-DP rank, as the performance model reads it: SGLang
    # takes it engine-wide and splits it over its ranks, vLLM and TRT-LLM take it per rank.
    dp_chunk = _engine("aggregated", 1, 1, dp=8, ep=8, tokens=4096)
    assert _has_pair(common.engine_args(_plan("agg", "sglang", dp_chunk, model=MOE), dp_chunk),
                     "--chunked-prefill-size", "32768")
    for backend, flag in (("vllm", "--max-num-batched-tokens"), ("trtllm", "--max-num-tokens")):
        assert _has_pair(common.engine_args(_plan("agg", backend, dp_chunk, model=MOE), dp_chunk), flag, "4096")
    # An aggregated attention-DP engine balances its ranks' prefills, as the performance model
    # assumes; a disaggregated one ships KV instead, a dense one has nothing to balance.
    moe_agg = _engine("aggregated", 1, 1, dp=8, ep=8)
    agg_trt = common.engine_args(_plan("agg", "trtllm", moe_agg, model=MOE), moe_agg)
    override = json.loads(agg_trt[agg_trt.index("--override-engine-args") + 1])
    assert override["attention_dp_config"] == {"enable_balance": True, "timeout_iters": 50, "batching_wait_iters": 10}
    assert override["enable_attention_dp"] is True
    assert "attention_dp_config" not in " ".join(trt)
    dense = common.engine_args(_plan("agg", "trtllm", DENSE_AGG), DENSE_AGG)
    assert json.loads(dense[dense.index("--override-engine-args") + 1]) == {
        "kv_cache_config": {"dtype": "auto", "free_gpu_memory_fraction": 0.9}, "enable_chunked_prefill": True}
    assert common.engine_args(_plan("agg", "vllm", DENSE_AGG), DENSE_AGG, style="equals")[0] == \
        "--tensor-parallel-size=2"
    assert common.worker_command("sglang") == ["python3", "-m", "dynamo.sglang"]


def test_names_are_dns_labels_and_deterministic():
    long = "My_Very.Long/Deployment Name " * 4
    a, b = common.dns_name(long, 40), common.dns_name(long, 40)
    assert a == b and len(a) <= 40 and a[0].isalnum() and a[-1].isalnum()
    assert common.dns_name(long + "x", 40) != a
    assert common.model_slug("meta-llama/Llama-3.1-8B-Instruct") == "llama-3-1-8b-instruct"


def test_trtllm_disagg_outside_dynamo_is_unsupported():
    plan = _plan("disagg", "trtllm", DENSE_P, DENSE_D)
    with pytest.raises(common.UnsupportedPlan):
        render_ome(plan, _request())
    with pytest.raises(common.UnsupportedPlan):
        render_kthena(plan, _request())


# ---------------------------------------------------------------- OME

@pytest.mark.parametrize("pid,plan", PLANS, ids=[p for p, _ in PLANS])
def test_ome_structure(pid, plan):
    (isvc,) = render_ome(plan, _request(), runtime_ref="srt-custom")
    spec = isvc["spec"]
    assert isvc["metadata"]["namespace"] == "serving" and isvc["metadata"]["labels"]["team"] == "search"
    assert spec["model"] == {"name": common.model_slug(plan.model), "kind": "ClusterBaseModel"}
    assert spec["runtime"]["name"] == "srt-custom"
    blocks = [("engine", plan.engines[0])]
    if plan.mode == "disagg":
        blocks.append(("decoder", plan.role("decode")))
        assert spec["router"] == {"minReplicas": 1, "maxReplicas": 1}
        assert plan.engines[0].role == "prefill"
    else:
        assert "decoder" not in spec and "router" not in spec
    for key, engine in blocks:
        block = spec[key]
        assert block["minReplicas"] == block["maxReplicas"] == engine.replicas
        if engine.nodes > 1:
            assert "runner" not in block and block["worker"]["size"] == engine.nodes - 1
            runners = [block["leader"]["runner"], block["worker"]["runner"]]
        else:
            assert "leader" not in block and "worker" not in block
            runners = [block["runner"]]
        for runner in runners:
            assert _gpus(runner) == engine.gpus_per_pod
            assert _has_pair(runner["args"], *_tp_arg(plan, engine))
        # Invariant: GPUs per pod × pods per engine = TP × PP × DP.
        assert _gpus(runners[0]) * engine.nodes == engine.tp * engine.pp * engine.dp


@needs_crds
@pytest.mark.parametrize("pid,plan", PLANS, ids=[p for p, _ in PLANS])
def test_ome_validates(pid, plan):
    for obj in render_ome(plan, _request()):
        assert _validate(obj) == []


def test_ome_model_ref_override_and_default_runtime():
    (isvc,) = render_ome(_plan("agg", "vllm", DENSE_AGG), _request(), model_ref="qwen3-32b-fp8")
    assert isvc["spec"]["model"]["name"] == "qwen3-32b-fp8" and "runtime" not in isvc["spec"]


# ---------------------------------------------------------------- Kthena

@pytest.mark.parametrize("group", ["workload.volcano.sh", "workload.serving.volcano.sh"])
@pytest.mark.parametrize("pid,plan", PLANS, ids=[p for p, _ in PLANS])
def test_kthena_structure(pid, plan, group):
    (ms,) = render_kthena(plan, _request(), api_group=group)
    assert ms["apiVersion"] == f"{group}/v1alpha1" and ms["kind"] == "ModelServing"
    spec = ms["spec"]
    assert spec["replicas"] == 1 and spec["recoveryPolicy"]
    roles = spec["template"]["roles"]
    expected = ["prefill", "decode"] if plan.mode == "disagg" else ["server"]
    assert [r["name"] for r in roles] == expected
    gang = spec["template"]["gangSchedule" if group == "workload.volcano.sh" else "gangPolicy"]
    assert set(gang["minRoleReplicas"]) == set(expected)
    other = "gangPolicy" if group == "workload.volcano.sh" else "gangSchedule"
    assert other not in spec["template"]
    for role, engine in zip(roles, common.engines_in_order(plan)):
        assert role["replicas"] == engine.replicas
        assert role["workerReplicas"] == engine.nodes - 1
        assert ("workerTemplate" in role) == (engine.nodes > 1)
        pods = [role["entryTemplate"]] + ([role["workerTemplate"]] if engine.nodes > 1 else [])
        for pod in pods:
            (container,) = pod["spec"]["containers"]
            assert _gpus(container) == engine.gpus_per_pod
            assert _has_pair(container["args"], *_tp_arg(plan, engine))
            if engine.nodes > 1 and plan.backend == "vllm" and engine.dp > 1:
                # data-parallel ranks spread over the pods: vLLM's data-parallel wiring
                assert _has_pair(container["args"], "--data-parallel-size-local", str(engine.dp // engine.nodes))
                worker = pod is not role["entryTemplate"]
                assert ("--headless" in container["args"]) == worker
                assert _has_pair(container["args"], "--data-parallel-start-rank",
                                 str(engine.dp // engine.nodes)) == worker
            elif engine.nodes > 1:
                assert _has_pair(container["args"], "--nnodes", str(engine.nodes))


def test_kthena_network_topology_placement_per_group():
    topo = {"rolePolicy": {"mode": "hard", "highestTierAllowed": 1}}
    plan = _plan("disagg", "sglang", BIG_P, DENSE_D)
    (old,) = render_kthena(plan, _request(), network_topology=topo)
    assert old["spec"]["template"]["gangSchedule"]["networkTopology"] == topo
    (new,) = render_kthena(plan, _request(), api_group="workload.serving.volcano.sh",
                           network_topology=topo)
    assert new["spec"]["template"]["networkTopology"] == topo


@needs_crds
@pytest.mark.parametrize("pid,plan", PLANS, ids=[p for p, _ in PLANS])
def test_kthena_validates(pid, plan):
    topo = {"rolePolicy": {"mode": "hard", "highestTierAllowed": 1}}
    for obj in render_kthena(plan, _request(), api_group="workload.serving.volcano.sh",
                             network_topology=topo, gang_all_replicas=True):
        assert _validate(obj) == []


def _ranged(engine: Engine, low: int = 1) -> Engine:
    """``engine`` with a replica range from ``low`` to its planned replicas."""
    return engine.model_copy(update={"min_replicas": low})


# (id, plan) with a replica range: one role, both roles of xPyD, a multi-node engine.
RANGED = [
    ("vllm-agg", _plan("agg", "vllm", _ranged(DENSE_AGG))),
    ("sglang-agg", _plan("agg", "sglang", _ranged(DENSE_AGG))),
    ("vllm-disagg-both", _plan("disagg", "vllm", _ranged(DENSE_P), _ranged(DENSE_D))),
    ("sglang-disagg-decode-multinode", _plan("disagg", "sglang", MOE_P, _ranged(MOE_D), model=MOE)),
]


@needs_crds
@pytest.mark.parametrize("pid,plan", RANGED, ids=[p for p, _ in RANGED])
def test_kthena_policy_scales_the_ranged_roles_and_validates(pid, plan):
    serving, policy = render_kthena(plan, _request(), api_group="workload.serving.volcano.sh")
    assert policy["kind"] == "AutoscalingPolicy" and policy["apiVersion"] == serving["apiVersion"]
    target = policy["spec"]["disaggregatedTarget"]
    assert target["targetRef"] == {"apiVersion": serving["apiVersion"], "kind": "ModelServing",
                                   "name": serving["metadata"]["name"]}
    named = dict(zip((r["name"] for r in serving["spec"]["template"]["roles"]), common.engines_in_order(plan)))
    assert set(target["roles"]) == {n for n, e in named.items() if common.scales(e)}
    for name, role in target["roles"].items():
        engine = named[name]
        assert (role["minReplicas"], role["maxReplicas"]) == (engine.min_replicas, engine.replicas)
        assert {m["name"]: m["targetValue"] for m in role["metrics"]} == {"running": engine.max_batch, "waiting": 1}
        assert set(role["metricSources"]) == {"running", "waiting"}  # the webhook wants a source per metric
    for name, engine in named.items():  # SGLang publishes its gauges only when asked, on scaled roles
        role = next(r for r in serving["spec"]["template"]["roles"] if r["name"] == name)
        args = role["entryTemplate"]["spec"]["containers"][0]["args"]
        assert ("--enable-metrics" in args) == (plan.backend == "sglang" and common.scales(engine))
    assert _validate(serving) == [] and _validate(policy) == []


@needs_crds
def test_kthena_policy_is_checked_against_its_real_schema():
    _serving, policy = render_kthena(RANGED[0][1], _request(), api_group="workload.serving.volcano.sh")
    role = policy["spec"]["disaggregatedTarget"]["roles"]["server"]
    del policy["spec"]["disaggregatedTarget"]["targetRef"]
    role["maxReplicas"] = 0
    role["metricSources"]["running"]["pod"]["uri"] = "metrics"
    errors = "\n".join(_validate(policy))
    assert "disaggregatedTarget.targetRef: required field missing" in errors
    assert "roles.server.maxReplicas" in errors and "metricSources.running.pod.uri" in errors


def test_kthena_keeps_fixed_replicas_where_it_cannot_scale():
    ranged = _plan("agg", "trtllm", _ranged(DENSE_AGG))  # trtllm-serve publishes no request gauges
    assert [o["kind"] for o in render_kthena(ranged, _request(), api_group="workload.serving.volcano.sh")] == [
        "ModelServing"]
    vllm = RANGED[0][1]
    (legacy,) = render_kthena(vllm, _request())  # the seed's group has no autoscaling API
    assert legacy["spec"]["template"]["roles"][0]["replicas"] == DENSE_AGG.replicas
    fixed = _plan("agg", "vllm", DENSE_AGG)
    assert len(render_kthena(fixed, _request(), api_group="workload.serving.volcano.sh")) == 1


# ---------------------------------------------------------------- KubeAI

AGG_PLANS = [(i, p) for i, p in PLANS if p.mode == "agg" and p.engines[0].nodes == 1 and p.backend == "vllm"]


@pytest.mark.parametrize("pid,plan", AGG_PLANS, ids=[p for p, _ in AGG_PLANS])
def test_kubeai_structure(pid, plan):
    (model,) = render_kubeai(plan, _request())
    engine = plan.engines[0]
    spec = model["spec"]
    assert spec["url"] == f"hf://{plan.model}" and spec["engine"] == "VLLM"
    assert spec["features"] == ["TextGeneration"]
    assert spec["resourceProfile"] == f"nvidia-gpu-h100:{engine.gpus}"
    assert spec["replicas"] == spec["minReplicas"] == spec["maxReplicas"] == engine.replicas
    assert f"--tensor-parallel-size={engine.tp}" in spec["args"]
    assert spec["targetRequests"] == min(engine.max_batch, -(-int(plan.predicted.concurrency) // engine.replicas))


@needs_crds
@pytest.mark.parametrize("pid,plan", AGG_PLANS, ids=[p for p, _ in AGG_PLANS])
def test_kubeai_validates(pid, plan):
    for obj in render_kubeai(plan, _request()):
        assert _validate(obj) == []


@needs_crds
def test_kubeai_long_names_are_truncated_to_40():
    plan = _plan("agg", "vllm", DENSE_AGG)
    (model,) = render_kubeai(plan, _request(name="a-very-long-deployment-name-for-qwen3-32b-h100"))
    name = model["metadata"]["name"]
    assert len(name) <= 40 and name == render_kubeai(plan, _request(
        name="a-very-long-deployment-name-for-qwen3-32b-h100"))[0]["metadata"]["name"]
    assert _validate(model) == []


def test_kubeai_rejects_disaggregated_and_multinode_plans():
    with pytest.raises(common.UnsupportedPlan, match="no prefill/decode disaggregation"):
        render_kubeai(_plan("disagg", "vllm", DENSE_P, DENSE_D), _request())
    with pytest.raises(common.UnsupportedPlan, match="one engine per pod"):
        render_kubeai(_plan("agg", "vllm", _engine("aggregated", 16, 1)), _request())
    # KubeAI runs vLLM only: another backend's prediction would not describe what it deploys.
    for backend in ("sglang", "trtllm"):
        with pytest.raises(common.UnsupportedPlan, match=f"KubeAI runs vLLM, not {backend}"):
            render_kubeai(_plan("agg", backend, DENSE_AGG), _request())


def test_kubeai_profiles_default_and_override():
    assert resource_profile("h100_sxm") == "nvidia-gpu-h100"
    assert resource_profile("a100_sxm") == "nvidia-gpu-a100-80gb"
    assert resource_profile("l40s") == "nvidia-gpu-l40s"
    assert resource_profile("h200_sxm") == "nvidia-gpu-h200"
    assert resource_profile("h200_sxm", {"h200_sxm": "gpu-h200-141g"}) == "gpu-h200-141g"
    plan = _plan("agg", "vllm", DENSE_AGG, gpu="h200_sxm")
    (model,) = render_kubeai(plan, _request(), profiles={"h200_sxm": "my-h200"})
    assert model["spec"]["resourceProfile"] == "my-h200:2"


# ---------------------------------------------------------------- AMD GPUs

@pytest.mark.parametrize("gpu,generation", [("mi300x", "mi30x"), ("mi355x", "mi35x")])
def test_amd_gpus_ask_for_amd_devices_and_rocm_images(gpu, generation):
    """On an AMD GPU, pods ask for ``amd.com/gpu`` and run the engine's ROCm build; KubeAI gets an
    ``amd-gpu-`` profile (the chart's own for MI300X)."""
    plan = _plan("agg", "sglang", DENSE_AGG, gpu=gpu)
    (isvc,) = render_ome(plan, _request(gpu=gpu))
    runner = isvc["spec"]["engine"]["runner"]
    assert runner["resources"]["limits"] == {"amd.com/gpu": "2"} == runner["resources"]["requests"]
    assert runner["image"].endswith(f"-rocm700-{generation}")
    (ms,) = render_kthena(plan, _request(gpu=gpu))
    (container,) = ms["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"]
    assert container["resources"]["limits"] == {"amd.com/gpu": "2"}
    assert container["image"] == runner["image"]
    (model,) = render_kubeai(_plan("agg", "vllm", DENSE_AGG, gpu=gpu), _request(gpu=gpu))
    assert model["spec"]["resourceProfile"] == f"amd-gpu-{gpu}:2"
    assert common.image_for(_request(gpu=gpu, image="my/own:1"), "sglang", gpu=gpu) == "my/own:1"
    assert common.gpu_resources(4, "h100_sxm") == {"limits": {"nvidia.com/gpu": "4"},
                                                   "requests": {"nvidia.com/gpu": "4"}}


def test_dynamo_v1beta1_workers_ask_for_amd_devices_on_amd_gpus():
    from planner.manifests.dynamo import render_dgd

    plan = _plan("agg", "vllm", DENSE_AGG, gpu="mi355x")
    dgd = render_dgd(plan, _request(gpu="mi355x", image="registry.example/dynamo-vllm-rocm:1"), api_version="v1beta1")
    workers = [c for c in dgd["spec"]["components"] if c["type"] != "frontend"]
    containers = [w["podTemplate"]["spec"]["containers"][0] for w in workers]
    assert containers and all(c["resources"]["limits"] == {"amd.com/gpu": "2"} for c in containers)
    assert {c["image"] for c in containers} == {"registry.example/dynamo-vllm-rocm:1"}


@pytest.mark.parametrize("api_version", ["v1alpha1", "v1beta1"])
def test_dynamo_on_amd_gpus_needs_the_requests_image(api_version):
    """Dynamo's runtime images are CUDA builds: on an AMD GPU without an image of the request's
    own, the DGD is not rendered (a CUDA image would crash-loop), and the error says what to set."""
    from planner.manifests.dynamo import render_dgd

    plan = _plan("agg", "vllm", DENSE_AGG, gpu="mi300x")
    with pytest.raises(common.UnsupportedPlan, match="workersImage"):
        render_dgd(plan, _request(gpu="mi300x"), api_version=api_version)
    nvidia = render_dgd(_plan("agg", "vllm", DENSE_AGG), _request(), api_version=api_version)
    assert common.DYNAMO_IMAGES["vllm"] in str(nvidia)
