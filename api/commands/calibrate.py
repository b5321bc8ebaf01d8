"""``slaplan calibrate``: refit the performance model's parameters from measured serving data
(``--from-benchmarks``: from one deployment's genai-bench results instead, see ``calibrate_measured``).

Deterministic: the same data gives a byte-identical ``params.json`` (sorted keys, values
rounded to 6 significant digits, no timestamp unless ``--date`` is given). The file holds
``{"params": {...}, "harness": {...}, "provenance": {...}}`` (``harness``: the terms the data's
harnesses add to its TTFTs, fitted beside the parameters and never read by a plan,
``profiler.model.harness``); provenance names the data file (not its path),
its sha256, the rows used, the in-sample fit error and the command. The GEMM shape
efficiencies are first fitted to kernel measurements (per-layer linear-op times, ``--kernels``;
``profiler.model.kernels``), and the end-to-end fit starts from and is pulled toward them; the
provenance records that file and the values it gave. With ``--cv`` the fit
is also judged by grouped cross-validation (whole model families, then whole GPU types held
out), which is the number to trust; the in-sample error is only a sanity check.

A measured time that is empty, not finite or not positive is unmeasured (that row is not fitted
or scored); one that is not a number makes its row unusable, like any bad cell. ``--out`` is
checked before the fit (not a directory nor an input file, somewhere a file can be written) and
written as strict JSON through a side file moved into place: a failed run leaves it as it was.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import json
import os
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from api.commands import arguments, calibrate_measured

if TYPE_CHECKING:
    import numpy as np

DATA_NAME = "measured_serving_calibration.csv"
KERNELS_NAME = "vidur_linear_ops_measured.csv"
GROUPS = ("mode", "backend", "gpu", "family")
# A file of what measured rows' recipes state (``--recipes``): the columns that name a row, the
# columns it may state, and of those the engine shapes a row without worker counts is re-read by.
RECIPE_KEY = ("provenance", "model", "gpu", "backend", "precision", "isl", "osl", "concurrency")
ENGINE_COLUMNS = ("p_tp", "p_attn_dp", "p_moe_ep", "d_tp", "d_attn_dp", "d_moe_ep")
RECIPE_COLUMNS = ("p_workers", "d_workers", *ENGINE_COLUMNS, "max_batch", "spec_tokens")
# The aggregated engine's columns, which a recipe that reads an aggregated row as a disaggregated
# deployment (``mode`` disagg: a source's spelling of that deployment's GPUs) leaves empty.
AGGREGATED_COLUMNS = ("tp", "pp", "attn_dp", "moe_tp", "moe_ep")


def register(subparsers, summary: str) -> None:
    parser = subparsers.add_parser(
        "calibrate", help=summary,
        description="One of: refit the shipped parameters from measured serving data (--data, the default); "
                    "fit one deployment from genai-bench results (--from-benchmarks); --list-calibrations; --forget.")
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--data", metavar="CSV",
                       help=f"measured serving data (default: ../shared/data/{DATA_NAME} next to the repository "
                            "or the working directory)")
    data_options = [
        parser.add_argument("--also", metavar="CSV", action="append", default=[],
                            help="more measured serving data in the same columns, fitted with --data's (may be "
                                 "given more than once; e.g. the repository's benchmarks/data/amd_measured.csv)"),
        parser.add_argument("--recipes", metavar="CSV",
                            help="what the recipes measured rows were run with state (e.g. the repository's "
                                 "benchmarks/data/recipe_deployments.csv): worker counts, engine shapes, decode "
                                 "max_batch, spec_tokens of rows named by " + ", ".join(RECIPE_KEY)),
        parser.add_argument("--kernels", metavar="CSV",
                            help=f"GEMM kernel measurements the shape efficiencies are first fitted to (default: "
                                 f"{KERNELS_NAME} beside the data; none there: the physical defaults)"),
        parser.add_argument("--out", metavar="PATH",
                            help="where to write (default: the package's profiler/model/data/params.json)"),
        parser.add_argument("--date", type=iso_date,
                            help="a date (YYYY-MM-DD) to record in the provenance (omitted by default, for determinism)"),
        parser.add_argument("--max-evals", type=arguments.positive, default=400,
                            help="model evaluations the fit may spend (default 400)"),
        parser.add_argument("--cv", action="store_true",
                            help="also run grouped cross-validation and print its error table (slow: one fit per group)"),
        add_workers_argument(parser)]
    deployment_options = calibrate_measured.add_arguments(parser, modes)
    key_options = [a for a in deployment_options if a.dest in ("model", "gpu", "backend", "db")]
    db_option = [a for a in deployment_options if a.dest == "db"]
    parser.set_defaults(func=run, mode_options={"--data": data_options, "--from-benchmarks": deployment_options,
                                                "--list-calibrations": db_option, "--forget": key_options})


def iso_date(text: str) -> str:
    """An argparse type: a calendar date written YYYY-MM-DD."""
    import datetime

    try:
        return datetime.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a date written YYYY-MM-DD, got {text!r}") from None


def add_workers_argument(parser) -> argparse.Action:
    return parser.add_argument("--workers", type=arguments.positive, default=os.cpu_count() or 1,
                        help="parallel cross-validation processes, one fold each at a time (default: the CPU count)")


def run_cross_validation(data, prior: dict[str, float], workers: int, max_evals: int = 200,
                         held_out: dict[str, np.ndarray] | None = None, source_prior: float | None = None,
                         schemes: tuple[str, ...] = ("family", "gpu"), amd_only: bool = False) -> dict:
    """``cross_validate`` (with its ``held_out`` groups, harness prior ``source_prior``, default
    ``harness.SOURCE_PRIOR_STRENGTH``, and grouped ``schemes``), or with ``amd_only`` its folds
    holding out AMD rows alone (``cross_validate_amd``: the same predictions of those rows,
    ``held_out`` and ``schemes`` unused), the folds spread over ``workers`` processes (the same
    results as one)."""
    from profiler.model.calibrate import cross_validate, cross_validate_amd
    from profiler.model.harness import SOURCE_PRIOR_STRENGTH

    options = dict(max_evals=max_evals, source_prior=SOURCE_PRIOR_STRENGTH if source_prior is None else source_prior)
    run = partial(cross_validate_amd, data, prior, **options) if amd_only else \
        partial(cross_validate, data, prior, held_out=held_out, schemes=schemes, **options)
    if workers == 1:
        return run()
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers) as pool:
        return run(map_folds=pool.map)


def default_data_path() -> Path | None:
    """The calibration CSV in ``../shared/data`` of the repository root or the working directory."""
    repo = Path(__file__).resolve().parents[2]
    for base in (repo, Path.cwd()):
        candidate = base.parent / "shared" / "data" / DATA_NAME
        if candidate.is_file():
            return candidate
    return None


def given_data_path(data: str | None) -> Path | None:
    """The calibration CSV a benchmark's ``--data`` names, else ``default_data_path()``; ``None``,
    with an error line on stderr, when there is no such file."""
    import sys

    path = Path(data) if data else default_data_path()
    if path is None or not path.is_file():
        print("error: calibration data not found; pass --data CSV", file=sys.stderr)
        return None
    return path


def default_params_path() -> Path:
    import profiler.model

    return Path(profiler.model.__file__).resolve().parent / "data" / "params.json"


def read_rows(path: Path) -> list[dict]:
    """The rows of the CSV file ``path``. Raises OSError when it cannot be read, ValueError naming it when
    it is not UTF-8 CSV text."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            return list(csv.DictReader(f))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"{path} is not a UTF-8 CSV file: {exc}") from None


