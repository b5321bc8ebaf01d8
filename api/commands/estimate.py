"""``slaplan estimate``: predictions of the offline performance model.

Two forms:
- ``--csv IN --out OUT``: every row of IN (the columns of the measured calibration data;
  extra columns ignored, measured columns optional) is copied to OUT, in order, with
  ``pred_ttft_ms``, ``pred_tpot_ms``, ``pred_output_tok_s_per_gpu`` and ``pred_error``
  (empty, or why that row cannot be predicted). A bad row never stops the batch; a bad file
  does, before anything is written (exit 2): a header without a column every row needs or
  naming one twice, or OUT being IN. Rows are prepared one by one and then solved together
  in one vectorized call.
- ``--model M --gpu G ...``: one configuration, printed as a readable summary or ``--json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys

from api.commands.cells import cell, parts_text

PRED_COLUMNS = ("pred_ttft_ms", "pred_tpot_ms", "pred_output_tok_s_per_gpu", "pred_error")

# ServingConfig field -> the flag that sets it, for error messages.
_FLAGS = {
    "model": "--model", "gpu": "--gpu", "backend": "--backend", "precision": "--precision",
    "kv_dtype": "--kv-dtype", "mode": "--mode", "engine": "--tp/--pp/--dp/--ep", "replicas": "--replicas",
    "prefill": "--prefill-*", "decode": "--decode-*", "prefill_workers": "--prefill-workers",
    "decode_workers": "--decode-workers", "max_batch": "--max-batch", "max_num_tokens": "--max-num-tokens",
    "isl_tokens": "--isl", "osl_tokens": "--osl", "concurrency": "--concurrency", "request_rate": "--rate",
    "spec_tokens": "--spec-tokens", "spec_acceptance": "--spec-acceptance",
}
# Parallel field -> the option's suffix (``--tp``, ``--prefill-ep``, ...).
_DIMS = {"tp": "tp", "pp": "pp", "dp": "dp", "moe_ep": "ep"}


def register(subparsers, summary: str) -> None:
    from api.commands.arguments import positive

    parser = subparsers.add_parser(
        "estimate", help=summary,
        description="Offline performance model. Either --csv IN --out OUT (batch), or one configuration "
                    "given by --model, --gpu, --tp and friends.")
    batch = parser.add_argument_group("batch")
    batch.add_argument("--csv", metavar="IN.csv", help="rows with the calibration data's columns")
    batch.add_argument("--out", metavar="OUT.csv", help="where to write the rows with predictions ('-' = stdout)")
    one = parser.add_argument_group("one configuration")
    single = [
        one.add_argument("--model", help="Hugging Face id or catalog name, or a path to a config.json"),
        one.add_argument("--gpu", help="GPU type, e.g. h100_sxm, b200, gb200"),
        one.add_argument("--backend", default="vllm", choices=("vllm", "sglang", "trtllm")),
        one.add_argument("--precision", help="weights: bf16 | fp8 | fp4 | int4 (default: implied by the model)"),
        one.add_argument("--kv-dtype", help="KV cache: bf16 | fp8 | fp4 (default: fp8 for fp8/fp4 weights)"),
        one.add_argument("--mode", default="agg", choices=("agg", "disagg")),
        one.add_argument("--tp", type=positive, default=1, help="tensor parallelism per engine"),
        one.add_argument("--pp", type=positive, default=1, help="pipeline parallelism per engine"),
        one.add_argument("--dp", type=positive, default=1, help="attention data-parallelism per engine (MoE)"),
        one.add_argument("--ep", type=positive, default=1, help="expert parallelism per engine (MoE)"),
        one.add_argument("--replicas", type=positive, default=1, help="aggregated engines"),
    ]
    for role in ("prefill", "decode"):
        single += [one.add_argument(f"--{role}-{dim}", type=positive, help=f"{role} engines' {dim} (default: --{dim})")
                   for dim in ("tp", "pp", "dp", "ep")]
        single.append(one.add_argument(f"--{role}-workers", type=positive, default=1, help=f"{role} engines (disagg)"))
    single += [
        one.add_argument("--max-batch", type=positive,
                         help="running sequences per engine (default: what KV memory allows)"),
        one.add_argument("--max-num-tokens", type=positive,
                         help="prefill chunk, tokens per step of each attention-DP rank"),
        one.add_argument("--spec-tokens", type=int, default=0,
                         help="speculative decoding: tokens drafted per decode step (MTP, EAGLE; default 0 = off)"),
        one.add_argument("--spec-acceptance", type=float,
                         help="speculative decoding: chance each drafted token is accepted (default 0.7)"),
        one.add_argument("--isl", type=positive,
                         help="input tokens per request (default: what a v1beta1 DGDR assumes)"),
        one.add_argument("--osl", type=positive,
                         help="output tokens per request (default: what a v1beta1 DGDR assumes)"),
    ]
    load = one.add_mutually_exclusive_group()
    single += [
        load.add_argument("--concurrency", type=float, nargs="+", metavar="C",
                          help="closed-loop clients across the deployment (default 1); several: a table, one row each"),
        load.add_argument("--rate", type=float, nargs="+", metavar="R",
                          help="Poisson request rate across the deployment (req/s); several: a table, one row each"),
        one.add_argument("--json", action="store_true", help="print the estimate as JSON"),
    ]
    parser.set_defaults(func=run, single_options=tuple(single))


def run(args: argparse.Namespace) -> int:
    if args.csv is not None or args.out is not None:
        return _run_batch(args)
    if not args.model or not args.gpu:
        print("error: give --csv IN --out OUT, or --model and --gpu (see slaplan estimate --help)", file=sys.stderr)
        return 2
    return _run_one(args)


def _run_batch(args: argparse.Namespace) -> int:
    """``--csv IN --out OUT`` after checking the options: exit 2 when they are incomplete, empty or mixed
    with one configuration's options."""
    from api.commands.arguments import given

    for option, value in (("--csv", args.csv), ("--out", args.out)):
        if value is not None and not value.strip():
            print(f"error: {option}: empty; give a file path", file=sys.stderr)
            return 2
    if args.csv is None or args.out is None:
        print("error: --csv and --out go together", file=sys.stderr)
        return 2
    mixed = given(args, args.single_options)
    if mixed:
        print(f"error: {mixed[0]}: sets one configuration, which --csv does not use (every row is its own "
              "configuration); give one or the other", file=sys.stderr)
        return 2
    return _run_csv(args.csv, args.out)


