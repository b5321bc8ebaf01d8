"""The genai-bench command line for one BenchmarkJob (pure: no files, no processes, no clock).

It follows what OME's controller builds (``genai-bench benchmark --api-backend … --api-base …
--api-model-name … --task … --max-time-per-run <minutes> --max-requests-per-run <n>``, one
``--traffic-scenario`` per scenario, one ``--num-concurrency`` per level, server metadata,
storage flags) and fills the gaps OME leaves:

- ``--api-key`` (genai-bench requires one for OpenAI-style backends; a placeholder when the
  endpoint needs none);
- ``--model-tokenizer``, resolved by the runner (hub id, local directory, or slaplan's own);
- a bare ``--api-base`` (genai-bench appends ``/v1/chat/completions`` itself);
- ``--additional-request-params`` and ``--dataset-path``, which OME never passes;
- OME's default scenarios and concurrency levels when the lists are empty;
- the OpenAI-compatible ``vllm``/``sglang`` backends when serviceMetadata names those engines,
  so that ``ignore_eos`` reaches the server and outputs have the scenario's length; and the
  ``vllm`` one (the same API) when ``additionalRequestParams`` sets ``ignore_eos``, which
  genai-bench's ``openai`` backend silently drops;
- GPU types in genai-bench's spelling (``A100`` → ``A100-80G``).
"""

from __future__ import annotations

import json
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from profiler.bench.spec import BenchmarkJobSpec, StorageSpec

# OME's defaults when trafficScenarios / numConcurrency are empty (text tasks).
DEFAULT_SCENARIOS = ("N(480,240)/(300,150)", "D(100,100)", "D(100,1000)", "D(2000,200)", "D(7800,200)")
DEFAULT_CONCURRENCY = (1, 2, 4, 8, 16, 32, 64, 128, 256)

# Seconds added to each iteration's time budget (request drain, aggregation, genai-bench's own
# 1 s pause) and once for the start (imports, tokenizer load, prompt sampling).
ITERATION_SLACK_S = 30.0
STARTUP_SLACK_S = 120.0

PLACEHOLDER_API_KEY = "slaplan-no-key"

# genai-bench's scenario grammar, one pattern per kind (``dataset`` samples the dataset as is).
_GRAMMAR: dict[str, tuple[re.Pattern[str], str]] = {
    "D": (re.compile(r"^D\((\d+),(\d+)\)$"), "D(input_tokens,output_tokens)"),
    "N": (re.compile(r"^N\((\d+),(\d+)\)/\((\d+),(\d+)\)$"), "N(mean_in,sd_in)/(mean_out,sd_out)"),
    "U": (re.compile(r"^U\((\d+),(\d+)\)(?:/\((\d+),(\d+)\))?$"), "U(min_in,max_in)/(min_out,max_out) or U(max_in,max_out)"),
    "E": (re.compile(r"^E\((\d+)\)$"), "E(tokens_per_document)"),
    "R": (re.compile(r"^R\((\d+),(\d+)\)$"), "R(document_tokens,query_tokens)"),
    "I": (re.compile(r"^I\((\d+),(\d+)(?:,(\d+))?\)$"), "I(width,height[,images])"),
    "A": (re.compile(r"^A\((\d+)\)$"), "A(characters)"),
    "dataset": (re.compile(r"^dataset$"), "dataset"),
}

# Which scenario kinds each task samples (genai-bench's samplers reject the others at run time).
TASK_KINDS: dict[str, frozenset[str]] = {
    "text-to-text": frozenset({"D", "N", "U", "dataset"}),
    "text-to-embeddings": frozenset({"E", "dataset"}),
    "text-to-rerank": frozenset({"R", "dataset"}),
    "text-to-image": frozenset({"I"}),
    "text-to-speech": frozenset({"A"}),
    "image-text-to-text": frozenset({"I", "dataset"}),
    "image-to-embeddings": frozenset({"I", "dataset"}),
}

_API_BACKENDS = {"openai": "openai", "oci-cohere": "oci-cohere", "cohere": "cohere"}
_GPU_TYPES = {"H100": "H100", "A100": "A100-80G", "MI300": "MI300", "A10": "A10"}
# Object stores genai-bench uploads to: URI scheme -> --storage-provider.
UPLOAD_PROVIDERS = {"s3": "aws", "gs": "gcp", "az": "azure", "oci": "oci"}
LOCAL_SCHEMES = ("file", "pvc", "local")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Scenario(_Frozen):
    """One parsed traffic scenario: its kind (``D``, ``N``, …, ``dataset``) and integers."""

    text: str
    kind: str
    numbers: tuple[int, ...] = ()


