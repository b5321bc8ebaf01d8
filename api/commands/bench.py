"""``slaplan bench JOB.yaml``: run one OME BenchmarkJob locally with genai-bench, no service.

Prints a table per (scenario, concurrency) and leaves genai-bench's result folder (JSON per
iteration, its Excel summary and plots) under the job's ``outputLocation`` (``file://`` and
``pvc://`` locations under ``--root``). An ``endpoint.inferenceService`` is resolved on the
cluster ``--kubeconfig`` or the service's settings name (``infra.inference_services``). Exit codes: 0 completed, 1 the benchmark failed,
2 the job file is invalid.
"""

from __future__ import annotations

import argparse
import json
import sys


def register(subparsers, summary: str) -> None:
    parser = subparsers.add_parser(
        "bench", help=summary,
        description="Run a BenchmarkJob with genai-bench against its endpoint, without the service.")
    parser.add_argument("job", metavar="JOB.yaml", help="a BenchmarkJob manifest (YAML or JSON)")
    parser.add_argument("--tokenizer", metavar="DIR", help="a local tokenizer directory (default: the model's, "
                        "or slaplan's byte-level tokenizer when offline)")
    parser.add_argument("--endpoint", metavar="URL", type=endpoint_url, help="benchmark this base URL instead of the job's endpoint")
    parser.add_argument("--root", metavar="DIR", help="where file:// and pvc:// locations live (default: "
                        "$SLAPLAN_BENCH_ROOT or ./bench-results)")
    parser.add_argument("--offline", action="store_true", help="do not use the Hugging Face Hub")
    parser.add_argument("--genai-bench", metavar="PATH", help="the genai-bench program (default: $SLAPLAN_GENAI_BENCH "
                        "or the project's own environment)")
    parser.add_argument("--kubeconfig", metavar="PATH", help="resolve spec.endpoint.inferenceService on this "
                        "cluster (default: the cluster SLAPLAN_CLUSTER / SLAPLAN_KUBECONFIG configure)")
    parser.add_argument("--context", help="kubeconfig context (default: its current context)")
    parser.add_argument("--ready-timeout", type=float, metavar="S", help="how long a referenced InferenceService "
                        "may take to become ready (default: $SLAPLAN_BENCH_READY_TIMEOUT or 600 s)")
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    parser.set_defaults(func=run)


# RunnerSettings field -> (the option that sets it, its attribute, the variable it falls back to).
_SOURCES = {"ready_timeout_s": ("--ready-timeout", "ready_timeout", "SLAPLAN_BENCH_READY_TIMEOUT"),
            "tokenizer": ("--tokenizer", "tokenizer", "SLAPLAN_BENCH_TOKENIZER"),
            "local_root": ("--root", "root", "SLAPLAN_BENCH_ROOT"),
            "genai_bench": ("--genai-bench", "genai_bench", "SLAPLAN_GENAI_BENCH")}


def _source(field: str, args: argparse.Namespace) -> str:
    """Where a runner setting's bad value came from: its option when given, else its variable."""
    if field not in _SOURCES:
        return field
    option, attribute, variable = _SOURCES[field]
    return option if getattr(args, attribute, None) is not None else variable


def endpoint_url(text: str) -> str:
    """An argparse type: an http(s) base URL with a host."""
    import httpx

    try:
        url = httpx.URL(text)
    except (httpx.InvalidURL, TypeError) as exc:
        raise argparse.ArgumentTypeError(f"not a URL ({exc}): {text!r}") from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise argparse.ArgumentTypeError(f"must be an http:// or https:// URL with a host, got {text!r}")
    return text


def manifest_causes(obj: dict) -> list[tuple[str, str]]:
    """What makes ``obj`` not a BenchmarkJob manifest: (field, message) pairs (its spec aside)."""
    from reprlib import repr as short

    from api.objects import is_subdomain
    from profiler.bench.spec import API_VERSION, KIND

    causes = [(key, f"must be {want!r}, got {short(obj.get(key))}")
              for key, want in (("apiVersion", API_VERSION), ("kind", KIND)) if obj.get(key) != want]
    metadata = obj.get("metadata", {})
    if not isinstance(metadata, dict):
        causes.append(("metadata", "must be a mapping"))
    elif "name" in metadata and not (isinstance(metadata["name"], str) and is_subdomain(metadata["name"])):
        causes.append(("metadata.name", f"must be a lowercase DNS name (RFC 1123), got {short(metadata['name'])}"))
    return causes


