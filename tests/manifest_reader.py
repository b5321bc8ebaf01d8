"""Read rendered manifests back into the engine configuration they deploy.

Written for the round-trip test from the engines' and targets' documented fields, not from the
renderers: nothing here imports ``planner``. ``read_deployment`` takes the objects of one target
(a DynamoGraphDeployment ``v1alpha1``/``v1beta1``, an OME InferenceService, a Kthena ModelServing
or a KubeAI Model) and answers what an operator would find by reading them: the checkpoint, the
backend, and per engine role its parallelism, replicas (and the fewest an autoscaler may shrink
them to), GPUs, limits, KV-cache dtype and memory share.

Replica ranges, where each target writes them: a DGD ``v1alpha1`` worker's ``autoscaling
{enabled, minReplicas, maxReplicas}``; a DGD ``v1beta1`` worker's ``scalingAdapter`` with its
``[min, max]`` in the DGD's ``slaplan.io/replica-range`` annotation; an OME component's
``minReplicas``/``maxReplicas``; a KubeAI Model's ``minReplicas``/``maxReplicas``; a Kthena
``AutoscalingPolicy`` whose ``disaggregatedTarget`` names the ModelServing, per role. The upper end
must be the replicas the manifest starts with (the planned count).

Units: ``max_running`` counts sequences of one whole engine (all its attention-DP ranks);
``max_prompt_tokens`` counts prompt tokens per engine step of one attention-DP rank, as the
performance model reads it.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from profiler.model.model_catalog import resolve_model

__all__ = ["Deployed", "DeployedEngine", "read_deployment"]

Role = Literal["aggregated", "prefill", "decode"]

GPU_ANNOTATION = "slaplan.io/gpu"  # every renderer records the GPU type here
REPLICA_RANGE_ANNOTATION = "slaplan.io/replica-range"  # DGD v1beta1: {component: [min, max]} of scaled workers
# The environment variable a standalone trtllm-serve container writes to its
# ``--extra_llm_api_options`` file before starting the server.
TRTLLM_OPTIONS_ENV = "SLAPLAN_LLM_API_OPTIONS"


@dataclass(frozen=True)
class DeployedEngine:
    """One engine role as a manifest deploys it.

    GPUs per engine come from the pods (per-pod GPU resource × pods per engine); ``tp`` × ``pp``
    × ``dp`` from the engine's flags, so a test can check they agree. ``None`` means the manifest
    leaves the setting to the engine's default.
    """

    role: Role
    tp: int
    pp: int
    dp: int  # attention data-parallel ranks inside one engine
    ep: int  # expert-parallel degree of the MoE layers (1: experts tensor-parallel)
    replicas: int  # engines of this role (the planned count, and the most an autoscaler may run)
    min_replicas: int  # the fewest engines an autoscaler may shrink the role to (= replicas: fixed)
    gpus: int  # GPUs one engine gets from its pods
    max_running: int | None  # running sequences per engine
    max_prompt_tokens: int | None  # prompt tokens per step per attention-DP rank
    kv_dtype: str  # "bf16" or "fp8"
    memory_fraction: float | None


@dataclass(frozen=True)
class Deployed:
    """What a target's manifests deploy: the checkpoint, the served name, the GPU type, the
    backend and the weights' precision (the checkpoint id implies it), and its engines."""

    model: str
    served_name: str
    gpu: str
    backend: str
    precision: str
    engines: tuple[DeployedEngine, ...]

    @property
    def mode(self) -> Literal["agg", "disagg"]:
        """``agg`` for aggregated engines (of one shape, or several side by side), ``disagg`` for
        prefill + decode."""
        return "agg" if all(e.role == "aggregated" for e in self.engines) else "disagg"

    def role(self, role: Role) -> DeployedEngine:
        """The engine of ``role`` (KeyError when the manifests deploy none)."""
        for engine in self.engines:
            if engine.role == role:
                return engine
        raise KeyError(role)


# --------------------------------------------------------------------------- command lines

@dataclass(frozen=True)
class _Pod:
    """One engine pod's main container, read from whichever target wrapped it."""

    argv: tuple[str, ...]  # command + args
    env: dict[str, str]
    gpus: int