class ScenarioError(ValueError):
    """Invalid scenarios; ``causes`` lists ``(field_path, message)`` pairs."""

    def __init__(self, causes: list[tuple[str, str]]):
        self.causes = causes
        super().__init__("; ".join(f"{f}: {m}" for f, m in causes))


def parse_scenario(text: str) -> Scenario:
    """Parse one scenario string in genai-bench's grammar; ``ValueError`` says what is wrong."""
    if any(c.isspace() for c in text):
        raise ValueError(f"{text!r} contains spaces; genai-bench's grammar allows none, e.g. D(100,100)")
    kind = "dataset" if text == "dataset" else text[:1]
    if kind not in _GRAMMAR:
        raise ValueError(f"{text!r}: unknown scenario kind {kind!r}; expected one of D, N, U, E, R, I, A or dataset")
    pattern, shape = _GRAMMAR[kind]
    match = pattern.match(text)
    if not match:
        raise ValueError(f"{text!r} does not match {shape}")
    numbers = tuple(int(g) for g in match.groups() if g is not None)
    if kind == "N":
        if numbers[0] == 0 or numbers[2] == 0:
            raise ValueError(f"{text!r}: mean token counts must be positive")
    elif kind == "U" and len(numbers) == 4:
        if numbers[0] > numbers[1] or numbers[2] > numbers[3]:
            raise ValueError(f"{text!r}: a minimum is larger than its maximum")
        if numbers[1] == 0 or numbers[3] == 0:
            raise ValueError(f"{text!r}: maximum token counts must be positive")
    elif any(n == 0 for n in numbers):
        raise ValueError(f"{text!r}: every number must be positive")
    return Scenario(text=text, kind=kind, numbers=numbers)


def check_scenarios(scenarios: tuple[str, ...], task: str, *, has_dataset: bool) -> list[Scenario]:
    """Parse every scenario and check it suits ``task``; raise ``ScenarioError`` naming
    ``spec.trafficScenarios[i]`` for each bad one."""
    allowed = TASK_KINDS.get(task)
    causes: list[tuple[str, str]] = []
    parsed: list[Scenario] = []
    if allowed is None:
        causes.append(("spec.task", f"genai-bench has no task {task!r}; known: {', '.join(TASK_KINDS)}"))
    for i, text in enumerate(scenarios):
        field = f"spec.trafficScenarios[{i}]"
        try:
            scenario = parse_scenario(text)
        except ValueError as exc:
            causes.append((field, str(exc)))
            continue
        if allowed is not None and scenario.kind not in allowed:
            causes.append((field, f"{text!r} cannot drive task {task!r} (it takes {', '.join(sorted(allowed))})"))
        elif scenario.kind == "dataset" and not has_dataset:
            causes.append((field, "'dataset' needs spec.dataset"))
        parsed.append(scenario)
    if causes:
        raise ScenarioError(causes)
    return parsed


def scenarios_for(spec: BenchmarkJobSpec) -> tuple[str, ...]:
    """The scenarios to run: the spec's, or OME's defaults for text tasks (``dataset`` when a
    dataset is given), or none (genai-bench then picks its own defaults for the task)."""
    if spec.traffic_scenarios:
        return spec.traffic_scenarios
    if spec.dataset is not None:
        return ("dataset",)
    return DEFAULT_SCENARIOS if spec.task == "text-to-text" else ()


def concurrency_for(spec: BenchmarkJobSpec) -> tuple[int, ...]:
    """The concurrency levels to run: the spec's, or 1…256 in powers of two."""
    return spec.num_concurrency or DEFAULT_CONCURRENCY


def bare_base_url(url: str) -> str:
    """The endpoint URL without a trailing ``/``, ``/v1`` or ``/v1/chat/completions`` (genai-bench
    appends the API path itself)."""
    base = url.rstrip("/")
    for suffix in ("/v1/chat/completions", "/v1/completions", "/chat/completions", "/completions", "/v1"):
        if base.endswith(suffix):
            return base[: -len(suffix)].rstrip("/")
    return base


def request_params(params: dict[str, str] | None) -> dict[str, object]:
    """``additionalRequestParams`` (strings in the CRD) as typed JSON values: ``"0.7"`` → 0.7,
    ``"true"`` → true, ``'{"a":1}'`` → an object; anything else stays a string."""
    out: dict[str, object] = {}
    for key, value in (params or {}).items():
        try:
            out[key] = json.loads(value)
        except (TypeError, ValueError):
            out[key] = value
    return out