# --- batch --------------------------------------------------------------------------------


def _causes(exc: Exception) -> list[tuple[str, str]]:
    """(field, message) pairs saying why a row or configuration cannot be predicted."""
    from pydantic import ValidationError

    from profiler.model.errors import ModelError

    if isinstance(exc, ModelError):
        return [(exc.field, exc.message)]
    if isinstance(exc, ValidationError):
        return [(".".join(str(x) for x in err["loc"]) or "config", err["msg"].removeprefix("Value error, "))
                for err in exc.errors()]
    return [(type(exc).__name__, (str(exc).splitlines() or [""])[0])]


def _reason(exc: Exception) -> str:
    """One line saying why a row cannot be predicted: ``field: message`` (fields are the CSV's or ServingConfig's)."""
    return "; ".join(f"{field}: {message}" for field, message in _causes(exc))


def _option(field: str) -> str:
    """The option that sets ServingConfig ``field``: ``engine.tp`` → ``--tp``, ``decode.moe_ep`` → ``--decode-ep``,
    ``isl_tokens`` → ``--isl`` (the field itself when no option sets it)."""
    role, _, dim = field.partition(".")
    if role in ("engine", "prefill", "decode") and dim in _DIMS:
        return f"--{'' if role == 'engine' else role + '-'}{_DIMS[dim]}"
    return _FLAGS.get(role, field)


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def predict_rows(rows: list[dict]) -> list[dict[str, str]]:
    """The four prediction columns for each row (strings, in input order).

    Every row is prepared on its own (a failure becomes its ``pred_error``), then all
    prepared rows are solved in one vectorized evaluation with the shipped parameters.
    Models are looked up in the catalog only (no Hub fetch per row).
    """
    from profiler.model.dataset import row_prepared
    from profiler.model.estimate import evaluate

    out = [dict.fromkeys(PRED_COLUMNS, "") for _ in rows]
    keep, preps = [], []
    for i, row in enumerate(rows):
        try:
            if not str(row.get("model") or "").strip():
                raise _missing("model")
            preps.append(row_prepared(row)[0])
            keep.append(i)
        except Exception as exc:  # a bad row must never stop the batch
            out[i]["pred_error"] = _reason(exc)
    if preps:
        r = evaluate(preps)
        for j, i in enumerate(keep):
            values = (float(r["ttft_ms"][j]), float(r["itl_ms"][j]), float(r["output_tok_s_per_gpu"][j]))
            if all(math.isfinite(v) and v > 0 for v in values):
                out[i].update(zip(PRED_COLUMNS, map(_fmt, values)))
            else:
                out[i]["pred_error"] = "load: no steady state (the deployment cannot serve this load)"
    return out