@dataclass(frozen=True)
class _Unit:
    """One engine role of a target: its role (when the target's structure says), replicas,
    pods per engine, the leader pod and (for a standalone engine spanning nodes) a worker pod."""

    role: Role | None
    replicas: int
    pods: int
    pod: _Pod
    worker: _Pod | None = None
    min_replicas: int | None = None  # None: fixed at ``replicas``


# Flags taking no value (store_true / negatable booleans) in the engines' CLIs.
_BOOLEAN_FLAGS = frozenset({
    "--enable-expert-parallel",  # vLLM EngineArgs
    "--headless",  # vLLM multi-node worker
    "--enable-dp-attention",  # SGLang ServerArgs
    "--enable-attention-dp", "--no-enable-attention-dp",  # Dynamo TRT-LLM worker
    "--trust-remote-code", "--trust_remote_code",
})


def _flags(tokens: list[str]) -> tuple[dict[str, str | None], list[str]]:
    """``--flag value``, ``--flag=value`` (KubeAI's style) and bare boolean flags as a mapping
    (the last occurrence wins, as argparse does), and the positional arguments."""
    flags: dict[str, str | None] = {}
    positional: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("-") or token == "-":
            positional.append(token)
        elif "=" in token:
            name, value = token.split("=", 1)
            flags[name] = value
        elif token in _BOOLEAN_FLAGS or i + 1 == len(tokens) or tokens[i + 1].startswith("--"):
            flags[token] = None
        else:
            flags[token] = tokens[i + 1]
            i += 1
        i += 1
    return flags, positional


def _launch(argv: tuple[str, ...]) -> tuple[str, str, list[str], list[str]]:
    """(backend, runtime, engine arguments, what precedes the launch) of a container's command line.

    Recognizes ``python3 -m dynamo.<backend>`` (runtime ``dynamo``), ``python3 -m
    vllm.entrypoints.openai.api_server`` / ``vllm serve``, ``python3 -m sglang.launch_server``
    and ``trtllm-serve [serve]`` (runtime ``standalone``), also behind a ``sh -c '… exec "$@"'``
    wrapper whose ``$@`` is the server's command.
    """
    tokens = list(argv)
    for i, token in enumerate(tokens):
        module = tokens[i + 1] if token == "-m" and i + 1 < len(tokens) else None
        if module in ("dynamo.vllm", "dynamo.sglang", "dynamo.trtllm"):
            return module.split(".")[1], "dynamo", tokens[i + 2:], tokens[:i]
        if module is not None and module.startswith("vllm.entrypoints"):
            return "vllm", "standalone", tokens[i + 2:], tokens[:i]
        if module == "sglang.launch_server":
            return "sglang", "standalone", tokens[i + 2:], tokens[:i]
        if token.rsplit("/", 1)[-1] == "vllm" and i + 1 < len(tokens) and tokens[i + 1] == "serve":
            return "vllm", "standalone", tokens[i + 2:], tokens[:i]
        if token.rsplit("/", 1)[-1] == "trtllm-serve":
            rest = tokens[i + 1:]
            return "trtllm", "standalone", rest[1:] if rest[:1] == ["serve"] else rest, tokens[:i]
    raise ValueError(f"no engine launch recognized in {shlex.join(argv)!r}")


def _int(flags: dict[str, str | None], *names: str, default: int | None = None) -> int | None:
    """The integer value of the first of ``names`` present (aliases of one flag)."""
    for name in names:
        if name in flags:
            value = flags[name]
            if value is None:
                raise ValueError(f"{name} needs a value")
            return int(value)
    return default


def _float(flags: dict[str, str | None], name: str) -> float | None:
    value = flags.get(name)
    return None if value is None else float(value)


# KV-cache dtype spellings → the performance model's names. "auto" is the model's activation
# dtype (bf16 for the checkpoints served here); an absent flag means "auto".
_KV_DTYPES = {"auto": "bf16", "bf16": "bf16", "bfloat16": "bf16", "fp8": "fp8", "fp8_e4m3": "fp8"}


def _kv_dtype(spelled: str | None) -> str:
    if spelled is None:
        return "bf16"
    try:
        return _KV_DTYPES[spelled.lower()]
    except KeyError:
        raise ValueError(f"KV-cache dtype {spelled!r} is not one the performance model knows") from None