def _recipe_value(n: int, column: str, text: str) -> str:
    least = 0 if column == "spec_tokens" else 1
    if not text.isdigit() or int(text) < least:
        raise ValueError(f"recipe row {n}: {column}: must be an integer ≥ {least}, got {text!r}")
    return str(int(text))


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _engine_gpus(row: dict, prefix: str) -> int:
    return int(float(row.get(f"{prefix}tp") or 1)) * int(float(row.get(f"{prefix}attn_dp") or 1))


def with_recipes(rows: list[dict], recipes: list[dict]) -> list[dict]:
    """``rows`` with what the recipes they were run with state (``recipes``: each names a measured
    row by ``RECIPE_KEY`` and gives any of ``RECIPE_COLUMNS``: worker counts, engine shapes, the
    decode engines' ``max_batch``, ``spec_tokens``). A row that records its worker counts keeps
    its own columns and gains only those it leaves empty; a row without them is read as the
    recipe deploys it (its source spells an engine's GPUs its own way): a recipe that states a
    role's engine names only rows whose engine of that role has as many GPUs (tp × attn_dp). A
    recipe stating ``mode`` disagg reads an aggregated row as the disaggregated deployment it states
    (both roles' workers and engines), naming only rows whose ``num_gpus`` that deployment holds.
    Raises ValueError naming the recipe row (from 1) and the field when a value is not a whole
    number in range, a key is missing, no row has the key, or the recipe contradicts what the row
    records."""
    index: dict[tuple, list[int]] = {}
    for i, row in enumerate(rows):
        index.setdefault(tuple(str(row.get(k) or "").strip() for k in RECIPE_KEY), []).append(i)
    out = list(rows)
    for n, recipe in enumerate(recipes, 1):
        missing = [k for k in RECIPE_KEY if not str(recipe.get(k) or "").strip()]
        if missing:
            raise ValueError(f"recipe row {n}: {missing[0]}: missing")
        facts = {k: _recipe_value(n, k, str(recipe[k]).strip()) for k in RECIPE_COLUMNS
                 if str(recipe.get(k) or "").strip()}
        if not facts:
            raise ValueError(f"recipe row {n}: {', '.join(RECIPE_COLUMNS)}: none given")
        disaggregated = _recipe_mode(n, recipe, facts)
        # A row is named by the key and, where the recipe states a role's engine, that engine's GPUs
        # (an aggregated row read as a disaggregated deployment: the deployment's GPUs).
        roles = [prefix for prefix in ("p_", "d_") if f"{prefix}tp" in facts or f"{prefix}attn_dp" in facts]
        named = index.get(tuple(str(recipe[k]).strip() for k in RECIPE_KEY), [])
        if disaggregated:
            total = sum(int(facts[f"{p}workers"]) * _engine_gpus(facts, p) for p in ("p_", "d_"))
            matched = [i for i in named if str(out[i].get("mode") or "agg").strip() == "agg"
                       and _number(str(out[i].get("num_gpus") or "")) == total]
        else:
            matched = [i for i in named if all(_engine_gpus(out[i], prefix) == _engine_gpus(facts, prefix) for prefix in roles)]
        if not matched:
            raise ValueError(f"recipe row {n}: {', '.join(RECIPE_KEY)}: no measured row has them"
                             + (" as an aggregated row of the deployment's GPUs" if disaggregated
                                else " and engines of its GPUs" if roles else ""))
        for i in matched:
            row = out[i]
            recorded = all(str(row.get(k) or "").strip() for k in ("p_workers", "d_workers"))
            for column, value in facts.items():
                own = str(row.get(column) or "").strip()
                restated = not recorded and column in ENGINE_COLUMNS
                if own and not restated and _number(own) != int(value):
                    raise ValueError(f"recipe row {n}: {column}: {value}, but the measured row states {own}")
            out[i] = {**row, **facts} | ({"mode": "disagg", **dict.fromkeys(AGGREGATED_COLUMNS, "")}
                                         if disaggregated else {})
    return out


