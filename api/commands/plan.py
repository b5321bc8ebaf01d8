"""``slaplan plan FILE... [--out DIR] [--format yaml|json] [--api-version v1alpha1|v1beta1] [--target …]
[--kthena-group GROUP] [--db …]``

Plans every DGDR in the files, prints the best candidates and the chosen plan and which stored
calibration each used (or that none: ``api.commands.calibration_use``), and writes
per request ``DIR/<name>.dgd.yaml`` (or ``.dgd.json``), ``DIR/<name>.plan.json`` and, with
``--target``, ``DIR/<name>.<target>.yaml`` (a name longer than MAX_STEM characters is shortened
to its start and a hash of the whole: ``file_stem``). Input files are UTF-8, at most
MAX_MANIFEST_BYTES each. Input and options are all validated before anything is planned; the
files are written once every request is planned, each to a temporary file beside it, then all
renamed into place. Exit codes: 0 every plan feasible, 2 any infeasible, 1 invalid input or
options, or an output file that cannot be written (named; no file is left half-written).

Registering the command imports nothing beyond the standard library; the planner, pydantic and
YAML are imported when it runs, SQLAlchemy only when there is a database to read, numpy's
BLAS starts without a thread pool (``_one_blas_thread``) and pydantic looks for no plugins
(``_no_pydantic_plugins``).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import json
import os
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from api.commands.arguments import KTHENA_GROUPS, TARGETS, kthena_group
from api.commands.database import add_db_argument
from api.commands.cells import cell, parts_text

if TYPE_CHECKING:
    from api.commands.calibration_use import Calibrations
    from planner.results import ProfilingResults
    from planner.types import PlanRequest, PlanResult

MAX_MANIFEST_BYTES = 1024 * 1024  # bytes of one input file: more is not a manifest (the API's body limit too)
MAX_STEM = 200  # characters of a name in file names: with ".kthena.yaml" and the temporary
#                 file's affixes, well within the 255 bytes a file name may have


class InputError(ValueError):
    """An input file that cannot be read as manifests (the message does not name the file)."""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("plan", help=summary,
                       description="Find the cheapest deployment that meets each DGDR's SLA.")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help=f"DGDR YAML or JSON files, UTF-8, at most {MAX_MANIFEST_BYTES // 2**20} MiB each "
                        "('-' for stdin)")
    p.add_argument("--out", default="out", help="output directory (default: ./out)")
    p.add_argument("--format", choices=("yaml", "json"), default="yaml", help="format of the DGD file")
    p.add_argument("--api-version", choices=("v1alpha1", "v1beta1"), default="v1alpha1", help="DGD API version")
    p.add_argument("--target", action="append", choices=(*TARGETS, "all"),
                   help="also write manifests for this system (repeatable; 'all' for every one)")
    p.add_argument("--kthena-group", type=kthena_group, default=KTHENA_GROUPS[0], metavar="GROUP",
                   help=f"API group of Kthena's ModelServing: {' or '.join(KTHENA_GROUPS)} (default: "
                        f"{KTHENA_GROUPS[0]}; only {KTHENA_GROUPS[1]} has an AutoscalingPolicy for a replica range)")
    p.add_argument("--workers", type=int, default=None,
                   help="planner processes in parallel, 1 up to the CPU count (more are not started; "
                        "default: one per CPU for 4 requests or more, else 1)")
    p.add_argument("--top", type=int, default=5, help="candidates to show per request, at least 1 (default: 5)")
    p.add_argument("--quiet", action="store_true", help="print only errors and the summary line")
    add_db_argument(p)
    p.set_defaults(func=run, parser=p, ends_at_once=True)
    p.error = partial(_usage_error, p)


def _usage_error(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    """argparse's usage error, with exit code 1 (invalid input) instead of its 2, which ``plan``
    gives to infeasible requests."""
    parser.print_usage(sys.stderr)
    parser.exit(1, f"{parser.prog}: error: {message}\n")


def _read(path: str) -> str:
    """The text of an input file ('-': stdin), read up to MAX_MANIFEST_BYTES; InputError when it
    cannot be read, is larger or is not UTF-8."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_MANIFEST_BYTES + 1)
        else:
            with open(path, "rb") as fh:
                data = fh.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise InputError(f"larger than {MAX_MANIFEST_BYTES // 2**20} MiB: not a DGDR manifest")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start + 1}): a DGDR manifest is YAML or JSON") from None