@dataclass(frozen=True)
class _EngineArgs:
    """What one engine's command line sets (the role only when a flag names it)."""

    model: str | None
    served_name: str | None
    role: Role | None
    tp: int
    pp: int
    dp: int
    ep: int
    max_running: int | None
    max_prompt_tokens: int | None
    kv_dtype: str
    memory_fraction: float | None


def _role_flag(flags: dict[str, str | None]) -> Role | None:
    """``--disaggregation-mode prefill|decode`` (vLLM and SGLang under Dynamo, SGLang
    standalone, Dynamo's TRT-LLM worker, whose aggregated mode is ``prefill_and_decode``)."""
    mode = flags.get("--disaggregation-mode")
    if mode in (None, "null", "prefill_and_decode"):
        return None
    if mode not in ("prefill", "decode"):
        raise ValueError(f"unknown --disaggregation-mode {mode!r}")
    return mode


def _vllm(flags: dict[str, str | None], positional: list[str]) -> _EngineArgs:
    """vLLM engine arguments (``vllm serve`` / the OpenAI api_server / Dynamo's vLLM worker)."""
    tp = _int(flags, "--tensor-parallel-size", "-tp", default=1)  # TP inside each DP rank
    dp = _int(flags, "--data-parallel-size", "-dp", default=1)  # attention data-parallel ranks
    per_rank = _int(flags, "--max-num-seqs")  # running sequences per DP rank
    return _EngineArgs(
        model=flags.get("--model") or (positional[0] if positional else None),  # --model, or `vllm serve MODEL`
        served_name=flags.get("--served-model-name"),  # --served-model-name
        role=_role_flag(flags),
        tp=tp,
        pp=_int(flags, "--pipeline-parallel-size", "-pp", default=1),  # --pipeline-parallel-size
        dp=dp,
        ep=tp * dp if "--enable-expert-parallel" in flags else 1,  # experts sharded over tp × dp GPUs
        max_running=None if per_rank is None else per_rank * dp,
        max_prompt_tokens=_int(flags, "--max-num-batched-tokens"),  # per DP rank (each rank its own scheduler)
        kv_dtype=_kv_dtype(flags.get("--kv-cache-dtype")),  # --kv-cache-dtype auto|fp8|fp8_e4m3|…
        memory_fraction=_float(flags, "--gpu-memory-utilization"),  # --gpu-memory-utilization
    )


def _sglang(flags: dict[str, str | None]) -> _EngineArgs:
    """SGLang server arguments (``sglang.launch_server`` / Dynamo's SGLang worker)."""
    stage_gpus = _int(flags, "--tp-size", "--tp", default=1)  # every GPU of a pipeline stage
    dp = _int(flags, "--dp-size", "--dp", default=1)
    if dp > 1 and "--enable-dp-attention" not in flags:
        raise ValueError("--dp-size without --enable-dp-attention runs separate engines, not one")
    if stage_gpus % dp:
        raise ValueError(f"--tp-size {stage_gpus} does not split into --dp-size {dp} attention ranks")
    chunk = _int(flags, "--chunked-prefill-size")  # engine-wide, split over the DP ranks
    return _EngineArgs(
        model=flags.get("--model-path") or flags.get("--model"),  # --model-path (alias --model)
        served_name=flags.get("--served-model-name"),  # --served-model-name
        role=_role_flag(flags),
        tp=stage_gpus // dp,  # --enable-dp-attention: attention TP = tp-size / dp-size
        pp=_int(flags, "--pp-size", "--pp", default=1),  # --pp-size
        dp=dp,
        ep=_int(flags, "--ep-size", "--ep", default=1),  # --ep-size
        max_running=_int(flags, "--max-running-requests"),  # engine-wide
        max_prompt_tokens=None if chunk is None else chunk // dp,
        kv_dtype=_kv_dtype(flags.get("--kv-cache-dtype")),  # --kv-cache-dtype auto|fp8_e4m3|fp8_e5m2
        memory_fraction=_float(flags, "--mem-fraction-static"),  # --mem-fraction-static
    )