def _missing(field: str) -> Exception:
    from profiler.model.errors import ModelError

    return ModelError(field, "missing")


def _run_csv(src: str, dst: str) -> int:
    """Predict every row of ``src`` into ``dst``: exit 0 written, 1 a file cannot be read or written, 2 invalid
    input (not a CSV, a header without a column every row needs or with one twice, ``dst`` being ``src``)."""
    try:
        with open(src, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            header = list(reader.fieldnames or [])
    except OSError as exc:
        print(f"error: --csv: cannot read {src}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except (csv.Error, UnicodeDecodeError) as exc:
        print(f"error: --csv: {src} is not a readable CSV: {exc}", file=sys.stderr)
        return 2
    problem = _header_problem(header) or (None if dst == "-" else _same_file(src, dst))
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    preds = predict_rows(rows)
    fields = header + [c for c in PRED_COLUMNS if c not in header]
    try:
        if dst == "-":
            _write(sys.stdout, fields, rows, preds)
        else:
            with open(dst, "w", newline="", encoding="utf-8") as f:
                _write(f, fields, rows, preds)
    except OSError as exc:
        print(f"error: --out: cannot write {dst}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    failed = sum(1 for p in preds if p["pred_error"])
    where = "stdout" if dst == "-" else dst
    print(f"{len(rows)} rows: {len(rows) - failed} predicted, {failed} with pred_error; wrote {where}", file=sys.stderr)
    return 0


def _header_problem(header: list[str]) -> str | None:
    """Why the CSV ``header`` cannot be read row by row (no column every row needs, a column named twice), or None."""
    from profiler.model.dataset import REQUIRED_COLUMNS

    if not header:
        return "--csv: the file is empty (no header row)"
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        return f"--csv: the header names the column(s) {', '.join(map(repr, twice))} more than once"
    missing = [name for name in REQUIRED_COLUMNS if name not in header]
    if missing:
        return (f"--csv: the header lacks the column(s) {', '.join(missing)} (every row needs "
                f"{', '.join(REQUIRED_COLUMNS)}; the first line must name the columns, comma-separated)")
    return None


def _same_file(src: str, dst: str) -> str | None:
    """An error when ``dst`` is ``src`` (by any path, link or hard link), which writing would overwrite."""
    try:
        same = os.path.samefile(src, dst)
    except OSError:  # dst does not exist yet (or cannot be examined: opening it will say why)
        return None
    return f"--out: {dst} is the --csv file {src}; writing it would overwrite the input" if same else None


def _write(stream, fields: list[str], rows: list[dict], preds: list[dict[str, str]]) -> None:
    writer = csv.DictWriter(stream, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row, pred in zip(rows, preds):
        clean = {k: ("" if v is None else v) for k, v in row.items() if k is not None}
        writer.writerow({**clean, **pred})


# --- one configuration --------------------------------------------------------------------


def _config(args: argparse.Namespace, model_name: str, precision: str | None, load_value: float):
    from profiler.model.config import Parallel, ServingConfig

    def par(prefix: str) -> Parallel:
        pick = lambda dim: getattr(args, f"{prefix}{dim}", None) or getattr(args, dim)  # noqa: E731
        return Parallel(tp=pick("tp"), pp=pick("pp"), dp=pick("dp"), moe_ep=pick("ep"))

    roles = ({"engine": par(""), "replicas": args.replicas} if args.mode == "agg" else
             {"prefill": par("prefill_"), "decode": par("decode_"),
              "prefill_workers": args.prefill_workers, "decode_workers": args.decode_workers})
    load = {"request_rate": load_value} if args.rate is not None else {"concurrency": load_value}
    from planner.lengths import V1BETA1_LENGTHS  # a one-configuration estimate assumes what a DGDR does

    return ServingConfig(model=model_name, gpu=args.gpu, backend=args.backend, precision=precision,
                         kv_dtype=args.kv_dtype, mode=args.mode, max_batch=args.max_batch,
                         max_num_tokens=args.max_num_tokens, isl_tokens=args.isl or V1BETA1_LENGTHS.isl_tokens,
                         osl_tokens=args.osl or V1BETA1_LENGTHS.osl_tokens,
                         spec_tokens=args.spec_tokens, spec_acceptance=args.spec_acceptance, **roles, **load)


def _run_one(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from profiler.model.errors import ModelError
    from profiler.model.estimate import estimate
    from profiler.hub import load_model

    loads = args.rate or args.concurrency or [1.0]
    try:
        model, implied = load_model(args.model)
        configs = [_config(args, args.model, args.precision or implied, x) for x in loads]
        results = [estimate(config, model=model) for config in configs]
    except (ModelError, ValidationError) as exc:
        print("error: " + "; ".join(f"{_option(field)}: {message}" for field, message in _causes(exc)),
              file=sys.stderr)
        return 1
    if len(configs) > 1:
        if args.json:
            print(json.dumps({"model": model.hf_id, "sweep": [
                {"config": c.model_dump(mode="json"), "estimate": _json(r)} for c, r in zip(configs, results)]},
                indent=2, allow_nan=False))
        else:
            print(sweep_table(configs, model.hf_id, results))
        return 0
    config, result = configs[0], results[0]
    if args.json:
        print(json.dumps({"model": model.hf_id, "config": config.model_dump(mode="json"),
                          "estimate": _json(result)}, indent=2, allow_nan=False))
    else:
        print(summary(config, model.hf_id, result))
    return 0


def _json(est) -> dict:
    """An estimate as strict JSON: a time that grows without bound (a saturated Poisson queue) is null."""
    return json.loads(est.model_dump_json())


def _shape(par) -> str:
    parts = [f"TP{par.tp}"] + [f"{k}{v}" for k, v in (("PP", par.pp), ("DP", par.dp), ("EP", par.moe_ep)) if v > 1]
    return "·".join(parts)


def _saturated(config, est) -> str:
    """Why a saturated estimate's numbers are what they are."""
    if config.request_rate is not None and not math.isfinite(est.ttft_ms):
        return (f"saturated: {config.request_rate:g} req/s is more than this deployment serves "
                f"({est.requests_per_s:.3g} req/s); the queue grows without bound, so TTFT is unbounded")
    return "saturated: the load is at or beyond what this deployment serves (requests queue for the excess)"


def _deployment(config, model_id: str, est) -> str:
    """The line naming the model, GPUs, backend and layout of ``config``."""
    from profiler.model.gpus import get_gpu

    if config.mode == "agg":
        layout = f"agg: {config.replicas} × {_shape(config.engine)}"
    else:
        layout = (f"disagg: {config.prefill_workers} prefill × {_shape(config.prefill)} + "
                  f"{config.decode_workers} decode × {_shape(config.decode)}")
    return f"{model_id} on {est.total_gpus} × {get_gpu(config.gpu).name} ({config.backend}, {config.precision}; {layout})"


def _memory_lines(config, est) -> list[str]:
    from profiler.model.engine import held_tokens

    held = held_tokens(config.backend, config.isl_tokens, config.osl_tokens)
    return [f"memory/GPU  {role}: weights {mem.weights_gib:.1f} GiB, KV cache {mem.kv_cache_gib:.1f} GiB, "
            f"activations {mem.activations_gib:.1f} GiB; KV capacity {mem.kv_capacity_tokens:,} tokens "
            f"({mem.max_sequences:,} sequences of {held:,.0f} tokens) per engine"
            for role, mem in est.memory.items()]


def sweep_table(configs, model_id: str, results) -> str:
    """One deployment at several loads: a row per load (TTFT mean with p90 and p99, ITL, throughput)."""
    first = configs[0]
    rate = first.request_rate is not None
    lines = [_deployment(first, model_id, results[0]),
             f"workload: ISL {first.isl_tokens} / OSL {first.osl_tokens} tokens",
             f"{'req/s in' if rate else 'clients':>9} {'TTFT ms':>10} {'p90':>10} {'p99':>10}  {'ITL ms':>8}  "
             f"{'tok/s/GPU':>9}  {'tok/s/user':>10}  {'req/s':>8}  {'decoding':>8}"]
    for config, est in zip(configs, results):
        load = config.request_rate if rate else config.concurrency
        ttft = " ".join(cell(x, 1, 10) for x in (est.ttft_ms, est.ttft_p90_ms, est.ttft_p99_ms))
        lines.append(f"{load:>9g} {ttft}  "
                     f"{est.itl_ms:>8.2f}  {est.output_tok_s_per_gpu:>9.1f}  {est.tok_s_per_user:>10.1f}  "
                     f"{est.requests_per_s:>8.3g}  {est.decode_batch:>8.1f}" + ("  saturated" if est.saturated else ""))
    return "\n".join(lines + _memory_lines(first, results[0]))


def summary(config, model_id: str, est) -> str:
    """A few readable lines: the deployment, latency, throughput and memory of ``est``."""
    from profiler.model.config import ms_text

    load = (f"concurrency {config.concurrency:g}" if config.request_rate is None
            else f"rate {config.request_rate:g} req/s")
    lines = [
        _deployment(config, model_id, est),
        f"workload: ISL {config.isl_tokens} / OSL {config.osl_tokens} tokens, {load}",
        f"TTFT        mean {ms_text(est.ttft_ms)}   p90 {ms_text(est.ttft_p90_ms)}   p99 {ms_text(est.ttft_p99_ms)}",
        "  mean of   " + parts_text(est.ttft_parts),
        f"ITL (TPOT)  {est.itl_ms:.2f} ms   ({est.tok_s_per_user:.1f} tok/s per user)",
        "  mean of   " + parts_text(est.itl_parts),
        f"throughput  {est.output_tok_s_per_gpu:.1f} output tok/s per GPU   {est.requests_per_s:.3g} req/s   "
        f"{est.decode_batch:.1f} sequences decoding per engine",
    ]
    if est.ttft_ms > est.ttft_p90_ms:
        lines.insert(3, "  mean above p90: fewer than 10% of requests wait for a prefill server, and the few that "
                        "do lift the mean")
    lines += _memory_lines(config, est)
    if est.saturated:
        lines.append(_saturated(config, est))
    return "\n".join(lines)
