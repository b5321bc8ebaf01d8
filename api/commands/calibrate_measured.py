"""``slaplan calibrate --from-benchmarks PATH… --model M --gpu G [--backend B] [--tp …]``: fit the
performance model to genai-bench's measurements of one deployment and store the result for
later plans of the same model, GPU and backend (in the service's database: ``--db``, else
SLAPLAN_DATABASE_URL, else the per-user SQLite file; see ``api.commands.database``).

A PATH is a genai-bench experiment folder, a folder of experiment folders (a BenchmarkJob's
output location), or a BenchmarkJob manifest whose local ``outputLocation`` holds its results
(its newest run). Everything is read and checked before anything is stored. Exit codes: 0
stored, 2 invalid input (nothing stored). ``--list-calibrations`` prints what is stored;
``--forget --model M --gpu G [--backend B]`` deletes one (exit 1 when there was none). These
three modes and ``--data`` exclude each other.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from api.commands.arguments import positive
from api.commands.database import add_db_argument

if TYPE_CHECKING:
    from infra.settings import Settings

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


class InputError(ValueError):
    """Input the calibration cannot use; the message starts with the option or path at fault."""


def add_arguments(parser: argparse.ArgumentParser, modes) -> list[argparse.Action]:
    """This module's options; ``--from-benchmarks``, ``--list-calibrations`` and ``--forget`` go in ``modes``,
    the mutually exclusive group of ``slaplan calibrate``'s modes. Returns the options that describe the
    deployment (what ``--from-benchmarks`` reads) and ``--db`` (the three modes' database)."""
    group = parser.add_argument_group("calibration from measurements of one deployment")
    options: list[argparse.Action] = []

    def add(*names: str, **kwargs) -> None:
        options.append(group.add_argument(*names, **kwargs))

    modes.add_argument("--from-benchmarks", nargs="+", metavar="PATH",
                       help="genai-bench result folders, or BenchmarkJob manifests whose outputLocation holds results")
    add("--model", help="the deployment's model (catalog name or Hugging Face id)")
    add("--gpu", help="its GPU type, e.g. h100_sxm")
    add("--backend", default="vllm", choices=("vllm", "sglang", "trtllm"))
    add("--mode", default="agg", choices=("agg", "disagg"))
    add("--tp", type=positive, default=1, help="tensor parallelism of each engine")
    add("--pp", type=positive, default=1, help="pipeline parallelism")
    add("--dp", type=positive, default=1, help="attention data-parallelism")
    add("--ep", type=positive, default=1, help="expert parallelism (MoE)")
    add("--replicas", type=positive, default=1, help="aggregated engines behind the endpoint")
    add("--prefill-tp", type=positive, help="disagg: prefill engine TP (default --tp)")
    add("--decode-tp", type=positive, help="disagg: decode engine TP (default --tp)")
    add("--prefill-workers", type=positive, default=1, help="disagg: prefill engines")
    add("--decode-workers", type=positive, default=1, help="disagg: decode engines")
    add("--precision", help="weights: bf16 | fp8 | fp4 | int4 (default: implied by the model)")
    add("--kv-dtype", help="KV cache: bf16 | fp8 | fp4")
    add("--max-batch", type=positive, help="running sequences per engine (default: what KV memory allows)")
    add("--max-num-tokens", type=positive, help="tokens per step of each attention-DP rank (prefill chunk)")
    modes.add_argument("--list-calibrations", action="store_true", help="print the stored calibrations")
    modes.add_argument("--forget", action="store_true",
                       help="delete the stored calibration of --model, --gpu and --backend")
    add("--root", metavar="DIR", help="where a manifest's file:// and pvc:// locations live "
        "(default: $SLAPLAN_BENCH_ROOT or ./bench-results)")
    options.append(add_db_argument(group))
    return options


def deployment(args: argparse.Namespace):
    """The measured deployment as a ServingConfig (its load fields are placeholders)."""
    from profiler.model.config import Parallel, ServingConfig

    if not args.model:
        raise InputError("--model: required with --from-benchmarks")
    if not args.gpu:
        raise InputError("--gpu: required with --from-benchmarks")

    def parallel(tp: int | None) -> Parallel:
        return Parallel(tp=tp or args.tp, pp=args.pp, dp=args.dp, moe_ep=args.ep)

    roles = ({"engine": parallel(None), "replicas": args.replicas} if args.mode == "agg" else
             {"prefill": parallel(args.prefill_tp), "decode": parallel(args.decode_tp),
              "prefill_workers": args.prefill_workers, "decode_workers": args.decode_workers})
    return ServingConfig(model=args.model, gpu=args.gpu, backend=args.backend, precision=args.precision,
                         kv_dtype=args.kv_dtype, mode=args.mode, max_batch=args.max_batch,
                         max_num_tokens=args.max_num_tokens, isl_tokens=1, osl_tokens=1, **roles)


def _is_experiment(folder: Path) -> bool:
    from profiler.bench.results import result_file_kind

    return any(result_file_kind(p.name) in ("result", "metadata") for p in folder.glob("*.json"))


def _manifest_folder(path: Path, root: str | None) -> Path:
    """The newest experiment folder a BenchmarkJob manifest's outputLocation holds."""
    from api.commands.bench import load_job
    from profiler.bench.spec import BenchmarkJobError, parse_benchmarkjob
    from profiler.bench.command import output_target
    from profiler.bench.runner import runner_settings

    try:
        obj = load_job(str(path))
        spec = parse_benchmarkjob(obj)
    except BenchmarkJobError as exc:
        raise InputError(f"{path}: " + "; ".join(f"{f}: {m}" for f, m in exc.causes)) from exc
    except Exception as exc:  # unreadable, not YAML
        raise InputError(f"{path}: {str(exc).splitlines()[0]}") from exc
    name = str((obj.get("metadata") or {}).get("name") or "benchmark")
    if spec.output_location is None:
        raise InputError(f"{path}: spec.outputLocation: not set, so the results' folder is unknown")
    try:
        base = Path(output_target(spec.output_location, runner_settings(local_root=root).local_root).base_dir)
    except ValueError as exc:
        raise InputError(f"{path}: spec.outputLocation: {exc}") from exc
    wanted = spec.result_folder_name or name
    runs = [p for p in base.glob(f"{wanted}*") if p.is_dir() and (p.name == wanted or
            p.name.removeprefix(f"{wanted}-").isdigit()) and _is_experiment(p)]
    if not runs:
        raise InputError(f"{path}: spec.outputLocation: no genai-bench results in {base / wanted}")
    return max(runs, key=lambda p: p.stat().st_mtime)


def experiment_folders(paths: list[str], root: str | None) -> list[Path]:
    """The experiment folders ``paths`` name (see the module docstring)."""
    out: list[Path] = []
    for text in paths:
        path = Path(text)
        if not path.exists():
            raise InputError(f"--from-benchmarks: {path} does not exist")
        if path.is_file():
            if path.suffix not in MANIFEST_SUFFIXES:
                raise InputError(f"--from-benchmarks: {path} is neither a folder nor a BenchmarkJob manifest")
            out.append(_manifest_folder(path, root))
        elif _is_experiment(path):
            out.append(path)
        else:
            found = sorted(p for p in path.iterdir() if p.is_dir() and _is_experiment(p))
            if not found:
                raise InputError(f"--from-benchmarks: {path} holds no genai-bench result files")
            out += found
    return out


def _served_model(folder: Path) -> str | None:
    try:
        meta = json.loads((folder / "experiment_metadata.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return meta.get("api_model_name") if isinstance(meta, dict) else None


def check_model(folder: Path, model: str) -> None:
    """Refuse results whose metadata names a catalog model other than ``model``."""
    from profiler.model.errors import ModelError
    from profiler.model.model_catalog import resolve_model

    served = _served_model(folder)
    if not served:
        return
    try:
        theirs = resolve_model(served)[0].hf_id
    except ModelError:
        return  # a served name outside the catalog ("llama", say): nothing to compare
    if theirs != resolve_model(model)[0].hf_id:
        raise InputError(f"--model: {model!r} does not match {folder}, which measured {served!r}")


def measured_points(folders: list[Path], model: str):
    """The measured points (``profiler.model.measured.Point``) of every successful iteration of ``folders``
    (checked against ``model``). Raises ``InputError`` naming the folder, file and field of a bad mean."""
    from profiler.bench.runner import read_results
    from profiler.model.measured import points_from_iterations

    points = []
    for folder in folders:
        check_model(folder, model)
        results, _failed = read_results(folder)
        ok = [r for r in results if r.successes > 0]
        if not ok:
            raise InputError(f"--from-benchmarks: {folder} has no iteration with a successful request")
        try:
            points += points_from_iterations(ok)
        except ValueError as exc:
            raise InputError(f"--from-benchmarks: {folder}: {exc}") from None
    return points


@contextmanager
def _database(settings: Settings) -> Iterator:
    """A session on the database of ``settings`` (``api.commands.database.command_settings``), migrated."""
    from infra import migrate
    from infra.db import make_engine, make_session_factory, session_scope

    migrate.upgrade(settings)
    engine = make_engine(settings)
    try:
        with session_scope(make_session_factory(engine)) as session:
            yield session
    finally:
        engine.dispose()


def run(args: argparse.Namespace) -> int:
    if args.list_calibrations:
        return list_stored(args)
    if args.forget:
        return forget(args)
    from pydantic import ValidationError

    from api.commands.database import command_settings
    from infra.calibrations import save_calibration
    from profiler.model.errors import ModelError
    from profiler.model.harness import GENAI_BENCH_MS
    from profiler.model.measured import calibration_key, fit_deployment

    try:
        config = deployment(args)
        key = calibration_key(config.model, config.gpu, config.backend)
        folders = experiment_folders(args.from_benchmarks, args.root)
        fit = fit_deployment(config, measured_points(folders, config.model), harness_ms=GENAI_BENCH_MS)
    except ModelError as exc:
        print(f"error: --{exc.field.replace('_', '-')}: {exc.message}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        for e in exc.errors():
            message = e["msg"].removeprefix("Value error, ")
            print(f"error: --{'.'.join(map(str, e['loc'])).replace('_', '-')}: {message}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    settings = command_settings(args)
    with _database(settings) as session:
        stored = save_calibration(session, key, fit, source=", ".join(str(f) for f in folders),
                                  deployment=config.model_dump(mode="json", exclude_none=True,
                                                               exclude={"isl_tokens", "osl_tokens"}))
    print(report(stored))
    print(f"database: {settings.database_label}")
    return 0


def list_stored(args: argparse.Namespace) -> int:
    """Print every stored calibration, one line each, and the database they are in."""
    from api.commands.database import command_settings
    from infra.calibrations import list_calibrations

    settings = command_settings(args)
    with _database(settings) as session:
        stored = list_calibrations(session)
    for cal in stored:
        print(f"{cal.model} on {cal.gpu} ({cal.backend}): {cal.summary()}")
    if not stored:
        print("no calibrations stored: plans use the shipped parameters")
    print(f"database: {settings.database_label}")
    return 0


def forget(args: argparse.Namespace) -> int:
    """Delete the calibration of --model, --gpu and --backend: later plans use the shipped parameters."""
    from api.commands.database import command_settings
    from infra.calibrations import delete_calibration
    from profiler.model.errors import ModelError
    from profiler.model.measured import calibration_key

    for option, value in (("--model", args.model), ("--gpu", args.gpu)):
        if not value:
            print(f"error: {option}: required with --forget", file=sys.stderr)
            return 2
    try:
        key = calibration_key(args.model, args.gpu, args.backend)
    except ModelError as exc:
        print(f"error: --{exc.field}: {exc.message}", file=sys.stderr)
        return 2
    with _database(command_settings(args)) as session:
        deleted = delete_calibration(session, key)
    print(f"{'forgot' if deleted else 'no calibration stored for'} {key[0]} on {key[1]} ({key[2]})")
    return 0 if deleted else 1


def report(stored) -> str:
    """Before/after errors per metric, the scale, what was refined and the errors held out."""
    from profiler.model.measured import held_out_text, uncertainty_text

    f = stored.fit
    return "\n".join([
        f"{stored.model} on {stored.gpu} ({stored.backend}): {f.points} measured point(s)",
        f"  {'metric':8}{'before':>10}{'after':>10}   (median absolute % error)",
        f"  {'TTFT':8}{f.before.ttft_mdape_pct:>9.1f}%{f.after.ttft_mdape_pct:>9.1f}%",
        f"  {'TPOT':8}{f.before.tpot_mdape_pct:>9.1f}%{f.after.tpot_mdape_pct:>9.1f}%",
        f"  {f.times} against the parameters it started from; refined: {', '.join(f.fitted) or 'nothing'}",
        f"  one standard error: {uncertainty_text(f.uncertainty) or 'not recorded'}",
        f"  {held_out_text(f.held_out) or 'nothing held out (too few points)'} (mean absolute error)",
        f"  genai-bench's {f.harness_ms:.3g} ms a request held apart: the parameters describe the engine alone",
        f"stored: later plans of {stored.model} on {stored.gpu} with {stored.backend} use it",
    ])