def _trtllm_options(flags: dict[str, str | None], env: dict[str, str], runtime: str,
                    wrapper: list[str]) -> dict[str, Any]:
    """The TRT-LLM LLM API options set outside the flags: Dynamo's ``--override-engine-args``
    (a JSON object), or the file a standalone ``trtllm-serve --extra_llm_api_options FILE``
    reads, which the container's ``wrapper`` script writes from an environment variable."""
    if runtime == "dynamo":
        if flags.get("--extra-engine-args"):
            raise ValueError("--extra-engine-args names a file the manifest does not hold")
        text = flags.get("--override-engine-args")
        return json.loads(text) if text else {}
    if "--extra_llm_api_options" not in flags:
        return {}
    path = flags["--extra_llm_api_options"]
    script = " ".join(wrapper)
    if TRTLLM_OPTIONS_ENV not in env or TRTLLM_OPTIONS_ENV not in script or f"> {path}" not in script:
        raise ValueError(f"--extra_llm_api_options {path} is not written from ${TRTLLM_OPTIONS_ENV} before the "
                         "server starts")
    options = yaml.safe_load(env[TRTLLM_OPTIONS_ENV])  # the file is YAML (JSON is YAML)
    return options or {}


def _trtllm(flags: dict[str, str | None], positional: list[str], env: dict[str, str], runtime: str,
            wrapper: list[str]) -> _EngineArgs:
    """TensorRT-LLM: Dynamo's worker flags or ``trtllm-serve``'s, then the LLM API options
    (which override them, as both runtimes merge the options over the flags)."""
    options = _trtllm_options(flags, env, runtime, wrapper)
    kv_config = options.get("kv_cache_config") or {}
    if runtime == "dynamo":
        size = _int(flags, "--tensor-parallel-size", default=1)  # --tensor-parallel-size
        pp = _int(flags, "--pipeline-parallel-size", default=1)  # --pipeline-parallel-size
        ep = _int(flags, "--expert-parallel-size")  # --expert-parallel-size
        per_rank = _int(flags, "--max-batch-size")  # --max-batch-size, per attention rank
        tokens = _int(flags, "--max-num-tokens")  # --max-num-tokens, per attention rank
        attention_dp = "--enable-attention-dp" in flags  # --enable-attention-dp (negatable)
        fraction = _float(flags, "--free-gpu-memory-fraction")  # --free-gpu-memory-fraction
        model = flags.get("--model-path") or flags.get("--model")  # --model (older --model-path)
        served = flags.get("--served-model-name")  # --served-model-name
    else:
        size = _int(flags, "--tp_size", default=1)  # trtllm-serve --tp_size
        pp = _int(flags, "--pp_size", default=1)  # --pp_size
        ep = _int(flags, "--ep_size")  # --ep_size
        per_rank = _int(flags, "--max_batch_size")  # --max_batch_size, per attention rank
        tokens = _int(flags, "--max_num_tokens")  # --max_num_tokens, per attention rank
        attention_dp = False  # no flag: enable_attention_dp in the options file
        fraction = _float(flags, "--kv_cache_free_gpu_memory_fraction")  # --kv_cache_free_gpu_memory_fraction
        model = positional[0] if positional else None  # trtllm-serve MODEL
        served = flags.get("--served_model_name")  # --served_model_name
    # LLM API options (TorchLlmArgs): tensor_parallel_size, pipeline_parallel_size,
    # moe_expert_parallel_size, max_batch_size, max_num_tokens, enable_attention_dp,
    # kv_cache_config.{dtype, free_gpu_memory_fraction}.
    size = options.get("tensor_parallel_size", size)
    pp = options.get("pipeline_parallel_size", pp)
    ep = options.get("moe_expert_parallel_size", ep)
    per_rank = options.get("max_batch_size", per_rank)
    tokens = options.get("max_num_tokens", tokens)
    attention_dp = bool(options.get("enable_attention_dp", attention_dp))
    fraction = kv_config.get("free_gpu_memory_fraction", fraction)
    tp, dp = (1, size) if attention_dp else (size, 1)  # attention is all-DP or all-TP
    return _EngineArgs(
        model=model, served_name=served, role=_role_flag(flags), tp=tp, pp=pp, dp=dp, ep=ep or 1,
        max_running=None if per_rank is None else per_rank * dp,
        max_prompt_tokens=tokens,
        kv_dtype=_kv_dtype(kv_config.get("dtype")),  # kv_cache_config.dtype auto|fp8
        memory_fraction=None if fraction is None else float(fraction),
    )