def load_job(path: str) -> dict:
    """The manifest at ``path`` as a dict (the first document of a YAML stream), read as ``slaplan
    plan`` reads manifests: at most MAX_MANIFEST_BYTES of UTF-8, no aliases or duplicate keys.
    Raises ValueError saying why it cannot be read (OSError when the file cannot be opened)."""
    import yaml

    from api.commands.plan import MAX_MANIFEST_BYTES
    from planner.request import DocumentLoader

    with open(path, "rb") as f:
        data = f.read(MAX_MANIFEST_BYTES + 1)
    if len(data) > MAX_MANIFEST_BYTES:
        raise ValueError(f"larger than {MAX_MANIFEST_BYTES // 2**20} MiB: not a BenchmarkJob manifest")
    try:
        docs = [d for d in yaml.load_all(data.decode("utf-8"), Loader=DocumentLoader) if d is not None]
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start + 1})") from None
    except yaml.MarkedYAMLError as exc:  # a syntax error, an alias or a key given twice
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ValueError(f"not a valid manifest: {where}{exc.problem}") from None
    except (yaml.YAMLError, RecursionError):
        raise ValueError("not a valid manifest: not YAML, or nested too deeply") from None
    if not docs or not isinstance(docs[0], dict):
        raise ValueError("holds no object")
    return docs[0]


def _resolver(args: argparse.Namespace, timeout_s: float, say):
    """A resolver of InferenceService references on the configured cluster, or None."""
    from infra.inference_services import resolver_for
    from infra.kube import connect

    if args.kubeconfig or args.context:
        return resolver_for(lambda: connect(kubeconfig=args.kubeconfig, context=args.context), timeout_s=timeout_s,
                            progress=say)
    from infra.kube import cluster_from_settings
    from infra.settings import load_settings

    settings = load_settings()
    if settings.cluster == "none":
        return None
    return resolver_for(lambda: cluster_from_settings(settings), timeout_s=timeout_s, progress=say)


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from profiler.bench.spec import BenchmarkJobError, parse_benchmarkjob
    from profiler.bench.results import status_metrics
    from profiler.bench.runner import run_benchmarkjob, runner_settings, summary

    try:
        obj = load_job(args.job)
    except OSError as exc:
        print(f"error: {args.job}: cannot read: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"error: {args.job}: {exc}", file=sys.stderr)
        return 2
    causes = manifest_causes(obj)
    try:
        spec = parse_benchmarkjob(obj)
    except BenchmarkJobError as exc:
        causes += exc.causes
    if causes:
        for field, message in causes:
            print(f"error: {field}: {message}", file=sys.stderr)
        return 2
    name = str((obj.get("metadata") or {}).get("name") or "benchmark")
    try:
        settings = runner_settings(tokenizer=args.tokenizer, local_root=args.root, genai_bench=args.genai_bench,
                                   offline=True if args.offline else None, ready_timeout_s=args.ready_timeout)
    except ValidationError as exc:
        for error in exc.errors(include_input=False):
            field = str(error["loc"][-1]) if error["loc"] else "settings"
            print(f"error: {_source(field, args)}: {error['msg'].removeprefix('Value error, ')}", file=sys.stderr)
        return 2
    say = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    outcome = run_benchmarkjob(spec, name=name, settings=settings, endpoint=args.endpoint,
                               resolver=_resolver(args, settings.ready_timeout_s, say), progress=say)
    if args.json:
        print(json.dumps({"ok": outcome.ok, "failure": outcome.failure, "details": outcome.details,
                          "experimentDir": outcome.experiment_dir, "results": status_metrics(outcome.results)},
                         indent=2))
    else:
        print(summary(outcome))
    return 0 if outcome.ok else 1
