"""Run one BenchmarkJob with genai-bench (I/O: HTTP probes, files, a subprocess).

genai-bench lives in its own virtual environment (it pins transformers, pandas, oci…) and runs
as a subprocess with stdin closed and a wall-clock limit. Before spending minutes on it, the
runner checks what usually makes a benchmark fail and says so in plain words: the endpoint is
down, the chat route answers 404, the model is unknown, the tokenizer is missing. Results of
the iterations that finished are kept and parsed even when a later one fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from profiler.bench.spec import BenchmarkJobSpec, InferenceServiceReference
from profiler.bench.command import BenchCommand, BenchOptions, bare_base_url, build_command
from profiler.bench.results import IterationMetrics, parse_folder, table
from profiler.bench.tether import start_tethered, stop_group
from profiler.bench.tokenizer import is_tokenizer_dir, write_byte_tokenizer

GENAI_BENCH_VENV = ".venv-genai-bench"
DEFAULT_LOCAL_ROOT = "bench-results"
_HUB_URL = "https://huggingface.co"


class RunnerSettings(BaseModel):
    """Where genai-bench is, where local results go, and how to reach endpoints and tokenizers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    genai_bench: str = Field(description="the genai-bench program (SLAPLAN_GENAI_BENCH)")
    local_root: str = Field(default=DEFAULT_LOCAL_ROOT, description="root of file:// and pvc:// locations (SLAPLAN_BENCH_ROOT)")
    api_key: str | None = Field(default=None, description="sent as --api-key (SLAPLAN_BENCH_API_KEY)")
    tokenizer: str | None = Field(default=None, description="a local tokenizer directory (SLAPLAN_BENCH_TOKENIZER)")
    offline: bool | None = Field(default=None, description="no Hugging Face Hub; None = find out (SLAPLAN_OFFLINE, HF_HUB_OFFLINE)")
    probe_timeout_s: float = Field(default=10.0, gt=0)
    ready_timeout_s: float = Field(default=600.0, ge=0, allow_inf_nan=False, description="how long (s) a referenced InferenceService "
                                   "may take to become ready (SLAPLAN_BENCH_READY_TIMEOUT)")


def default_genai_bench() -> str:
    """genai-bench in the project's own environment for it (created by the set-up script)."""
    root = Path(__file__).resolve().parents[2]
    return str(root / GENAI_BENCH_VENV / "bin" / "genai-bench")


def _flag(value: str | None) -> bool | None:
    if value is None or value == "":
        return None
    return value.strip().lower() in ("1", "true", "yes", "on")