def _engine_args(pod: _Pod) -> tuple[str, _EngineArgs]:
    """The backend and what the engine's command line sets."""
    backend, runtime, args, wrapper = _launch(pod.argv)
    flags, positional = _flags(args)
    if backend == "vllm":
        return backend, _vllm(flags, positional)
    if backend == "sglang":
        return backend, _sglang(flags)
    return backend, _trtllm(flags, positional, pod.env, runtime, wrapper)


# --------------------------------------------------------------------------- targets

def _range(where: str, replicas: int, low: Any, high: Any) -> int:
    """The lower end of a replica range ``[low, high]`` written for an engine role that starts at
    ``replicas``; ValueError when the range does not hold that count at its top."""
    if not (isinstance(low, int) and isinstance(high, int) and 1 <= low <= high):
        raise ValueError(f"{where}: replica range [{low!r}, {high!r}] is not 1 ≤ min ≤ max")
    if high != replicas:
        raise ValueError(f"{where}: replica range tops at {high}, the manifest starts {replicas} engines")
    return low


def _gpu_count(resources: dict[str, Any] | None) -> int:
    """GPUs a container asks for: its ``<vendor>/gpu`` limit (requests when no limits)."""
    resources = resources or {}
    for section in ("limits", "requests"):
        for name, value in (resources.get(section) or {}).items():
            if name.endswith("/gpu"):
                return int(value)
    return 0


def _pod(container: dict[str, Any], gpus: int | None = None) -> _Pod:
    """A container as a pod: its command line, literal environment and GPUs."""
    env = {e["name"]: e["value"] for e in container.get("env") or [] if "value" in e}
    argv = tuple(container.get("command") or ()) + tuple(container.get("args") or ())
    return _Pod(argv, env, _gpu_count(container.get("resources")) if gpus is None else gpus)


def _dgd_units(obj: dict[str, Any]) -> list[_Unit]:
    """Worker services of a DynamoGraphDeployment.

    v1alpha1: ``spec.services.<name>`` with ``componentType: worker``, ``subComponentType``
    prefill|decode (absent: aggregated), ``replicas``, ``resources.limits.gpu`` (GPUs per pod),
    ``multinode.nodeCount`` (pods per engine) and ``extraPodSpec.mainContainer``.
    v1beta1: ``spec.components[]`` of ``type`` worker|prefill|decode, ``replicas``,
    ``multinode.nodeCount`` and ``podTemplate.spec.containers[main]``.
    """
    spec = obj["spec"]
    units = []
    if obj["apiVersion"].endswith("/v1alpha1"):
        for name, svc in spec["services"].items():
            if svc.get("componentType") != "worker":
                continue
            container = svc["extraPodSpec"]["mainContainer"]
            pod = _pod(container, int(svc.get("resources", {}).get("limits", {}).get("gpu", 0)))
            replicas, hpa = svc.get("replicas", 1), svc.get("autoscaling") or {}
            low = (_range(f"service {name} autoscaling", replicas, hpa.get("minReplicas"), hpa.get("maxReplicas"))
                   if hpa.get("enabled") else None)
            units.append(_Unit(svc.get("subComponentType") or "aggregated", replicas,
                               (svc.get("multinode") or {}).get("nodeCount", 1), pod, min_replicas=low))
        return units
    ranges = json.loads(obj["metadata"].get("annotations", {}).get(REPLICA_RANGE_ANNOTATION, "{}"))
    for comp in spec["components"]:
        if comp.get("type") not in ("worker", "prefill", "decode"):
            continue
        containers = comp["podTemplate"]["spec"]["containers"]
        main = next(c for c in containers if c.get("name") == "main")
        role = "aggregated" if comp["type"] == "worker" else comp["type"]
        replicas, low = comp.get("replicas", 1), None
        if "scalingAdapter" in comp:
            if comp["name"] not in ranges:
                raise ValueError(f"component {comp['name']}: a scalingAdapter with no range in {REPLICA_RANGE_ANNOTATION}")
            low = _range(f"component {comp['name']}", replicas, *ranges.pop(comp["name"]))
        units.append(_Unit(role, replicas, (comp.get("multinode") or {}).get("nodeCount", 1), _pod(main),
                           min_replicas=low))
    if ranges:
        raise ValueError(f"{REPLICA_RANGE_ANNOTATION} names components without a scalingAdapter: {sorted(ranges)}")
    return units