def _recipe_mode(n: int, recipe: dict, facts: dict) -> bool:
    """Whether recipe row ``n`` reads an aggregated row as a disaggregated deployment (``mode``
    disagg, both roles' workers and engines stated); raises ValueError naming the field otherwise."""
    mode = str(recipe.get("mode") or "").strip()
    if not mode:
        return False
    if mode != "disagg":
        raise ValueError(f"recipe row {n}: mode: only disagg can be stated (an aggregated row read as the "
                         f"disaggregated deployment the recipe states), got {mode!r}")
    needed = ("p_workers", "d_workers", "p_tp", "d_tp")
    if (missing := [k for k in needed if k not in facts]):
        raise ValueError(f"recipe row {n}: {missing[0]}: missing (a recipe stating mode disagg states both roles' "
                         f"workers and engines)")
    return True


def read_kernels(data_path: Path, given: str | None) -> tuple[list[dict] | None, dict | None]:
    """Kernel measurement rows (``--kernels``, else the file beside the data) and their
    provenance; (None, None) when there is no such file and none was asked for.

    Raises OSError naming the file when one was asked for and cannot be read, ValueError naming it when
    it is not UTF-8 CSV text.
    """
    path = Path(given) if given else data_path.parent / KERNELS_NAME
    if not given and not path.is_file():
        return None, None
    raw = path.read_bytes()
    rows = read_rows(path)
    return rows, {"data": path.name, "sha256": hashlib.sha256(raw).hexdigest(), "rows": len(rows)}


