"""Helpers shared by the manifest renderers: names, labels, images and engine arguments.

Everything here is pure. Two runtimes run an engine:

- ``"dynamo"``: the engine is wrapped by Dynamo's worker (``python3 -m dynamo.vllm`` …); the
  operator wires multi-node engines itself, so no ``--nnodes``-style flags are emitted.
- ``"standalone"``: the engine's own OpenAI server (OME, Kthena, KubeAI run it directly).

Parallelism vocabulary (see ``planner.types.Engine``): GPUs per engine = tp × pp × dp, where
``dp`` is attention data-parallelism inside one engine and ``ep`` the expert-parallel degree of
the MoE layers. ``Engine.max_batch`` is engine-wide; vLLM and TRT-LLM take it per attention-DP
rank, SGLang engine-wide. ``Engine.max_num_tokens`` (the prefill chunk) is per attention-DP rank,
as the performance model reads it; vLLM and TRT-LLM take it so, SGLang engine-wide (it splits
``--chunked-prefill-size`` over its DP ranks). Backends spell parallelism differently:

- vLLM: ``--tensor-parallel-size tp`` per data-parallel rank, ``--data-parallel-size dp``,
  ``--enable-expert-parallel`` (vLLM then shards experts over tp × dp GPUs).
- SGLang: ``--tp-size`` counts every GPU of a pipeline stage (tp × dp) and
  ``--dp-size dp --enable-dp-attention`` splits attention; ``--ep-size ep``.
- TRT-LLM: ``tensor_parallel_size`` is likewise tp × dp with ``enable_attention_dp``;
  ``moe_expert_parallel_size`` = ep.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Literal

from planner.types import Backend, Engine, Plan, PlanRequest

Runtime = Literal["dynamo", "standalone"]
ArgStyle = Literal["separate", "equals"]

MANAGED_BY = "slaplan"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_RESOURCES = {"nvidia": GPU_RESOURCE, "amd": "amd.com/gpu"}  # device plugins' resource names
DEFAULT_PORT = 8000

# Container images. Dynamo runtime images bundle the engine and Dynamo's worker; standalone
# images are each engine's own release image.
DYNAMO_VERSION = "0.6.1"
DYNAMO_IMAGES: dict[str, str] = {
    "vllm": f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{DYNAMO_VERSION}",
    "sglang": f"nvcr.io/nvidia/ai-dynamo/sglang-runtime:{DYNAMO_VERSION}",
    "trtllm": f"nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:{DYNAMO_VERSION}",
}
STANDALONE_IMAGES: dict[str, str] = {
    "vllm": "docker.io/vllm/vllm-openai:v0.11.0",
    "sglang": "docker.io/lmsysorg/sglang:v0.5.5.post3",
    "trtllm": "nvcr.io/nvidia/tensorrt-llm/release:1.0.0",
}
# ROCm builds for AMD GPUs, per CDNA generation where the engine ships one per generation.
ROCM_IMAGES: dict[str, dict[str, str]] = {
    "vllm": {"cdna3": "docker.io/rocm/vllm:rocm7.0.0_vllm_0.11.2_20251210",
             "cdna4": "docker.io/rocm/vllm:rocm7.0.0_vllm_0.11.2_20251210"},
    "sglang": {"cdna3": "docker.io/lmsysorg/sglang:v0.5.7-rocm700-mi30x",
               "cdna4": "docker.io/lmsysorg/sglang:v0.5.7-rocm700-mi35x"},
}

# KV transfer between prefill and decode engines (NIXL for both vLLM and SGLang;
# TRT-LLM's cache_transceiver_config picks its own default backend).
VLLM_KV_TRANSFER = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
TRTLLM_CACHE_TRANSCEIVER = {"cache_transceiver_config": {"backend": "DEFAULT"}}
# An aggregated attention-DP engine holds prompts until its ranks prefill together (at most
# 50 + 10 iterations), as the performance model assumes (parameter dp_hold_iters_trtllm).
TRTLLM_DP_BALANCE = {"attention_dp_config": {"enable_balance": True, "timeout_iters": 50, "batching_wait_iters": 10}}


class UnsupportedPlan(ValueError):
    """The target cannot express this plan (e.g. disaggregation on KubeAI)."""


# --------------------------------------------------------------------------- names

_DNS_BAD = re.compile(r"[^a-z0-9-]+")


def short_hash(text: str, length: int = 6) -> str:
    """A stable hex digest prefix of ``text`` (for deterministic truncation)."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def dns_name(text: str, max_len: int = 63) -> str:
    """``text`` as a DNS-1123 label of at most ``max_len`` characters.

    Lowercases, turns every run of other characters into ``-`` and trims dashes. Names that
    would exceed ``max_len`` are cut and suffixed with ``-<hash of the full name>`` so that
    different long names stay different and the result is deterministic.
    """
    base = _DNS_BAD.sub("-", text.lower()).strip("-") or "x"
    if len(base) <= max_len:
        return base
    suffix = short_hash(text)
    head = base[: max_len - len(suffix) - 1].rstrip("-")
    return f"{head}-{suffix}" if head else suffix[:max_len]