def _ome_units(obj: dict[str, Any]) -> list[_Unit]:
    """``spec.engine`` (prefill when a ``spec.decoder`` exists, else aggregated) and
    ``spec.decoder``: ``maxReplicas`` engines (the planned size; ``minReplicas`` is the idle
    floor), each a ``runner`` pod or a ``leader`` pod plus ``worker.size`` pods."""
    spec = obj["spec"]
    disagg = "decoder" in spec
    units = []
    for key, role in (("engine", "prefill" if disagg else "aggregated"), ("decoder", "decode")):
        comp = spec.get(key)
        if comp is None:
            continue
        replicas = comp.get("maxReplicas", 1)
        low = _range(f"spec.{key}", replicas, comp.get("minReplicas", replicas), replicas)
        if "leader" in comp:
            units.append(_Unit(role, replicas, 1 + comp["worker"].get("size", 0), _pod(comp["leader"]["runner"]),
                               _pod(comp["worker"]["runner"]), min_replicas=low))
        else:
            units.append(_Unit(role, replicas, 1, _pod(comp["runner"]), min_replicas=low))
    return units


def _kthena_units(obj: dict[str, Any], objects: list[dict[str, Any]]) -> list[_Unit]:
    """``spec.template.roles[]``: ``replicas`` engines per serving group (``spec.replicas``
    groups), each an entry pod plus ``workerReplicas`` worker pods. A role named prefill or
    decode is that role; a role of another name is an aggregated engine, and several such roles
    (engines of several shapes serving the same model) may stand side by side, but not beside
    prefill or decode roles. A role's range is in the AutoscalingPolicy among ``objects`` whose
    ``disaggregatedTarget`` names this ModelServing."""
    spec = obj["spec"]
    groups = spec.get("replicas", 1)
    ranges = _kthena_ranges(obj, objects)
    roles = spec["template"]["roles"]
    disaggregated = any(r["name"] in ("prefill", "decode") for r in roles)
    units = []
    for role in roles:
        name = role["name"] if role["name"] in ("prefill", "decode") else None
        if name is None and disaggregated:
            raise ValueError(f"Kthena role {role['name']!r}: not prefill or decode, beside prefill/decode roles")
        worker = _engine_container(role["workerTemplate"]) if role.get("workerReplicas") else None
        replicas, scaled = role.get("replicas", 1) * groups, ranges.pop(role["name"], None)
        low = None if scaled is None else _range(f"AutoscalingPolicy role {role['name']}", replicas,
                                                  scaled.get("minReplicas"), scaled.get("maxReplicas"))
        units.append(_Unit(name or "aggregated", replicas, 1 + role.get("workerReplicas", 0),
                           _engine_container(role["entryTemplate"]), worker, min_replicas=low))
    if ranges:
        raise ValueError(f"AutoscalingPolicy scales roles the ModelServing does not have: {sorted(ranges)}")
    return units