def file_stem(name: str) -> str:
    """How a request's files are named (``<stem>.plan.json``, …): its name, or for a name longer than
    MAX_STEM characters, its first MAX_STEM - 9 and 8 hex digits of the whole name's SHA-256."""
    if len(name) <= MAX_STEM:
        return name
    return f"{name[:MAX_STEM - 9]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def _option_errors(args: argparse.Namespace) -> list[str]:
    """What is wrong with the options that need no file system to check."""
    errors = []
    if not args.out:
        errors.append("--out: must name a directory (use . for the working directory)")
    if args.top < 1:
        errors.append(f"--top: must be at least 1 (got {args.top})")
    if args.workers is not None and args.workers < 1:
        errors.append(f"--workers: must be at least 1 (got {args.workers})")
    return errors


def _out_dir(out: str) -> str | None:
    """Make the output directory ``out`` (and its parents); None, or the one-line error naming --out."""
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = "exists and is not a directory" if isinstance(exc, FileExistsError) else exc.strerror or exc
        return f"--out {out}: cannot be the output directory: {reason}"
    if not os.access(out, os.W_OK | os.X_OK):
        return f"--out {out}: cannot be the output directory: not writable"
    return None


def _validate(files: list[str], models: dict) -> tuple[list[PlanRequest], list[str]]:
    """Parse every file and load each model (catalog, config.json path or Hub) into ``models``;
    returns (requests, errors)."""
    from planner.request import RequestError, parse_documents

    from profiler.model.errors import ModelError
    from profiler.hub import load_model

    requests, errors = [], []
    for path in files:
        source = "<stdin>" if path == "-" else path
        try:
            found = parse_documents(_read(path), source)
        except RequestError as exc:
            errors += [f"{source}: {field + ': ' if field else ''}{msg}" for field, msg in exc.causes] or [str(exc)]
            continue
        except InputError as exc:
            errors.append(f"{source}: {exc}")
            continue
        for req in found:
            try:
                models[req.model] = load_model(req.model)
            except ModelError as exc:
                errors.append(f"{source}: {req.name}: spec.modelName (v1beta1: spec.model): {exc.message}")
        requests += found
    return requests, errors + _clashes([r.name for r in requests])


def _clashes(names: list[str]) -> list[str]:
    """A request name given twice, or names whose files would have the same name (see file_stem)."""
    by_stem: dict[str, set[str]] = {}
    for name in names:
        by_stem.setdefault(file_stem(name), set()).add(name)
    errors = [f"metadata.name: {n!r} appears more than once" for n in sorted(set(names)) if names.count(n) > 1]
    errors += [f"metadata.name: {' and '.join(map(repr, sorted(same)))} would write the same files ({stem}.*)"
               for stem, same in sorted(by_stem.items()) if len(same) > 1]
    return errors


def _plan_one(job) -> PlanResult:
    from infra.planning import plan_with_calibration

    request, model, calibration = job
    return plan_with_calibration(request, calibration, model=model)


def _key(request: PlanRequest) -> tuple[str, str, str]:
    """What a calibration is stored under, as the request names it: (model, gpu, backend)."""
    return request.model, request.gpu, request.backend


def _calibrations(args: argparse.Namespace, requests: list[PlanRequest]) -> Calibrations:
    """Stored calibrations by (model, gpu, backend), from the database (``--db``, SLAPLAN_DATABASE_URL
    or the per-user file); one that cannot be read is said, and planning goes on with the shipped
    parameters."""
    from api.commands.calibration_use import read_calibrations

    found = read_calibrations(args, [_key(r) for r in requests])
    if found.problem:
        print(f"note: {found.problem}; planning with the shipped parameters", file=sys.stderr)
    return found


