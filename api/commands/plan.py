"""``slaplan plan FILE... [--out DIR] [--format yaml|json] [--api-version v1alpha1|v1beta1] [--target …]``

Plans every DGDR in the files, prints the best candidates and the chosen plan, and writes
per request ``DIR/<name>.dgd.yaml`` (or ``.dgd.json``), ``DIR/<name>.plan.json`` and, with
``--target``, ``DIR/<name>.<target>.yaml``. All input is validated before anything is
planned or written, and each file is written whole (temporary file, then rename).
Exit codes: 0 every plan feasible, 2 any infeasible, 1 invalid input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import yaml

from api.commands.estimate import parts_text
from planner.types import PlanRequest, PlanResult

TARGETS = ("dynamo", "ome", "kthena", "kubeai")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="plan DynamoGraphDeploymentRequests offline",
                       description="Find the cheapest deployment that meets each DGDR's SLA.")
    p.add_argument("files", nargs="+", metavar="FILE", help="DGDR YAML or JSON files ('-' for stdin)")
    p.add_argument("--out", default="out", help="output directory (default: ./out)")
    p.add_argument("--format", choices=("yaml", "json"), default="yaml", help="format of the DGD file")
    p.add_argument("--api-version", choices=("v1alpha1", "v1beta1"), default="v1alpha1", help="DGD API version")
    p.add_argument("--target", action="append", choices=(*TARGETS, "all"),
                   help="also write manifests for this system (repeatable; 'all' for every one)")
    p.add_argument("--workers", type=int, default=0, help="parallel planner processes (default: by file count)")
    p.add_argument("--top", type=int, default=5, help="candidates to show per request")
    p.add_argument("--quiet", action="store_true", help="print only errors and the summary line")
    p.set_defaults(func=run)


def _read(path: str) -> str:
    return sys.stdin.read() if path == "-" else Path(path).read_text()


def _validate(files: list[str], models: dict) -> tuple[list[PlanRequest], list[str]]:
    """Parse every file and load each model (catalog, config.json path or Hub) into ``models``;
    returns (requests, errors)."""
    from planner.request import RequestError, parse_documents

    from profiler.errors import ModelError
    from profiler.hub import load_model

    requests, errors = [], []
    for path in files:
        try:
            found = parse_documents(_read(path), path)
        except RequestError as exc:
            errors += [f"{path}: {field}: {msg}" for field, msg in exc.causes] or [f"{path}: {exc}"]
            continue
        except OSError as exc:
            errors.append(f"{path}: cannot read: {exc.strerror or exc}")
            continue
        for req in found:
            try:
                models[req.model] = load_model(req.model)
            except ModelError as exc:
                errors.append(f"{path}: {req.name}: spec.modelName (v1beta1: spec.model): {exc.message}")
        requests += found
    names = [r.name for r in requests]
    errors += [f"metadata.name: {n!r} appears more than once" for n in sorted({n for n in names if names.count(n) > 1})]
    return requests, errors


def _plan_one(job) -> PlanResult:
    from infra.calibrations import with_calibration
    from planner import plan

    request, model, calibration = job
    params = calibration.params if calibration else None
    return with_calibration(plan(request, model=model, params=params), calibration)


def _calibrations(requests: list[PlanRequest]) -> dict[tuple[str, str, str], object]:
    """Stored calibrations by (model, gpu, backend), from the service's database
    (SLAPLAN_DATABASE_URL or the default SQLite file); one that cannot be read is said, and
    planning goes on with the shipped parameters."""
    from infra.calibrations import read_calibrations
    from infra.settings import load_settings

    found, problem = read_calibrations(load_settings(), [(r.model, r.gpu, r.backend) for r in requests])
    if problem:
        print(f"note: {problem}; planning with the shipped parameters", file=sys.stderr)
    return found


def _write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _dump(obj, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(obj, indent=2) + "\n"
    return yaml.safe_dump_all(obj, sort_keys=False) if isinstance(obj, list) else yaml.safe_dump(obj, sort_keys=False)


def _manifests(result: PlanResult, targets: list[str], api_version: str) -> tuple[dict[str, object], list[str]]:
    """Rendered manifests per target, and notes (e.g. a target that cannot run the chosen plan)."""
    from planner.manifests.common import UnsupportedPlan
    from planner.manifests.dynamo import render_dgd
    from planner.manifests.kthena import render_kthena
    from planner.manifests.kubeai import render_kubeai
    from planner.manifests.ome import render_ome

    req, chosen = result.request, result.chosen
    out, notes = {"dynamo": render_dgd(chosen, req, api_version=api_version)}, []
    renderers = {"ome": render_ome, "kthena": render_kthena, "kubeai": render_kubeai}
    for target in targets:
        if target == "dynamo":
            continue
        try:
            out[target] = renderers[target](chosen, req)
        except UnsupportedPlan as exc:
            fallback = _best_aggregated(result)
            if fallback is None:
                notes.append(f"{target}: {exc}; no aggregated plan meets the SLA")
                continue
            out[target] = renderers[target](fallback, req)
            notes.append(f"{target}: {exc}; wrote the best aggregated plan instead "
                         f"({fallback.total_gpus} GPUs)")
    return out, notes


def _best_aggregated(result: PlanResult):
    agg = [p for p in result.candidates if p.mode == "agg" and p.feasible]
    return min(agg, key=lambda p: (p.cost_per_hour or p.total_gpus, -p.predicted.tok_s_per_user), default=None)


def _shape(plan) -> str:
    parts = []
    for e in plan.engines:
        par = f"tp{e.tp}" + (f"pp{e.pp}" if e.pp > 1 else "") + (f"dp{e.dp}" if e.dp > 1 else "") + (f"ep{e.ep}" if e.ep > 1 else "")
        parts.append(f"{e.replicas}×{par}" if e.role == "aggregated" else f"{e.role[0].upper()}{e.replicas}×{par}")
    return " + ".join(parts)


def table(result: PlanResult, top: int) -> str:
    """The best candidates (feasible first, cheapest first) and the chosen plan, as text."""
    req = result.request
    goodput = req.concurrency is None and req.request_rate is None
    rows = sorted(result.candidates, key=lambda p: (
        not p.feasible, -p.predicted.output_tok_s_per_gpu if goodput else (p.cost_per_hour or p.total_gpus),
        -p.predicted.tok_s_per_user))[:top]
    head = (f"{req.name}: {req.model} on {req.gpu} ({req.backend}), ISL {req.isl_tokens}/OSL {req.osl_tokens}, "
            f"SLA TTFT ≤ {req.ttft_ms:g} ms, ITL ≤ {req.itl_ms:g} ms"
            + (f", concurrency {req.concurrency}" if req.concurrency else "")
            + (f", {req.request_rate:g} req/s" if req.request_rate else "")
            + (f", budget {req.total_gpus} GPUs" if req.total_gpus else ""))
    lines = [head, f"  {'':2}{'mode':7}{'shape':28}{'GPUs':>5}{'TTFT ms':>9}{'ITL ms':>8}{'tok/s/GPU':>10}{'tok/s/user':>11}"]
    for p in rows:
        mark = "→" if result.chosen is not None and p == result.chosen else ("✓" if p.feasible else "✗")
        pr = p.predicted
        lines.append(f"  {mark:2}{p.mode:7}{_shape(p):28}{p.total_gpus:>5}{pr.ttft_ms:>9.0f}{pr.itl_ms:>8.1f}"
                     f"{pr.output_tok_s_per_gpu:>10.0f}{pr.tok_s_per_user:>11.1f}")
    if result.chosen is not None:
        c = result.chosen
        lines.append(f"  chosen: {c.mode} {_shape(c)} = {c.total_gpus} GPUs, TTFT {c.predicted.ttft_ms:.0f} ms "
                     f"(p99 {c.predicted.ttft_p99_ms:.0f}), ITL {c.predicted.itl_ms:.1f} ms, "
                     f"{c.predicted.output_tok_s_per_gpu:.0f} tok/s/GPU ({result.evaluated} evaluated)")
        if c.predicted.ttft_parts is not None and c.predicted.itl_parts is not None:
            lines.append(f"    TTFT = {parts_text(c.predicted.ttft_parts)}; ITL = {parts_text(c.predicted.itl_parts)}")
    else:
        lines.append(f"  infeasible: {result.reason}")
    return "\n".join(lines)


def _progress(done: int, total: int) -> None:
    if total > 1 and sys.stderr.isatty():
        width = 30
        filled = width * done // total
        print(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}", end="", file=sys.stderr, flush=True)
        if done == total:
            print(file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from planner.report import plan_document

    models: dict = {}
    requests, errors = _validate(args.files, models)
    if errors:
        for e in errors:
            print(f"error: {e}", file=sys.stderr)
        return 1
    targets = list(TARGETS) if args.target and "all" in args.target else sorted(set(args.target or []))
    calibrations = _calibrations(requests)
    jobs = [(r, models[r.model], calibrations.get((r.model, r.gpu, r.backend))) for r in requests]
    workers = args.workers or (min(os.cpu_count() or 1, len(requests)) if len(requests) >= 4 else 1)
    results: list[PlanResult] = []
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for i, res in enumerate(pool.map(_plan_one, jobs), 1):
                results.append(res)
                _progress(i, len(requests))
    else:
        for i, job in enumerate(jobs, 1):
            results.append(_plan_one(job))
            _progress(i, len(requests))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    infeasible = 0
    for res in results:
        name = res.request.name
        doc = plan_document(res)
        if res.feasible:
            manifests, notes = _manifests(res, targets, args.api_version)
            doc["notes"] = notes
            ext = "json" if args.format == "json" else "yaml"
            _write(out / f"{name}.dgd.{ext}", _dump(manifests.pop("dynamo"), args.format))
            for target, obj in manifests.items():
                _write(out / f"{name}.{target}.yaml", _dump(obj, "yaml"))
            for note in notes:
                print(f"note: {name}: {note}", file=sys.stderr)
        else:
            infeasible += 1
        _write(out / f"{name}.plan.json", json.dumps(doc, indent=2) + "\n")
        if not args.quiet:
            print(table(res, args.top) + "\n")
    print(f"{len(results)} planned, {len(results) - infeasible} feasible, {infeasible} infeasible; written to {out}/")
    return 2 if infeasible else 0