def model_slug(model: str, max_len: int = 63) -> str:
    """A DNS-1123 name derived from a model id: ``meta-llama/Llama-3.1-8B`` → ``llama-3-1-8b``."""
    return dns_name(model.rsplit("/", 1)[-1], max_len)


def deployment_name(request: PlanRequest, max_len: int = 63) -> str:
    """The deployed resource's name: ``deployment_name`` override, else the request's name."""
    return dns_name(request.deployment_name or request.name, max_len)


def deployment_namespace(request: PlanRequest) -> str:
    return request.deployment_namespace or request.namespace


def labels(request: PlanRequest, **extra: str) -> dict[str, str]:
    """Labels for every rendered object: ours, then the request's own (theirs win)."""
    out = {
        "app.kubernetes.io/name": deployment_name(request),
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }
    out.update(extra)
    out.update(request.labels)
    return out


def annotations(plan: Plan, request: PlanRequest, **extra: str) -> dict[str, str]:
    """Annotations recording what the plan decided, plus the request's own."""
    out = {
        "slaplan.io/plan": plan_summary(plan),
        "slaplan.io/model": plan.model,
        "slaplan.io/gpu": plan.gpu,
    }
    out.update(extra)
    out.update(request.annotations)
    return out


def plan_summary(plan: Plan) -> str:
    """A one-line summary such as ``disagg sglang 2P(tp4) 1D(tp2dp4ep8)``."""
    parts = []
    for e in plan.engines:
        tag = {"aggregated": "A", "prefill": "P", "decode": "D"}[e.role]
        parts.append(f"{e.replicas}{tag}({e.tag})")
    return " ".join([plan.mode, plan.backend, *parts])


def metadata(name: str, namespace: str, plan: Plan, request: PlanRequest, **extra_annotations: str) -> dict:
    """An object's ``metadata`` block."""
    return {
        "name": name,
        "namespace": namespace,
        "labels": labels(request),
        "annotations": annotations(plan, request, **extra_annotations),
    }


def image_for(request: PlanRequest, backend: Backend, runtime: Runtime = "standalone", gpu: str | None = None) -> str:
    """The request's image if given, else the default for the backend and runtime (the engine's
    ROCm build when a standalone engine runs on an AMD ``gpu``). Dynamo publishes CUDA runtime
    images only, so a Dynamo deployment on an AMD ``gpu`` needs the request's image."""
    if request.image:
        return request.image
    if gpu is not None and gpu_vendor(gpu) == "amd":
        if runtime == "dynamo":
            raise UnsupportedPlan(f"NVIDIA Dynamo publishes CUDA runtime images only, so there is no default {backend} "
                                  f"worker image for {gpu}; set deploymentOverrides.workersImage to one built for ROCm")
        from profiler.model import get_gpu

        rocm = ROCM_IMAGES.get(backend, {}).get(get_gpu(gpu).generation)
        if rocm is None:
            raise UnsupportedPlan(f"no default {backend} image for {gpu}; set the image (deploymentOverrides.workersImage)")
        return rocm
    return (DYNAMO_IMAGES if runtime == "dynamo" else STANDALONE_IMAGES)[backend]