def _new_file_mode() -> int:
    """The permissions ``open`` gives a new file under this process's umask (mkstemp's are 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _write_all(files: list[tuple[Path, str]]) -> str | None:
    """Write every (path, text): each to a temporary file beside it, then all renamed into place,
    so no file is half-written, and one that cannot be written (no space, a directory in the way)
    leaves every file as it was. None, or the one-line error naming the path that could not be written
    (temporary files are removed)."""
    staged: list[tuple[str, Path]] = []
    path = None
    mode = _new_file_mode()
    try:
        for path, text in files:
            if path.is_dir():  # found now, before any file is replaced, rather than by os.replace
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            staged.append((tmp, path))
            os.fchmod(fd, mode)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
        for tmp, path in staged:
            os.replace(tmp, path)
    except OSError as exc:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):  # already renamed into place
                os.unlink(tmp)
        return f"cannot write {path}: {exc.strerror or exc}"
    return None


def _dump(obj, fmt: str) -> str:
    from api.objects import manifests_yaml

    if fmt == "json":
        return json.dumps(obj, indent=2) + "\n"
    return manifests_yaml(obj if isinstance(obj, list) else [obj])


def _manifests(stored: ProfilingResults, request: PlanRequest, targets: list[str], api_version: str,
               kthena_group: str) -> tuple[dict[str, object], list[str]]:
    """Rendered manifests per target (Dynamo always; the DGD at ``api_version``, Kthena's ModelServing
    in ``kthena_group``), and one-line notes: a target that runs another plan than the chosen one,
    or that cannot run this plan at all (nothing written)."""
    from planner.manifests.common import UnsupportedPlan
    from planner.manifests.targets import render_target

    out, notes = {}, []
    for target in ["dynamo", *(t for t in targets if t != "dynamo")]:
        try:
            objects, said = render_target(stored, request, target, dynamo_version=api_version,
                                          kthena_group=kthena_group)
        except UnsupportedPlan as exc:
            notes.append(f"{exc}; no {target} manifest written")
            continue
        out[target] = objects[0] if target == "dynamo" and len(objects) == 1 else objects
        notes += said
    return out, notes


def _order(result: PlanResult):
    """Sort key of the table's rows: the closest configuration of an infeasible answer first, then the
    feasible plans as the planner prefers them, then the others nearest to the SLA first."""
    from planner.choice import preference, shortfall

    req = result.request

    def key(p) -> tuple:
        if p.feasible:
            return (1, preference(p, req))
        return (0 if p == result.closest else 2, (shortfall(p, req), p.total_gpus))
    return key


def table(result: PlanResult, top: int, api_version: str = "v1alpha1", kthena_group: str = KTHENA_GROUPS[0]) -> str:
    """The best candidates (feasible first, as the planner prefers them) and the chosen plan, as text
    (with the replica range each target's manifests emit, the DGD at ``api_version``, Kthena's
    ModelServing in ``kthena_group``); an infeasible answer shows the configuration its reason names first."""
    from planner.choice import margin_text
    from planner.manifests.targets import scaling_text
    from planner.request import profiling_label
    from profiler.model import ms_text

    req = result.request
    rows = sorted(result.candidates, key=_order(result))[:top]
    head = (f"{req.name}: {req.model} on {req.gpu} ({req.backend}), ISL {req.isl_tokens}/OSL {req.osl_tokens}, "
            f"SLA TTFT ≤ {req.ttft_ms:g} ms, ITL ≤ {req.itl_ms:g} ms"
            + (f", concurrency {req.concurrency}" if req.concurrency else "")
            + (f", {req.request_rate:g} req/s" if req.request_rate else "")
            + (f", budget {req.total_gpus} GPUs" if req.total_gpus else ""))
    ran = profiling_label(False) + (f"; {profiling_label(True)} was asked: it runs in the service (slaplan serve)"
                                    if req.online else "")
    lines = [head, f"  profiling: {ran}", f"  {'':2}{'mode':7}{'shape':28}{'GPUs':>5}{'TTFT ms':>10}{'ITL ms':>10}"
                                          f"{'tok/s/GPU':>10}{'tok/s/user':>11}"]
    for p in rows:
        mark = "→" if result.chosen is not None and p == result.chosen else ("✓" if p.feasible else "✗")
        pr = p.predicted
        lines.append(f"  {mark:2}{p.mode:7}{p.shape():28}{p.total_gpus:>5}{cell(pr.ttft_ms, 0, 10)}"
                     f"{cell(pr.itl_ms, 1, 10)}{cell(pr.output_tok_s_per_gpu, 0, 10)}{cell(pr.tok_s_per_user, 1, 11)}")
    if result.chosen is not None:
        c = result.chosen
        lines.append(f"  chosen: {c.mode} {c.shape()} = {c.total_gpus} GPUs, TTFT {c.predicted.ttft_ms:.0f} ms "
                     f"(p99 {ms_text(c.predicted.ttft_p99_ms, 0)}), ITL {c.predicted.itl_ms:.1f} ms, "
                     f"{c.predicted.output_tok_s_per_gpu:.0f} tok/s/GPU ({result.evaluated} evaluated)")
        lines.append(f"    capacity: {capacity_text(result)}")
        scaling = scaling_text(c, dynamo_version=api_version, kthena_group=kthena_group)
        if scaling:
            lines.append(f"    autoscaling range: {scaling}")
        if result.margin is not None:
            lines.append(f"    margin: {margin_text(result.margin)}")
        if c.predicted.ttft_parts is not None and c.predicted.itl_parts is not None:
            lines.append(f"    TTFT = {parts_text(c.predicted.ttft_parts)}; ITL = {parts_text(c.predicted.itl_parts)}")
    else:
        lines.append(f"  infeasible: {result.reason}")
    return "\n".join(lines)


def capacity_text(result: PlanResult) -> str:
    """The load the chosen plan serves within the SLA: requests/s and requests in flight (and, for a
    mix of engine shapes, each shape's share)."""
    c, req = result.chosen, result.request
    p = c.predicted
    text = f"{p.requests_per_s:.2f} req/s, {p.concurrency:.0f} requests in flight within the SLA"
    if req.total_gpus and req.concurrency is None and req.request_rate is None:
        text += f" on {c.total_gpus} of the {req.total_gpus}-GPU budget"
    if c.parts:
        text += "; shares: " + ", ".join(f"{p.shape()} {p.predicted.requests_per_s:.2f} req/s" for p in c.parts)
    return text


def _progress(done: int, total: int) -> None:
    if total > 1 and sys.stderr.isatty():
        width = 30
        filled = width * done // total
        print(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}", end="", file=sys.stderr, flush=True)
        if done == total:
            print(file=sys.stderr)


def _outputs(results: list[PlanResult], args: argparse.Namespace, targets: list[str], out: Path,
             calibrations: Calibrations) -> list[tuple[Path, str]]:
    """(path, text) of every file to write, printing each request's table and calibration (unless
    --quiet) and notes."""
    from planner.report import plan_document
    from planner.results import ProfilingResults

    files = []
    for res in results:
        name, stem = res.request.name, file_stem(res.request.name)
        stored = ProfilingResults.of(res)
        doc = plan_document(res, stored)
        doc["calibration"] = calibrations.document(_key(res.request))
        if res.feasible:
            manifests, notes = _manifests(stored, res.request, targets, args.api_version, args.kthena_group)
            doc["notes"] = notes
            ext = "json" if args.format == "json" else "yaml"
            if "dynamo" in manifests:
                files.append((out / f"{stem}.dgd.{ext}", _dump(manifests.pop("dynamo"), args.format)))
            files += [(out / f"{stem}.{target}.yaml", _dump(obj, "yaml")) for target, obj in manifests.items()]
            for note in notes:
                print(f"note: {name}: {note}", file=sys.stderr)
        files.append((out / f"{stem}.plan.json", json.dumps(doc, indent=2) + "\n"))
        if not args.quiet:
            text = table(res, args.top, args.api_version, args.kthena_group)
            print(f"{text}\n  {calibrations.line(_key(res.request))}\n")
    return files


def _calibration_summary(calibrations: Calibrations, keys: list[tuple[str, str, str]]) -> str:
    """How many requests a stored calibration changed, and from which database (said even with --quiet)."""
    used = sum(calibrations.used(k) is not None for k in keys)
    if used:
        return f"{used} planned with a stored calibration from {calibrations.database}"
    where = "database" if calibrations.exists else "no database at"
    return f"no stored calibration used ({where} {calibrations.database})"


def _workers(asked: int | None, requests: int) -> int:
    """Planner processes for ``requests`` requests: ``asked`` (default: one per CPU from 4 requests
    on, else 1), but never more than the CPUs or the requests."""
    cpus = os.cpu_count() or 1
    return min(asked or (cpus if requests >= 4 else 1), cpus, requests)


def _fail(errors: list[str]) -> int:
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    return 1


def _one_blas_thread() -> None:
    """Have numpy's OpenBLAS start with one thread, unless the user chose a number or numpy is loaded
    already: the planner's numpy work is element-wise (it makes no BLAS call), so a thread pool only
    costs start-up time (its creation: about a tenth of the command's) and contends with the planner
    processes of --workers. The results are the same."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _no_pydantic_plugins() -> None:
    """Have pydantic look for no plugins, unless the user chose which (PYDANTIC_DISABLE_PLUGINS): its
    search reads the entry points of every installed distribution when the first model is built,
    and the planner's models need none. The results are the same."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def run(args: argparse.Namespace) -> int:
    from api.commands.start_up import loaded

    _one_blas_thread()
    _no_pydantic_plugins()
    models: dict = {}
    requests, errors = _validate(args.files, models)
    loaded()
    errors = _option_errors(args) + errors
    if not errors and (problem := _out_dir(args.out)):
        errors.append(problem)
    if errors:
        return _fail(errors)
    targets = list(TARGETS) if args.target and "all" in args.target else sorted(set(args.target or []))
    calibrations = _calibrations(args, requests)
    jobs = [(r, models[r.model], calibrations.used(_key(r))) for r in requests]
    workers = _workers(args.workers, len(requests))
    results: list[PlanResult] = []
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers) as pool:
            for i, res in enumerate(pool.map(_plan_one, jobs), 1):
                results.append(res)
                _progress(i, len(requests))
    else:
        for i, job in enumerate(jobs, 1):
            results.append(_plan_one(job))
            _progress(i, len(requests))
    out = Path(args.out)
    problem = _write_all(_outputs(results, args, targets, out, calibrations))
    if problem:
        return _fail([problem])
    infeasible = sum(not res.feasible for res in results)
    print(f"{len(results)} planned, {len(results) - infeasible} feasible, {infeasible} infeasible; written to {out}/; "
          f"{_calibration_summary(calibrations, [_key(r) for r in requests])}")
    return 2 if infeasible else 0