def stray_option(args: argparse.Namespace) -> str | None:
    """Why an option given does not fit the chosen mode (``mode_options``: each mode's own options), or None."""
    mode = ("--from-benchmarks" if args.from_benchmarks else "--list-calibrations" if args.list_calibrations
            else "--forget" if args.forget else "--data")
    used = {id(action) for action in args.mode_options[mode]}
    others = [a for options in args.mode_options.values() for a in options if id(a) not in used]
    stray = arguments.given(args, others)
    return f"{stray[0]}: not used by {mode}" if stray else None


class _Unreadable(Exception):
    """A file an option names cannot be read; the message names the option."""


def _read_rows(option: str, source: Path, read):
    """(the bytes of ``source``, ``read(source)``); ``_Unreadable`` naming ``option`` when the
    file cannot be read or ``read`` refuses it (a ``ValueError``)."""
    try:
        return source.read_bytes(), read(source)
    except OSError as exc:
        raise _Unreadable(f"{option}: cannot read {source}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise _Unreadable(f"{option}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    stray = stray_option(args)
    if stray:
        print(f"error: {stray}", file=sys.stderr)
        return 2
    if args.from_benchmarks or args.list_calibrations or args.forget:
        return calibrate_measured.run(args)
    import numpy as np

    from profiler.model.calibrate import fit_by_vendor, kernel_prior, measured_mask, prepare_rows
    from profiler.model.harness import is_harness
    from profiler.model.params import ENGINE_MEASURED, PARAMS, shipped_file, shipped_params

    path = Path(args.data) if args.data else default_data_path()
    if path is None:
        print(f"error: --data: no {DATA_NAME} found in ../shared/data next to the repository or the working "
              "directory; pass --data CSV", file=sys.stderr)
        return 1
    if args.out is not None and not args.out.strip():
        print("error: --out: empty; give a file path", file=sys.stderr)
        return 1
    out = Path(args.out) if args.out else default_params_path()
    kernels_path = Path(args.kernels) if args.kernels else path.parent / KERNELS_NAME
    also = [Path(name) for name in args.also]
    problem = unwritable(out, (path, kernels_path, *also, *([Path(args.recipes)] if args.recipes else [])))
    if problem:
        print(f"error: --out: {problem}", file=sys.stderr)
        return 1
    rows, files = [], []
    try:
        for option, source in (("--data", path), *(("--also", extra) for extra in also)):
            raw, read = _read_rows(option, source, read_rows)
            rows += read
            files.append({"data": source.name, "sha256": hashlib.sha256(raw).hexdigest(), "rows": len(read)})
        if args.recipes:
            raw, rows = _read_rows("--recipes", Path(args.recipes), lambda p: with_recipes(rows, read_rows(p)))
            files.append({"recipes": Path(args.recipes).name, "sha256": hashlib.sha256(raw).hexdigest()})
    except _Unreadable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    data = prepare_rows(rows)
    if data.batch is None:
        print(f"error: --data: none of the {len(rows)} rows can be predicted", file=sys.stderr)
        return 1
    distinct = ~data.repeats
    both = measured_mask(data) & distinct
    measured = distinct & (np.isfinite(data.ttft_ms) | np.isfinite(data.tpot_ms))  # prepare_rows: NaN or > 0
    used = int((measured & ~data.inferred).sum())  # rows whose deployment was guessed are not fitted
    if used == 0:
        print(f"error: --data: none of the {len(rows)} rows has ttft_ms or tpot_ms measured on a recorded "
              "deployment: nothing to fit, parameters left as they were", file=sys.stderr)
        return 1
    print(f"fitting {len(PARAMS) - len(ENGINE_MEASURED)} parameters and the harness terms on {used} of {len(rows)} rows ({len(data.errors)} not predictable, "
          f"{int(data.repeats.sum())} repeating another row's measurement, "
          f"{int((distinct & ~measured).sum())} without a finite positive ttft_ms or tpot_ms, "
          f"{int((measured & ~both).sum())} fitted on the one of them they have, "
          f"{int(measured.sum()) - used} with an inferred deployment)", file=sys.stderr)
    try:
        kernel_rows, kernels = read_kernels(path, args.kernels)
        prior = kernel_prior(kernel_rows)
    except OSError as exc:
        print(f"error: --kernels: cannot read {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # not a CSV, or a bad value (ModelError)
        print(f"error: --kernels: {exc}", file=sys.stderr)
        return 1
    if kernels:
        kernels["prior"] = {k: _round(prior[k]) for k in sorted(prior) if prior[k] != PARAMS[k][0]}
    fitted = {k: _round(v) for k, v in fit_by_vendor(data, prior, max_evals=args.max_evals).items()}
    params = {k: v for k, v in fitted.items() if not is_harness(k)}
    command = ["slaplan", "calibrate", "--data", path.name, *(f"--also {extra.name}" for extra in also),
               *(["--recipes", Path(args.recipes).name] if args.recipes else [])]
    if args.kernels:
        command += ["--kernels", Path(args.kernels).name]
    if args.max_evals != 400:
        command += ["--max-evals", str(args.max_evals)]
    provenance = {
        "data": path.name,
        "sha256": files[0]["sha256"],
        "rows": len(rows),
        "rows_used": used,
        "rows_not_predictable": len(data.errors),
        "kernels": kernels,
        **({"also": files[1:1 + len(also)]} if also else {}),
        **({"recipes": files[-1]} if args.recipes else {}),
        "fit_loss_in_sample": in_sample_loss(data, fitted),
        "command": " ".join(command),
    }
    if args.date:
        provenance["date"] = args.date
    try:
        write_json(out, {"params": params, "harness": {k: v for k, v in fitted.items() if is_harness(k)},
                         "provenance": provenance})
    except OSError as exc:
        print(f"error: --out: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    shipped_params.cache_clear()
    shipped_file.cache_clear()
    loss = provenance["fit_loss_in_sample"]
    print(f"wrote {out}: in-sample median abs error TTFT {_percent(loss['ttft_median_ape_pct'])}, "
          f"TPOT {_percent(loss['tpot_median_ape_pct'])} (not a measure of accuracy; use --cv)")
    if args.cv:
        preds = run_cross_validation(data, prior, workers=args.workers)
        print(cv_table(data, preds))
    return 0


def _side_file(out: Path) -> Path:
    """Where ``out`` is written before it is moved into place in one step."""
    return out.with_name(out.name + ".partial")


def unwritable(out: Path, inputs: tuple[Path, ...]) -> str | None:
    """Why the parameters cannot be written to ``out`` (a directory, one of the ``inputs``, a place where no
    file can be created), or None. Creates ``out``'s missing parent directories; leaves no file behind."""
    if out.is_dir():
        return f"{out} is a directory"
    for path in inputs:
        if out.exists() and path.exists() and os.path.samefile(out, path):
            return f"{out} is the input file {path}; writing it would overwrite it"
    side = _side_file(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        side.touch()
    except OSError as exc:
        return f"cannot write {out}: {exc.strerror or exc}"
    side.unlink()
    return None


def write_json(out: Path, doc: dict) -> None:
    """Write ``doc`` to ``out`` as strict JSON (sorted keys; NaN and infinity refused) through a side file
    moved into place in one step: a failed write leaves ``out`` as it was, and no side file. Raises OSError."""
    text = json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"
    side = _side_file(out)
    try:
        side.write_text(text, encoding="utf-8")
        side.replace(out)
    except OSError:
        with contextlib.suppress(OSError):
            side.unlink()
        raise


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value}%"


def _round(x: float) -> float:
    return float(f"{x:.6g}")


def in_sample_loss(data, params: dict[str, float]) -> dict[str, float | None]:
    """Errors on the distinct measurements as measured (``params``' harness terms in): median
    absolute % error of TTFT and TPOT, median |log error| (None when no measured row has a finite
    prediction)."""
    import numpy as np

    from profiler.model.calibrate import ape, measured_mask, predict_as_measured

    out = predict_as_measured(data, params)
    ok = measured_mask(data) & np.isfinite(out["ttft_ms"]) & np.isfinite(out["itl_ms"]) & ~data.repeats
    logs = np.concatenate([np.log(out["ttft_ms"][ok] / data.ttft_ms[ok]), np.log(out["itl_ms"][ok] / data.tpot_ms[ok])])
    median = lambda x, digits: round(float(np.median(x)), digits) if ok.any() else None  # noqa: E731
    return {
        "ttft_median_ape_pct": median(ape(out["ttft_ms"][ok], data.ttft_ms[ok]), 2),
        "tpot_median_ape_pct": median(ape(out["itl_ms"][ok], data.tpot_ms[ok]), 2),
        "median_abs_log_error": median(np.abs(logs), 4),
    }


def error_rows(data, ttft_pred, tpot_pred) -> list[tuple]:
    """Table rows (group, value, n, TTFT MdAPE %, TTFT median log bias, TPOT MdAPE %, TPOT bias).

    ``n`` counts distinct measurements (rows repeating another's are scored once) with a
    finite measurement and prediction. Bias is the median of log(pred/measured): negative
    means the model predicts too low (exp(bias) − 1 as %).
    """
    import numpy as np

    from profiler.model.calibrate import ape, measured_mask

    ok = (measured_mask(data) & np.isfinite(ttft_pred) & np.isfinite(tpot_pred)
          & (ttft_pred > 0) & (tpot_pred > 0) & ~data.repeats)

    def stats(mask):
        m = mask & ok
        if not m.any():
            return (int(m.sum()), float("nan"), float("nan"), float("nan"), float("nan"))
        return (int(m.sum()),
                float(np.median(ape(ttft_pred[m], data.ttft_ms[m]))),
                float(np.median(np.log(ttft_pred[m] / data.ttft_ms[m]))),
                float(np.median(ape(tpot_pred[m], data.tpot_ms[m]))),
                float(np.median(np.log(tpot_pred[m] / data.tpot_ms[m]))))

    out = [("all", "", *stats(np.ones_like(ok)))]
    for group in GROUPS:
        labels = data.labels[group]
        for value in sorted(set(labels.tolist())):
            out.append((group, value, *stats(labels == value)))
    return out


def format_table(rows: list[tuple], title: str) -> str:
    """Fixed-width text of ``error_rows``."""
    head = f"{'group':<8} {'value':<40} {'n':>5} {'TTFT MdAPE':>10} {'bias':>7} {'TPOT MdAPE':>10} {'bias':>7}"
    lines = [title, head, "-" * len(head)]
    for group, value, n, t_ape, t_bias, p_ape, p_bias in rows:
        lines.append(f"{group:<8} {value[-40:]:<40} {n:>5} {t_ape:>9.1f}% {_pct(t_bias):>7} "
                     f"{p_ape:>9.1f}% {_pct(p_bias):>7}")
    return "\n".join(lines)


def _pct(log_bias: float) -> str:
    import math

    return "nan" if math.isnan(log_bias) else f"{(math.exp(log_bias) - 1) * 100:+.0f}%"


def cv_table(data, preds: dict) -> str:
    """Both grouped cross-validation schemes of ``cross_validate``, as text tables."""
    parts = []
    for scheme, title in (("family", "held out: whole model families"), ("gpu", "held out: whole GPU types")):
        ttft, tpot = preds[scheme][:2]
        parts.append(format_table(error_rows(data, ttft, tpot), f"grouped cross-validation, {title}"))
    return "\n\n".join(parts)