def _kthena_ranges(serving: dict[str, Any], objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Role name → its ``{minReplicas, maxReplicas, …}`` in the AutoscalingPolicy targeting ``serving``
    (``{}`` when none does)."""
    found: dict[str, dict[str, Any]] = {}
    for policy in objects:
        if policy.get("kind") != "AutoscalingPolicy":
            continue
        target = policy["spec"]["disaggregatedTarget"]
        ref = target["targetRef"]
        if (ref["kind"], ref["name"], ref["apiVersion"]) == (serving["kind"], serving["metadata"]["name"],
                                                            serving["apiVersion"]):
            found.update(target["roles"])
    return found


def _engine_container(template: dict[str, Any]) -> _Pod:
    """The container of a pod template that asks for GPUs."""
    return _pod(next(c for c in template["spec"]["containers"] if _gpu_count(c.get("resources"))))


def _read_units(units: list[_Unit], obj: dict[str, Any]) -> tuple[list[DeployedEngine], _EngineArgs, str]:
    engines, first, backend = [], None, None
    for unit in units:
        unit_backend, args = _engine_args(unit.pod)
        if backend not in (None, unit_backend):
            raise ValueError(f"engines run different backends: {backend} and {unit_backend}")
        backend, first = unit_backend, first or args
        if unit.worker is not None:
            if unit.worker.gpus != unit.pod.gpus:
                raise ValueError(f"worker pods have {unit.worker.gpus} GPUs, the leader {unit.pod.gpus}")
            if _engine_args(unit.worker) != (unit_backend, args):
                raise ValueError(f"{obj['kind']}: worker pods run another engine configuration than the leader")
        if unit.role is not None and args.role is not None and unit.role != args.role:
            raise ValueError(f"a {unit.role} engine runs with --disaggregation-mode {args.role}")
        role = unit.role or args.role or "aggregated"
        engines.append(DeployedEngine(
            role=role, tp=args.tp, pp=args.pp, dp=args.dp, ep=args.ep, replicas=unit.replicas,
            min_replicas=unit.replicas if unit.min_replicas is None else unit.min_replicas,
            gpus=unit.pod.gpus * unit.pods, max_running=args.max_running,
            max_prompt_tokens=args.max_prompt_tokens, kv_dtype=args.kv_dtype,
            memory_fraction=args.memory_fraction))
        if (args.model, args.served_name) != (first.model, first.served_name):
            raise ValueError(f"{obj['kind']}: engines serve different checkpoints or names")
    if first is None:
        raise ValueError(f"{obj['kind']} {obj['metadata']['name']}: no engine")
    return engines, first, backend


def _kubeai(obj: dict[str, Any]) -> tuple[list[DeployedEngine], str, str, str]:
    """A KubeAI Model: ``engine: VLLM`` runs vLLM on ``url`` (``hf://<id>``) with ``args``
    (``--flag=value``), ``resourceProfile: <profile>:<GPUs per pod>``, ``replicas``; it serves
    the model under the Model's name."""
    spec = obj["spec"]
    if spec.get("engine") != "VLLM":
        raise ValueError(f"KubeAI engine {spec.get('engine')!r} is not one of the planner's backends")
    url = spec["url"]
    if not url.startswith("hf://"):
        raise ValueError(f"KubeAI url {url!r} is not a Hugging Face checkpoint")
    flags, positional = _flags(list(spec.get("args") or []))
    args = _vllm(flags, positional)
    gpus = int(spec["resourceProfile"].rsplit(":", 1)[1])
    replicas = spec.get("replicas", spec.get("minReplicas", 1))
    low = _range("KubeAI Model", replicas, spec.get("minReplicas", replicas), spec.get("maxReplicas", replicas))
    engine = DeployedEngine(role="aggregated", tp=args.tp, pp=args.pp, dp=args.dp, ep=args.ep, replicas=replicas,
                            min_replicas=low,
                            gpus=gpus, max_running=args.max_running, max_prompt_tokens=args.max_prompt_tokens,
                            kv_dtype=args.kv_dtype, memory_fraction=args.memory_fraction)
    return [engine], url.removeprefix("hf://"), obj["metadata"]["name"], "vllm"


def read_deployment(objects: list[dict[str, Any]]) -> Deployed:
    """The deployment ``objects`` (one target's manifests) describe.

    Raises ``ValueError`` for objects that deploy no engine, an engine launch or setting this
    reader does not know, or engines that disagree on the backend or checkpoint.
    """
    serving = [o for o in objects if o.get("kind") in ("DynamoGraphDeployment", "InferenceService", "ModelServing",
                                                      "Model")]
    if len(serving) != 1:
        raise ValueError(f"expected one serving object, got {[o.get('kind') for o in objects]}")
    obj = serving[0]
    gpu = obj["metadata"]["annotations"][GPU_ANNOTATION]
    kind = obj["kind"]
    if kind == "Model":
        engines, model, served, backend = _kubeai(obj)
    else:
        units = _kthena_units(obj, objects) if kind == "ModelServing" else \
            {"DynamoGraphDeployment": _dgd_units, "InferenceService": _ome_units}[kind](obj)
        engines, first, backend = _read_units(units, obj)
        served = first.served_name or first.model
        model = first.model
        if model is None or model.startswith("$("):
            # OME mounts the BaseModel at $(MODEL_PATH); the checkpoint is the one served by name.
            model = first.served_name
        if model is None or served is None:
            raise ValueError(f"{kind}: no checkpoint named")
    _, precision = resolve_model(model)
    order = {"aggregated": 0, "prefill": 1, "decode": 2}
    return Deployed(model=model, served_name=served, gpu=gpu, backend=backend, precision=precision,
                    engines=tuple(sorted(engines, key=lambda e: order[e.role])))