def runner_settings(env: Mapping[str, str] | None = None, **overrides: Any) -> RunnerSettings:
    """Settings from ``SLAPLAN_*`` variables (default: the process environment); keyword
    ``overrides`` (not None) win."""
    env = os.environ if env is None else env
    offline = _flag(env.get("SLAPLAN_OFFLINE"))
    if offline is None and _flag(env.get("HF_HUB_OFFLINE")):
        offline = True
    values: dict[str, Any] = {
        "genai_bench": env.get("SLAPLAN_GENAI_BENCH") or default_genai_bench(),
        "local_root": env.get("SLAPLAN_BENCH_ROOT") or DEFAULT_LOCAL_ROOT,
        "api_key": env.get("SLAPLAN_BENCH_API_KEY") or None,
        "tokenizer": env.get("SLAPLAN_BENCH_TOKENIZER") or None,
        "offline": offline,
        "ready_timeout_s": env.get("SLAPLAN_BENCH_READY_TIMEOUT") or 600.0,
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    return RunnerSettings(**values)


class BenchOutcome(BaseModel):
    """How a run ended: ``ok``, a failure in plain words, details, and what was measured."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    failure: str = ""
    details: str = ""
    results: list[IterationMetrics] = Field(default_factory=list)
    failed_runs: list[IterationMetrics] = Field(default_factory=list)
    experiment_dir: str | None = None
    command: str | None = None
    started: bool = Field(default=False, description="genai-bench was started")


class Failure(Exception):
    """A reason the benchmark cannot run, in plain words."""


ServiceResolver = Callable[[InferenceServiceReference], str]  # the base URL; raises Failure saying why not


def resolve_endpoint(spec: BenchmarkJobSpec, override: str | None, resolver: ServiceResolver | None) -> str:
    """The base URL to benchmark: ``override``, the spec's URL, or the InferenceService's."""
    if override:
        return bare_base_url(override)
    if spec.endpoint.endpoint is not None:
        return bare_base_url(spec.endpoint.endpoint.url)
    ref = spec.endpoint.inference_service
    if resolver is None:
        raise Failure(f"spec.endpoint.inferenceService {ref.namespace}/{ref.name}: no Kubernetes cluster is "
                      "configured to resolve it; give spec.endpoint.endpoint.url instead")
    return bare_base_url(resolver(ref))


def _describe(exc: Exception) -> str:
    import httpx

    if isinstance(exc, httpx.ConnectError):
        return "connection refused or host unreachable"
    if isinstance(exc, httpx.TimeoutException):
        return "no answer in time"
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def probe_endpoint(base: str, model: str | None, *, api_key: str | None, timeout_s: float,
                   chat: bool = True) -> str:
    """Check that ``base`` serves the OpenAI API and return the model name to use.

    Raises ``Failure`` for an endpoint that is down, answers 404 on the chat route, or does not
    know the model. ``model`` None means: the first model ``/v1/models`` lists.
    """
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(timeout=timeout_s, headers=headers) as client:
        try:
            listed = client.get(f"{base}/v1/models")
        except httpx.HTTPError as exc:
            raise Failure(f"endpoint down: {base} ({_describe(exc)})") from None
        names: list[str] = []
        if listed.status_code == 200:
            try:
                names = [str(m["id"]) for m in listed.json().get("data", []) if "id" in m]
            except (ValueError, AttributeError, TypeError):
                names = []
        if model is None:
            if listed.status_code == 404:
                raise Failure(f"404 Not Found at {base}/v1/models: the endpoint does not serve the OpenAI API there "
                              "(the URL must be the server's base) and spec.endpoint.endpoint.modelName is not set")
            if not names:
                raise Failure(f"spec.endpoint.endpoint.modelName is not set and {base}/v1/models lists no model "
                              f"(HTTP {listed.status_code})")
            model = names[0]
        if not chat:
            return model
        url = f"{base}/v1/chat/completions"
        body = {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1, "stream": False}
        try:
            answer = client.post(url, json=body)
        except httpx.HTTPError as exc:
            raise Failure(f"endpoint down: {url} ({_describe(exc)})") from None
    if answer.status_code == 404:
        text = answer.text.lower()
        if "model" in text and ("exist" in text or "not found" in text) and names:
            raise Failure(f"404 from {url}: the endpoint has no model {model!r} (it serves {', '.join(names)})")
        raise Failure(f"404 Not Found at {url}: the endpoint does not serve the OpenAI chat API there "
                      "(the URL must be the server's base; genai-bench appends /v1/chat/completions)")
    if answer.status_code in (401, 403):
        raise Failure(f"HTTP {answer.status_code} from {url}: the endpoint refused the API key (set SLAPLAN_BENCH_API_KEY)")
    if answer.status_code >= 400:
        raise Failure(f"HTTP {answer.status_code} from {url}: {answer.text[:300]}")
    return model


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether the Hugging Face Hub answers within ``timeout_s`` (a thread bounds slow DNS too)."""
    import concurrent.futures

    import httpx

    def ask() -> bool:
        try:
            return httpx.head(_HUB_URL, timeout=timeout_s).status_code < 500
        except httpx.HTTPError:
            return False

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(ask).result(timeout=timeout_s + 1.0)
    except concurrent.futures.TimeoutError:
        return False
    finally:
        pool.shutdown(wait=False)


def cached_on_hub(model: str, env: Mapping[str, str]) -> bool:
    """Whether ``model``'s files are in the local Hugging Face cache."""
    hub = Path(env.get("HF_HUB_CACHE") or Path(env.get("HF_HOME") or Path.home() / ".cache" / "huggingface") / "hub")
    folder = hub / ("models--" + model.replace("/", "--"))
    return (folder / "snapshots").is_dir()


def choose_tokenizer(model: str, settings: RunnerSettings, env: Mapping[str, str], scratch: Path) -> tuple[str, bool, list[str]]:
    """(tokenizer for --model-tokenizer, offline, notes).

    A configured directory wins (it must hold tokenizer files); else the model's id when the
    Hub is reachable or the model is cached; else, offline, slaplan's byte-level tokenizer.
    """
    if settings.tokenizer:
        path = Path(settings.tokenizer)
        if not is_tokenizer_dir(path):
            raise Failure(f"tokenizer missing: {settings.tokenizer} is not a directory with tokenizer files "
                          "(tokenizer.json or tokenizer_config.json)")
        return str(path.resolve()), bool(settings.offline), [f"tokenizer: {settings.tokenizer}"]
    if Path(model).is_dir() and is_tokenizer_dir(Path(model)):
        return str(Path(model).resolve()), bool(settings.offline), [f"tokenizer: the local model directory {model}"]
    offline = settings.offline if settings.offline is not None else not hub_reachable()
    if not offline:
        return model, False, [f"tokenizer: {model} from the Hugging Face Hub"]
    if cached_on_hub(model, env):
        return model, True, [f"tokenizer: {model} from the local Hugging Face cache (offline)"]
    directory = write_byte_tokenizer(scratch / "byte-tokenizer")
    return str(directory), True, [
        f"tokenizer: offline and {model} is not in the local Hugging Face cache, so slaplan's own byte-level "
        "tokenizer was used (one token per UTF-8 byte): prompt and output lengths are counted in bytes, "
        "not in the model's tokens; give a tokenizer directory to measure in real tokens"]


def _free_folder(base: Path, name: str) -> str:
    """``name``, or ``name-2``, ``name-3``… when a folder of that name already holds results."""
    candidate, n = name, 1
    while (base / candidate).exists() and any((base / candidate).iterdir()):
        n += 1
        candidate = f"{name}-{n}"
    return candidate


def read_results(folder: str | Path) -> tuple[list[IterationMetrics], list[IterationMetrics]]:
    """Parse every genai-bench result (and debug) file of an experiment folder."""
    files: dict[str, dict[str, Any]] = {}
    for path in sorted(Path(folder).glob("*.json")):
        try:
            files[path.name] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):  # unreadable, not JSON, or nested beyond reason
            continue
    return parse_folder(files)