class OutputTarget(_Frozen):
    """Where genai-bench writes: a local base directory, plus upload flags for object stores."""

    base_dir: str = Field(description="local experiment base directory")
    upload_flags: tuple[str, ...] = ()
    uri: str


def _join(root: str, *parts: str) -> str:
    clean = [p.strip("/") for p in parts if p and p.strip("/")]
    for p in clean:
        if ".." in p.split("/"):
            raise ValueError(f"path {p!r} may not contain '..'")
    if not clean:
        return root
    head = root.rstrip("/")
    return "/".join([head, *clean]) if head else "/" + "/".join(clean)


def local_path(uri: str, local_root: str) -> str:
    """A ``file://``, ``local://`` or ``pvc://`` URI as a local path: ``file:///abs`` stays
    absolute; ``pvc://claim/sub`` and relative ones go under ``local_root``."""
    scheme, _, rest = uri.partition("://")
    if scheme not in LOCAL_SCHEMES:
        raise ValueError(f"{uri!r} is not a local location (file://, local:// or pvc://)")
    if scheme in ("file", "local") and rest.startswith("/"):
        return _join("/", rest)
    return _join(local_root, rest)


def output_target(location: StorageSpec, local_root: str) -> OutputTarget:
    """Map ``outputLocation`` to genai-bench's flags.

    ``file://``/``local://``/``pvc://`` → ``--experiment-base-dir`` at that path (``pvc://``
    under ``local_root``); ``s3://bucket/prefix``, ``gs://…``, ``az://container/prefix`` and
    ``oci://bucket/prefix`` (or OME's ``oci://n/<namespace>/b/<bucket>/o/<prefix>``) →
    ``--upload-results --storage-provider … --storage-bucket … --storage-prefix …``, written
    locally first under ``local_root/<scheme>/<bucket>/<prefix>``.
    """
    uri = location.storage_uri
    scheme, _, rest = uri.partition("://")
    if location.path:
        rest = f"{rest.rstrip('/')}/{location.path.lstrip('/')}"
    if scheme in LOCAL_SCHEMES:
        return OutputTarget(base_dir=local_path(f"{scheme}://{rest}", local_root), uri=uri)
    if scheme not in UPLOAD_PROVIDERS:
        raise ValueError(f"outputLocation: unsupported scheme {scheme!r}")
    flags = ["--upload-results", "--storage-provider", UPLOAD_PROVIDERS[scheme]]
    oci = re.match(r"^n/([^/]+)/b/([^/]+)(?:/o/(.*))?$", rest) if scheme == "oci" else None
    if oci:
        namespace, bucket, prefix = oci.group(1), oci.group(2), oci.group(3) or ""
        flags += ["--namespace", namespace]
    else:
        bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise ValueError(f"outputLocation: {uri!r} names no bucket")
    flags += ["--storage-bucket", bucket]
    if prefix.strip("/"):
        flags += ["--storage-prefix", prefix.strip("/")]
    region = (location.parameters or {}).get("region")
    if region and scheme == "s3":
        flags += ["--storage-aws-region", region]
    elif region and scheme == "oci":
        flags += ["--region", region]
    return OutputTarget(base_dir=_join(local_root, scheme, bucket, prefix), upload_flags=tuple(flags), uri=uri)


def dataset_path(dataset: StorageSpec, local_root: str) -> str:
    """``spec.dataset`` as genai-bench's ``--dataset-path``: a local file (``file://``,
    ``pvc://``) or a Hugging Face dataset id (``hf://org/name``)."""
    uri = dataset.storage_uri
    scheme, _, rest = uri.partition("://")
    if scheme == "hf":
        return rest.strip("/")
    if scheme in LOCAL_SCHEMES:
        path = local_path(uri, local_root)
        return _join(path, dataset.path) if dataset.path else path
    raise ValueError("spec.dataset.storageUri: genai-bench reads local files (file://, pvc://) "
                     f"or Hugging Face datasets (hf://org/name), not {scheme}://")


class BenchOptions(_Frozen):
    """What the runner resolved before building the command."""

    executable: str = Field(description="the genai-bench program")
    model_name: str = Field(description="the model name sent in each request")
    tokenizer: str = Field(description="a hub id or a local tokenizer directory")
    folder_name: str = Field(description="the experiment folder, under the output base directory")
    local_root: str = Field(description="where file://, pvc:// and upload staging folders live")
    api_key: str | None = None
    offline: bool = False
    metrics_time_unit: Literal["s", "ms"] = "s"