def engines_in_order(plan: Plan) -> list[Engine]:
    """The plan's engines, validated against its mode: [aggregated] (one per shape of a mix) or
    [prefill, decode]."""
    if plan.mode == "agg":
        agg = [e for e in plan.engines if e.role == "aggregated"]
        if not agg or len(agg) != len(plan.engines):
            raise UnsupportedPlan("an aggregated plan has 'aggregated' engines only, at least one")
        return agg
    prefill, decode = plan.role("prefill"), plan.role("decode")
    if prefill is None or decode is None:
        raise UnsupportedPlan("disaggregated plan needs both a 'prefill' and a 'decode' engine")
    return [prefill, decode]


def scales(engine: Engine) -> bool:
    """Whether ``engine``'s replicas have a range to scale in (a budget filled with no load stated)."""
    return engine.min_replicas is not None and engine.min_replicas < engine.replicas


def one_shape(plan: Plan, target: str, why: str) -> None:
    """Raise ``UnsupportedPlan`` (saying ``why`` ``target`` cannot) for a mix of engine shapes."""
    if plan.parts:
        raise UnsupportedPlan(f"{target} {why}; this plan mixes {plan.shape()}")


# --------------------------------------------------------------------------- commands

def worker_command(backend: Backend) -> list[str]:
    """Command of a Dynamo worker for ``backend``: ``python3 -m dynamo.<backend>``."""
    return ["python3", "-m", f"dynamo.{backend}"]


def server_command(backend: Backend) -> list[str]:
    """Command of the engine's own OpenAI-compatible server (standalone runtime)."""
    return {
        "vllm": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        "sglang": ["python3", "-m", "sglang.launch_server"],
        "trtllm": ["trtllm-serve"],
    }[backend]


def model_args(backend: Backend, model_path: str, served_name: str | None = None,
               runtime: Runtime = "dynamo") -> list[str]:
    """Flags naming the model to load (and the name it is served under)."""
    if backend == "trtllm" and runtime == "standalone":
        head = [model_path]  # trtllm-serve takes the model positionally
    elif backend == "vllm":
        head = ["--model", model_path]
    else:
        head = ["--model-path", model_path]
    if served_name:
        flag = "--served_model_name" if backend == "trtllm" and runtime == "standalone" else "--served-model-name"
        head += [flag, served_name]
    return head


def server_args(backend: Backend, port: int = DEFAULT_PORT) -> list[str]:
    """Host/port flags of a standalone server."""
    return ["--host", "0.0.0.0", "--port", str(port)]


# --------------------------------------------------------------------------- engine arguments

Flag = tuple[str, str | None]

# KV-cache dtype as each backend spells it. "auto" is the model's activation dtype (bf16 for the
# bf16 checkpoints it is written for); an fp8 checkpoint's "auto" would be bf16 in vLLM, so fp8
# is always spelled out.
_KV_DTYPE_FLAGS: dict[Backend, dict[str, str]] = {
    "vllm": {"bf16": "auto", "fp8": "fp8"},  # --kv-cache-dtype (vLLM engine arguments)
    "sglang": {"bf16": "auto", "fp8": "fp8_e4m3"},  # --kv-cache-dtype (SGLang server arguments)
    "trtllm": {"bf16": "auto", "fp8": "fp8"},  # kv_cache_config.dtype (TRT-LLM LLM API KvCacheConfig)
}
# Where a standalone trtllm-serve reads the LLM API options that have no flag of their own.
TRTLLM_OPTIONS_PATH = "/tmp/slaplan/llm-api-options.yaml"
TRTLLM_OPTIONS_ENV = "SLAPLAN_LLM_API_OPTIONS"


