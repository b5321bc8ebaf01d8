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


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "bench", help="run one BenchmarkJob (ome.io/v1beta1) locally with genai-bench and print its results",
        description="Run a BenchmarkJob with genai-bench against its endpoint, without the service.")
    parser.add_argument("job", metavar="JOB.yaml", help="a BenchmarkJob manifest (YAML or JSON)")
    parser.add_argument("--tokenizer", metavar="DIR", help="a local tokenizer directory (default: the model's, "
                        "or slaplan's byte-level tokenizer when offline)")
    parser.add_argument("--endpoint", metavar="URL", help="benchmark this base URL instead of the job's endpoint")
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


def load_job(path: str) -> dict:
    """The manifest at ``path`` as a dict (the first document of a YAML stream)."""
    import yaml

    with open(path, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    if not docs or not isinstance(docs[0], dict):
        raise ValueError(f"{path} holds no object")
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

    from planner.benchmarkjob import KIND, BenchmarkJobError, parse_benchmarkjob
    from profiler.bench_results import status_metrics
    from profiler.bench_runner import run_benchmarkjob, runner_settings, summary

    try:
        obj = load_job(args.job)
    except (OSError, ValueError) as exc:
        print(f"error: {args.job}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a YAML syntax error
        print(f"error: {args.job}: not valid YAML: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    if obj.get("kind", KIND) != KIND:
        print(f"error: kind: expected {KIND}, got {obj.get('kind')!r}", file=sys.stderr)
        return 2
    try:
        spec = parse_benchmarkjob(obj)
    except BenchmarkJobError as exc:
        for field, message in exc.causes:
            print(f"error: {field}: {message}", file=sys.stderr)
        return 2
    name = str((obj.get("metadata") or {}).get("name") or "benchmark")
    try:
        settings = runner_settings(tokenizer=args.tokenizer, local_root=args.root, genai_bench=args.genai_bench,
                                   offline=True if args.offline else None, ready_timeout_s=args.ready_timeout)
    except ValidationError as exc:
        for error in exc.errors(include_input=False):
            print(f"error: {'.'.join(map(str, error['loc']))}: {error['msg']}", file=sys.stderr)
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