def _first_error(folder: Path, run: IterationMetrics) -> str:
    try:
        data = json.loads((folder / run.file).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return ""
    for item in data.get("individual_request_metrics") or []:
        if isinstance(item, dict) and item.get("error_message"):
            return f"HTTP {item.get('error_code')}: {str(item['error_message'])[:300]}"
    return ""


_LOG_REASONS = (
    ("can't load tokenizer", "tokenizer missing: genai-bench could not load the tokenizer"),
    ("we couldn't connect to 'https://huggingface.co'", "tokenizer missing: it needs the Hugging Face Hub, which is unreachable (offline)"),
    ("offline mode is enabled", "tokenizer missing: not in the local Hugging Face cache and offline mode is on"),
    ("requires authentication for this tokenizer", "tokenizer missing: the Hub requires a token for it (set HF_TOKEN)"),
    ("connection refused", "endpoint down: connection refused"),
    ("no values found for metric", "zero successful requests"),
)


def explain_exit(code: int, log_tail: str) -> str:
    """A plain-words reason for a failed genai-bench run from its exit code and last output."""
    low = log_tail.lower()
    for needle, reason in _LOG_REASONS:
        if needle in low:
            return reason
    lines = [ln.strip() for ln in log_tail.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    last = (errors or lines or ["no output"])[-1]
    return f"genai-bench exited with code {code}: {last[:300]}"


def _tail(path: Path, limit: int = 20000) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _run(command: BenchCommand, cwd: Path, console: Path, env: Mapping[str, str]) -> tuple[int | None, float]:
    """Run genai-bench; returns (exit code or None on timeout, seconds)."""
    started = time.monotonic()
    with console.open("wb") as out:
        proc = start_tethered(list(command.argv), stdout=out, cwd=cwd,
                              env={**env, **command.env, "PYTHONUNBUFFERED": "1", "COLUMNS": "160"})
        try:
            code = proc.wait(timeout=command.timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            if proc.poll() is None:
                stop_group(proc)
    return code, time.monotonic() - started


def _invalid(exc: ValueError, notes: list[str]) -> BenchOutcome:
    """The outcome of a job genai-bench cannot run as specified (task, scenarios, locations:
    the message names the field)."""
    return BenchOutcome(ok=False, failure=str(exc), details="; ".join(notes))


def run_benchmarkjob(spec: BenchmarkJobSpec, *, name: str, settings: RunnerSettings,
                     endpoint: str | None = None, resolver: ServiceResolver | None = None,
                     env: Mapping[str, str] | None = None, progress: Callable[[str], None] | None = None) -> BenchOutcome:
    """Benchmark ``spec``'s endpoint (or ``endpoint``) with genai-bench and parse its results.

    ``name`` names the result folder when the spec has no ``resultFolderName``. Never raises for
    a failed benchmark: the outcome says why, and keeps the iterations that finished.
    """
    env = dict(os.environ if env is None else env)
    say = progress or (lambda _msg: None)
    notes: list[str] = []
    local_root = str(Path(settings.local_root).resolve())
    try:  # what needs no endpoint (scenarios for the task, locations) is checked before any network
        build_command(spec, "http://localhost", BenchOptions(executable=settings.genai_bench, model_name="model",
                                                             tokenizer="tokenizer", folder_name="check",
                                                             local_root=local_root))
    except ValueError as exc:
        return _invalid(exc, notes)
    try:
        base = resolve_endpoint(spec, endpoint, resolver)
        ref = spec.endpoint.inference_service
        if ref is not None and not endpoint:
            notes.append(f"endpoint: InferenceService {ref.namespace}/{ref.name} at {base}")
        if not Path(settings.genai_bench).is_file():
            raise Failure(f"genai-bench is not installed at {settings.genai_bench}: run the project's set-up script "
                          "or set SLAPLAN_GENAI_BENCH")
        declared = spec.endpoint.endpoint.model_name if spec.endpoint.endpoint else None
        api_format = spec.endpoint.endpoint.api_format if spec.endpoint.endpoint else "openai"
        say(f"checking {base}")
        model = probe_endpoint(base, declared, api_key=settings.api_key, timeout_s=settings.probe_timeout_s,
                               chat=api_format == "openai" and spec.task == "text-to-text")
        if declared is None:
            notes.append(f"modelName not given: using {model!r}, the first model the endpoint lists")
    except Failure as exc:
        return BenchOutcome(ok=False, failure=str(exc), details="; ".join(notes))

    scratch = Path(tempfile.mkdtemp(prefix="slaplan-bench-"))
    try:
        try:
            tokenizer, offline, tok_notes = choose_tokenizer(model, settings, env, scratch)
        except Failure as exc:
            return BenchOutcome(ok=False, failure=str(exc), details="; ".join(notes))
        notes += tok_notes
        wanted = spec.result_folder_name or name
        try:
            probe = build_command(spec, base, BenchOptions(executable=settings.genai_bench, model_name=model,
                                                           tokenizer=tokenizer, folder_name=wanted,
                                                           local_root=local_root))
            folder = _free_folder(Path(probe.output.base_dir), wanted)
            command = build_command(spec, base, BenchOptions(
                executable=settings.genai_bench, model_name=model, tokenizer=tokenizer, folder_name=folder,
                local_root=local_root, api_key=settings.api_key, offline=offline))
        except ValueError as exc:
            return _invalid(exc, notes)
        if folder != wanted:
            notes.append(f"{wanted} already held results: writing to {folder}")
        notes += command.notes
        experiment = Path(command.experiment_dir)
        (experiment / "logs").mkdir(parents=True, exist_ok=True)
        console = experiment / "logs" / "genai-bench.console.log"
        say(f"running genai-bench: {command.iterations} iteration(s), at most {command.timeout_s:.0f} s")
        code, seconds = _run(command, Path(command.output.base_dir), console, env)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    results, failed_runs = read_results(experiment)
    failure = ""
    if code is None:
        failure = (f"genai-bench did not finish within {command.timeout_s:.0f} s "
                   f"(maxTimePerIteration × {command.iterations} iterations + slack) and was stopped")
    zero = [r for r in failed_runs + results if r.successes <= 0]
    if zero and not failure:
        first = zero[0]
        detail = _first_error(experiment, first)
        failure = (f"zero successful requests in scenario {first.scenario} at concurrency {first.concurrency} "
                   f"({first.errors} of {first.requests} failed{'; ' + detail if detail else ''})")
    if not failure and code != 0:
        failure = explain_exit(code, _tail(console))
    if not failure and not results:
        failure = "genai-bench finished but wrote no result files"
    measured = f"{len(results)} of {command.iterations} iteration(s) measured in {seconds:.0f} s"
    details = "; ".join([measured, f"results in {experiment}", *notes])
    return BenchOutcome(ok=not failure, failure=failure, details=details, results=results, failed_runs=failed_runs,
                        experiment_dir=str(experiment), command=command.shown(), started=True)


def summary(outcome: BenchOutcome) -> str:
    """Human-readable report of an outcome: the table and where things are."""
    parts = []
    if outcome.results:
        parts.append(table(outcome.results))
    parts.append(("completed" if outcome.ok else f"FAILED: {outcome.failure}"))
    if outcome.details:
        parts.append(outcome.details)
    return "\n".join(parts)