def _per_rank(total: int, dp: int) -> int:
    """Split an engine-wide limit over its attention-DP ranks (vLLM and TRT-LLM schedule per rank)."""
    return -(-total // dp)


def _kv_dtype(plan: Plan) -> str:
    spelled = _KV_DTYPE_FLAGS[plan.backend].get(plan.kv_dtype)
    if spelled is None:
        raise UnsupportedPlan(f"{plan.backend} has no KV-cache dtype {plan.kv_dtype}")
    return spelled


def _vllm_flags(plan: Plan, e: Engine, runtime: Runtime) -> list[Flag]:
    # vLLM engine arguments: TP inside each data-parallel rank; --enable-expert-parallel shards
    # experts over tp × dp GPUs; --max-num-seqs and --max-num-batched-tokens are per DP rank.
    flags: list[Flag] = [("--tensor-parallel-size", str(e.tp))]
    if e.pp > 1:
        flags.append(("--pipeline-parallel-size", str(e.pp)))
    if e.dp > 1:
        flags.append(("--data-parallel-size", str(e.dp)))
    if e.ep > 1:
        flags.append(("--enable-expert-parallel", None))
    flags.append(("--max-num-seqs", str(_per_rank(e.max_batch, e.dp))))
    if e.max_num_tokens:
        flags.append(("--max-num-batched-tokens", str(e.max_num_tokens)))
    flags += [("--kv-cache-dtype", _kv_dtype(plan)), ("--gpu-memory-utilization", f"{plan.memory_fraction:g}")]
    if e.role != "aggregated":
        if runtime == "dynamo":
            flags.append(("--disaggregation-mode", e.role))
        flags.append(("--kv-transfer-config", json.dumps(VLLM_KV_TRANSFER, separators=(",", ":"))))
    return flags


def _sglang_flags(plan: Plan, e: Engine, runtime: Runtime) -> list[Flag]:
    # SGLang server arguments: --tp-size counts a stage's GPUs (tp × dp), split into --dp-size
    # attention ranks by --enable-dp-attention; --max-running-requests and --chunked-prefill-size
    # are engine-wide.
    flags: list[Flag] = [("--tp-size", str(e.tp * e.dp))]
    if e.pp > 1:
        flags.append(("--pp-size", str(e.pp)))
    if e.dp > 1:
        flags += [("--dp-size", str(e.dp)), ("--enable-dp-attention", None)]
    if e.ep > 1:
        flags.append(("--ep-size", str(e.ep)))
    flags.append(("--max-running-requests", str(e.max_batch)))
    if e.max_num_tokens:
        flags.append(("--chunked-prefill-size", str(e.max_num_tokens * e.dp)))
    flags += [("--kv-cache-dtype", _kv_dtype(plan)), ("--mem-fraction-static", f"{plan.memory_fraction:g}")]
    if e.role != "aggregated":
        flags += [("--disaggregation-mode", e.role), ("--disaggregation-transfer-backend", "nixl")]
    return flags


def trtllm_options(plan: Plan, e: Engine) -> dict:
    """The TRT-LLM LLM API options of one engine that have no flag of their own: the KV cache's
    dtype and memory share (``kv_cache_config``), chunked prefill (prompts longer than
    ``max_num_tokens`` are split, as the model assumes), attention data-parallelism
    (``enable_attention_dp``: every one of the engine's tp × dp GPUs an attention rank) with its
    balancing, and the disaggregated KV transfer."""
    options: dict = {"kv_cache_config": {"dtype": _kv_dtype(plan), "free_gpu_memory_fraction": plan.memory_fraction},
                     "enable_chunked_prefill": True}
    if e.dp > 1:
        options["enable_attention_dp"] = True
        if e.role == "aggregated":
            options.update(TRTLLM_DP_BALANCE)
    if e.role != "aggregated":
        options.update(TRTLLM_CACHE_TRANSCEIVER)
    return options


def _trtllm_flags(plan: Plan, e: Engine, runtime: Runtime) -> list[Flag]:
    # TRT-LLM: attention is all TP or all DP (the planner offers no mix); tensor_parallel_size
    # counts every GPU of a stage and max_batch_size is per attention rank.
    if e.tp > 1 and e.dp > 1:
        raise UnsupportedPlan(f"TRT-LLM cannot run attention TP{e.tp} × DP{e.dp}: attention is tensor- or "
                              "data-parallel, not both")
    options = json.dumps(trtllm_options(plan, e), separators=(",", ":"))
    if runtime == "standalone":  # trtllm-serve flags; the rest in its --extra_llm_api_options file
        if e.role != "aggregated":
            raise UnsupportedPlan(
                "TRT-LLM prefill/decode disaggregation outside Dynamo needs a disaggregated-server "
                "configuration; render this plan for Dynamo or use vLLM/SGLang")
        flags: list[Flag] = [("--tp_size", str(e.tp * e.dp)), ("--pp_size", str(e.pp))]
        if e.ep > 1:
            flags.append(("--ep_size", str(e.ep)))
        flags.append(("--max_batch_size", str(_per_rank(e.max_batch, e.dp))))
        if e.max_num_tokens:
            flags.append(("--max_num_tokens", str(e.max_num_tokens)))
        return flags + [("--extra_llm_api_options", TRTLLM_OPTIONS_PATH)]
    # Dynamo's TRT-LLM worker (python3 -m dynamo.trtllm) flags; the rest as --override-engine-args.
    flags = [("--tensor-parallel-size", str(e.tp * e.dp))]
    if e.pp > 1:
        flags.append(("--pipeline-parallel-size", str(e.pp)))
    if e.ep > 1:
        flags.append(("--expert-parallel-size", str(e.ep)))
    if e.dp > 1:
        flags.append(("--enable-attention-dp", None))
    flags.append(("--max-batch-size", str(_per_rank(e.max_batch, e.dp))))
    if e.max_num_tokens:
        flags.append(("--max-num-tokens", str(e.max_num_tokens)))
    if e.role != "aggregated":
        flags.append(("--disaggregation-mode", e.role))
    return flags + [("--override-engine-args", options)]


_FLAG_BUILDERS = {"vllm": _vllm_flags, "sglang": _sglang_flags, "trtllm": _trtllm_flags}


def engine_flags(plan: Plan, engine: Engine, *, runtime: Runtime = "dynamo") -> list[Flag]:
    """(flag, value-or-None) pairs for one engine: parallelism, limits, KV-cache dtype, memory
    share, disaggregation role.

    The model to load is not included (see ``model_args``), nor multi-node wiring.
    Raises ``UnsupportedPlan`` when the backend cannot express the engine in ``runtime``.
    """
    return _FLAG_BUILDERS[plan.backend](plan, engine, runtime)


def engine_args(plan: Plan, engine: Engine, *, runtime: Runtime = "dynamo",
                style: ArgStyle = "separate") -> list[str]:
    """Command-line arguments of one engine of ``plan`` for its backend.

    ``style="separate"`` gives ``["--tensor-parallel-size", "4"]`` (container args);
    ``style="equals"`` gives ``["--tensor-parallel-size=4"]`` (KubeAI's convention).
    """
    out: list[str] = []
    for flag, value in engine_flags(plan, engine, runtime=runtime):
        if value is None:
            out.append(flag)
        elif style == "equals":
            out.append(f"{flag}={value}")
        else:
            out += [flag, value]
    return out


def standalone_launch(plan: Plan, engine: Engine, args: list[str]) -> tuple[list[str], list[str], list[dict]]:
    """``(command, args, env)`` of a standalone engine container whose arguments are ``args``.

    trtllm-serve reads the LLM API options it has no flag for from a file; the container writes
    it from an environment variable before starting the server, so the manifest stays one object.
    """
    if plan.backend != "trtllm":
        return server_command(plan.backend), args, []
    options = json.dumps(trtllm_options(plan, engine), separators=(",", ":"))
    script = (f'mkdir -p {TRTLLM_OPTIONS_PATH.rsplit("/", 1)[0]} && printf %s "${TRTLLM_OPTIONS_ENV}" > '
              f'{TRTLLM_OPTIONS_PATH} && exec "$@"')
    return ["/bin/sh", "-c", script, "sh", *server_command(plan.backend)], args, [
        {"name": TRTLLM_OPTIONS_ENV, "value": options}]


def multinode_args(backend: Backend, engine: Engine, *, leader: str, nnodes: str, rank: str,
                   worker: bool = False, port: int = 5757) -> list[str]:
    """Standalone multi-node wiring flags of one pod of ``engine``; arguments may be ``$(ENV)``
    references.

    ``leader`` is the leader pod's address, ``nnodes`` the pods per engine, ``rank`` this pod's
    index (0 = leader), ``worker`` true for non-leader pods. SGLang: ``--dist-init-addr``,
    ``--nnodes``, ``--node-rank``. vLLM: an engine whose data-parallel ranks spread over its pods
    (each rank's TP × PP within a pod) uses its data-parallel flags — ``--data-parallel-size-local``
    ranks a pod, ``--data-parallel-address`` / ``--data-parallel-rpc-port`` of the leader, and on
    the other pod ``--data-parallel-start-rank`` with ``--headless``; a model-parallel engine
    uses ``--nnodes``, ``--node-rank``, ``--master-addr``, ``--master-port``.
    """
    if backend == "sglang":
        return ["--dist-init-addr", f"{leader}:{port}", "--nnodes", nnodes, "--node-rank", rank]
    if backend != "vllm":
        raise UnsupportedPlan("multi-node TRT-LLM engines outside Dynamo need MPI wiring; render for Dynamo")
    if engine.dp > 1 and engine.tp * engine.pp <= engine.gpus_per_pod and engine.dp % engine.nodes == 0:
        local = engine.dp // engine.nodes
        if engine.nodes != 2:  # the start rank is local × the pod's index, which an argument cannot compute
            raise UnsupportedPlan(f"vLLM data-parallel engines over {engine.nodes} pods need a start rank per pod; "
                                  "render for Dynamo")
        args = ["--data-parallel-size-local", str(local), "--data-parallel-address", leader,
                "--data-parallel-rpc-port", str(port)]
        return args + (["--data-parallel-start-rank", str(local), "--headless"] if worker else [])
    args = ["--nnodes", nnodes, "--node-rank", rank, "--master-addr", leader, "--master-port", str(port)]
    return args + (["--headless"] if worker else [])


def gpu_vendor(gpu: str) -> str:
    """``amd`` or ``nvidia`` (also for a GPU the catalog does not know)."""
    from profiler.model import UnknownName
    from profiler.model import get_gpu

    try:
        return get_gpu(gpu).vendor
    except UnknownName:
        return "nvidia"


def gpu_resource(gpu: str) -> str:
    """The extended resource a pod asks for to get ``gpu`` GPUs (``amd.com/gpu``, ``nvidia.com/gpu``)."""
    return GPU_RESOURCES[gpu_vendor(gpu)]


def gpu_resources(gpus: int, gpu: str) -> dict:
    """Container ``resources`` asking for ``gpus`` GPUs of type ``gpu`` (requests = limits)."""
    name = gpu_resource(gpu)
    return {"limits": {name: str(gpus)}, "requests": {name: str(gpus)}}