class BenchCommand(_Frozen):
    """A genai-bench invocation: arguments, environment additions, where results land, how long
    it may take (s), and notes worth telling the user (gaps filled, choices made)."""

    argv: tuple[str, ...]
    env: dict[str, str]
    experiment_dir: str
    output: OutputTarget
    scenarios: tuple[str, ...]
    concurrency: tuple[int, ...]
    timeout_s: float
    notes: tuple[str, ...] = ()

    @property
    def iterations(self) -> int:
        return max(1, len(self.scenarios)) * len(self.concurrency)

    def shown(self) -> str:
        """The command as one line with the API key masked."""
        args = list(self.argv)
        for i, a in enumerate(args[:-1]):
            if a == "--api-key":
                args[i + 1] = "***"
        return " ".join(_quote(a) for a in args)


def _quote(arg: str) -> str:
    return arg if re.match(r"^[\w@%+=:,./-]+$", arg) else "'" + arg.replace("'", "'\"'\"'") + "'"


def timeout_for(spec: BenchmarkJobSpec, iterations: int) -> float:
    """Wall-clock limit (s) for the whole run: each iteration's ``maxTimePerIteration`` (minutes)
    plus slack, and a start-up allowance."""
    return STARTUP_SLACK_S + iterations * (spec.max_time_per_iteration * 60.0 + ITERATION_SLACK_S)


def build_command(spec: BenchmarkJobSpec, base_url: str, options: BenchOptions) -> BenchCommand:
    """The full genai-bench command for ``spec`` against ``base_url``.

    Raises ``ScenarioError`` (field-named) for scenarios genai-bench would reject and
    ``ValueError`` for locations it cannot use.
    """
    scenarios = scenarios_for(spec)
    check_scenarios(scenarios, spec.task, has_dataset=spec.dataset is not None)
    concurrency = concurrency_for(spec)
    notes: list[str] = []
    if not spec.traffic_scenarios and scenarios:
        notes.append(f"no trafficScenarios given: using {' '.join(scenarios)}")
    if not spec.num_concurrency:
        notes.append(f"no numConcurrency given: using {','.join(map(str, concurrency))}")

    api_format = spec.endpoint.endpoint.api_format if spec.endpoint.endpoint else "openai"
    backend = _API_BACKENDS[api_format]
    meta = spec.service_metadata
    params = request_params(spec.additional_request_params)
    if backend == "openai" and meta is not None and meta.engine in ("vLLM", "SGLang"):
        backend = meta.engine.lower()  # same protocol; genai-bench then sends ignore_eos
    elif backend == "openai" and "ignore_eos" in params:
        backend = "vllm"
        notes.append("additionalRequestParams sets ignore_eos, which genai-bench's openai backend drops: "
                     "used its vllm backend (the same OpenAI API) so that the server receives it")
    output = output_target(spec.output_location, options.local_root)
    experiment_dir = _join(output.base_dir, options.folder_name)

    argv = [options.executable, "benchmark",
            "--api-backend", backend,
            "--api-base", bare_base_url(base_url),
            "--api-model-name", options.model_name,
            "--model-tokenizer", options.tokenizer,
            "--task", spec.task,
            "--max-time-per-run", str(spec.max_time_per_iteration),
            "--max-requests-per-run", str(spec.max_requests_per_iteration),
            "--experiment-base-dir", output.base_dir,
            "--experiment-folder-name", options.folder_name,
            "--log-dir", _join(experiment_dir, "logs"),
            "--metrics-time-unit", options.metrics_time_unit]
    if backend in ("openai", "vllm", "sglang"):
        key = options.api_key or PLACEHOLDER_API_KEY
        argv += ["--api-key", key]
        if not options.api_key:
            notes.append("no API key configured: sent a placeholder key")
    for scenario in scenarios:
        argv += ["--traffic-scenario", scenario]
    for level in concurrency:
        argv += ["--num-concurrency", str(level)]
    if params:
        argv += ["--additional-request-params", json.dumps(params, separators=(",", ":"))]
    if spec.dataset is not None:
        argv += ["--dataset-path", dataset_path(spec.dataset, options.local_root)]
    if meta is not None:
        argv += ["--server-engine", meta.engine, "--server-version", meta.version,
                 "--server-gpu-type", _GPU_TYPES[meta.gpu_type], "--server-gpu-count", str(meta.gpu_count)]
    argv += list(output.upload_flags)
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"} if options.offline else {}
    iterations = max(1, len(scenarios)) * len(concurrency)
    return BenchCommand(argv=tuple(argv), env=env, experiment_dir=experiment_dir, output=output,
                        scenarios=scenarios, concurrency=concurrency,
                        timeout_s=timeout_for(spec, iterations), notes=tuple(notes))
