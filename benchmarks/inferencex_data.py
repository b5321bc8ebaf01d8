"""Serving measurements from InferenceX's published results, in the calibration data's columns.

InferenceX (SemiAnalysis) benchmarks serving engines on NVIDIA and AMD GPUs every few days
(its benchmark repository, Apache-2.0) and publishes the results on a dashboard; the
dashboard's repository (SemiAnalysisAI/InferenceX-app, GPL-3.0) keeps a JSON of those results
as test fixtures. This script reads the fixture files given and writes one vendor's rows, one
per distinct measurement, with their provenance (source file at its commit, the benchmark run's
URL, its date, the statistic, the licence). Measured figures are facts; no code or prose of
either repository is carried over.

What is kept and how it is read:
- One vendor's GPUs (``--vendor``; the GPU as the catalog names it: ``b200`` is ``b200_sxm``),
  engines slaplan models: SGLang, TensorRT-LLM (``trt``), and their disaggregated deployments
  (``dynamo-sglang``, ``dynamo-trt``: NVIDIA Dynamo; ``mori-sglang``: SGLang with AMD's MoRI).
  AMD's ATOM engine has no counterpart in slaplan and is left out.
- Runs with speculative decoding (``spec_method`` other than ``none``) are left out: the
  results name the method (MTP) but not the drafted tokens or their acceptance.
- ``latest`` results carry means and medians; ``history`` results medians only. TTFT and
  TPOT are the means where published (``statistic`` ``mean``). Where only medians are, TPOT is
  the median (a request's gaps are even: on the AMD rows with both, median and mean TPOT differ
  by a median 0.9%) and TTFT is left empty (the median TTFT is about 0.6 of the mean): such rows
  (``statistic`` ``median``) are scored on their median TTFT (``median_ttft_ms``), which the
  model predicts as a median. Both medians are kept in ``median_ttft_ms`` and ``median_tpot_ms``.
- Parallel shape, as the calibration columns spell it: ``tp`` is attention TP; with attention
  data-parallelism (``dp_attention``, ``tp`` n) that is tp 1 with ``attn_dp`` n; ``moe_ep`` the
  expert parallelism; ``num_gpus`` the whole deployment. A disaggregated result whose GPU counts
  disagree with its workers' engines is left out (its deployment is not known).
- With ``--known CSV`` (the calibration data), a result that CSV already holds is left out, so
  that the rows written can be kept out of the fit as an external check: the same model family,
  GPU, engine, lengths and concurrency, and mean TTFT and TPOT within ``SAME_WITHIN`` of each
  other (``repeats``).

    python benchmarks/inferencex_data.py LATEST.json HISTORY.json [--vendor amd|nvidia] [--known CSV] [--out CSV]

LATEST.json and HISTORY.json are ``packages/app/cypress/fixtures/api/benchmarks.json`` and
``benchmarks-history.json`` of SemiAnalysisAI/InferenceX-app at commit ``FIXTURE_COMMIT``.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FIXTURE_REPO = "SemiAnalysisAI/InferenceX-app"
FIXTURE_COMMIT = "528c4146b8f502fcbce8df7870a935a970cbae25"  # 2026-06-14
FIXTURE_DIR = "packages/app/cypress/fixtures/api"
LICENCE = ("figures from InferenceX benchmark runs (SemiAnalysisAI/InferenceX, Apache-2.0) "
           "via the InferenceX-app fixture (GPL-3.0)")
# InferenceX framework name -> slaplan backend; frameworks not listed are left out.
BACKENDS = {"sglang": "sglang", "mori-sglang": "sglang", "dynamo-sglang": "sglang", "trt": "trtllm",
            "dynamo-trt": "trtllm"}
# InferenceX model key -> Hugging Face id of the checkpoint family it serves.
MODELS = {"dsr1": "deepseek-ai/DeepSeek-R1-0528"}
CALIBRATION_COLUMNS = (
    "source", "provenance", "model", "gpu", "backend", "backend_version", "precision", "mode", "isl", "osl",
    "concurrency", "tp", "pp", "attn_dp", "moe_tp", "moe_ep", "p_workers", "p_tp", "p_pp", "p_attn_dp", "p_moe_ep",
    "p_bs", "d_workers", "d_tp", "d_pp", "d_attn_dp", "d_moe_ep", "d_bs", "num_gpus", "ttft_ms", "tpot_ms",
    "derived_req_s", "derived_output_tok_s_per_gpu", "derived_total_tok_s_per_gpu",
    "derived_interactivity_tok_s_user")
PROVENANCE_COLUMNS = ("statistic", "median_ttft_ms", "median_tpot_ms", "date", "url", "licence")
COLUMNS = CALIBRATION_COLUMNS + PROVENANCE_COLUMNS
# A result repeats a known row (``repeats``) when their TPOT (and mean TTFT, where both have one) agree
# within SAME_WITHIN, or within SAME_DAY_WITHIN when the known row was measured the same day (a
# median-only result against a known mean: on the AMD rows with both they differ by a median 0.9%).
SAME_WITHIN, SAME_DAY_WITHIN = 0.01, 0.03
# What makes two results one measurement (the same run may appear in both files).
_IDENTITY = ("hardware", "framework", "model", "precision", "spec_method", "disagg", "prefill_tp", "prefill_ep",
             "prefill_dp_attention", "prefill_num_workers", "decode_tp", "decode_ep", "decode_dp_attention",
             "decode_num_workers", "isl", "osl", "conc", "date", "run_url")


def engine_columns(tp: int, ep: int, dp_attention: bool) -> dict[str, int]:
    """Calibration columns (tp, attn_dp, moe_tp, moe_ep) of one engine with SGLang's ``--tp`` and
    ``--ep``: its GPUs are the larger of the two; attention runs TP 1 on each GPU with attention
    data-parallelism (or when ``tp`` is 1 on a wider engine), else TP ``tp``."""
    ep = max(ep, 1)
    gpus = max(tp, ep)
    attention_tp = 1 if dp_attention else tp
    return {"tp": attention_tp, "attn_dp": gpus // attention_tp, "moe_tp": gpus // ep, "moe_ep": ep}


def backend_version(image: str | None) -> str:
    """The engine version in a container image tag (``lmsysorg/sglang:v0.5.9-rocm700-mi30x`` →
    ``0.5.9``); empty when none."""
    found = re.search(r"[:-]v?(\d+\.\d+\.\d+(?:\.post\d+)?)", image or "")
    return found.group(1) if found else ""


def _ms(seconds: float | None) -> str:
    """Seconds as milliseconds text (6 significant digits); empty when absent."""
    return "" if seconds is None else f"{seconds * 1e3:.6g}"


def catalog_gpu(hardware: str, vendor: str) -> str | None:
    """The catalog's name of the GPU InferenceX calls ``hardware`` (``b200`` → ``b200_sxm``), or
    None when the catalog does not know it or it is not ``vendor``'s (``amd``, ``nvidia``)."""
    from profiler.model.errors import UnknownName
    from profiler.model.gpus import get_gpu

    try:
        gpu = get_gpu(hardware)
    except UnknownName:
        return None
    return gpu.name if gpu.vendor == vendor else None


def convert(record: dict, source: str, vendor: str = "amd") -> dict[str, str] | None:
    """One published result as a row of ``COLUMNS``, or None when it is left out (not a GPU of
    ``vendor``, an engine or model slaplan does not model, speculative decoding, GPU counts that
    disagree with the workers). ``source`` names the file (repository:path@commit)."""
    backend, model = BACKENDS.get(record.get("framework", "")), MODELS.get(record.get("model", ""))
    gpu = catalog_gpu(str(record.get("hardware", "")), vendor)
    if gpu is None or backend is None or model is None:
        return None
    if record.get("spec_method", "none") != "none":
        return None
    metrics = record["metrics"]
    has_mean = "mean_ttft" in metrics and "mean_tpot" in metrics
    row = dict.fromkeys(COLUMNS, "")
    row.update(source=source, model=model, gpu=gpu, backend=backend,
               backend_version=backend_version(record.get("image")), precision=record["precision"],
               isl=str(record["isl"]), osl=str(record["osl"]), concurrency=str(record["conc"]),
               provenance=f"inferencex | framework={record['framework']}; image={record.get('image') or ''}",
               statistic="mean" if has_mean else "median",
               ttft_ms=_ms(metrics["mean_ttft"]) if has_mean else "",
               tpot_ms=_ms(metrics["mean_tpot"] if has_mean else metrics["median_tpot"]),
               median_ttft_ms=_ms(metrics.get("median_ttft")), median_tpot_ms=_ms(metrics.get("median_tpot")),
               date=str(record.get("date", "")), url=str(record.get("run_url", "")), licence=LICENCE)
    if "output_tput_per_gpu" in metrics:
        row["derived_output_tok_s_per_gpu"] = f"{metrics['output_tput_per_gpu']:.6g}"
    if "tput_per_gpu" in metrics:
        row["derived_total_tok_s_per_gpu"] = f"{metrics['tput_per_gpu']:.6g}"
    if record.get("disagg"):
        row["mode"] = "disagg"
        for prefix, role in (("p_", "prefill"), ("d_", "decode")):
            shape = engine_columns(record[f"{role}_tp"], record[f"{role}_ep"], record[f"{role}_dp_attention"])
            if record[f"{role}_num_workers"] * shape["tp"] * shape["attn_dp"] != record[f"num_{role}_gpu"]:
                return None
            row.update({f"{prefix}{k}": str(v) for k, v in shape.items() if k != "moe_tp"})
            row[f"{prefix}workers"] = str(record[f"{role}_num_workers"])
        row["num_gpus"] = str(record["num_prefill_gpu"] + record["num_decode_gpu"])
    else:
        row["mode"] = "agg"
        row.update({k: str(v) for k, v in engine_columns(record["decode_tp"], record["decode_ep"],
                                                          record["decode_dp_attention"]).items()})
        row["num_gpus"] = str(record["decode_tp"])
    return row


def rows_from(files: Iterable[tuple[list[dict], str]], vendor: str = "amd") -> list[dict[str, str]]:
    """Rows of ``vendor``'s results in ``files`` (each: its records and its source name), one per
    distinct measurement (``_IDENTITY``): where a run appears twice, the record with means wins,
    else the first. Sorted by GPU, engine, shape, lengths, concurrency and date."""
    chosen: dict[tuple, tuple[dict, str]] = {}
    for records, source in files:
        for record in records:
            key = tuple(str(record.get(k)) for k in _IDENTITY)
            if key not in chosen or ("mean_ttft" in record["metrics"] and "mean_ttft" not in chosen[key][0]["metrics"]):
                chosen[key] = (record, source)
    rows = [row for record, source in chosen.values() if (row := convert(record, source, vendor)) is not None]
    order = ("gpu", "backend", "precision", "mode", "tp", "attn_dp", "moe_ep", "p_workers", "d_workers", "isl", "osl")
    return sorted(rows, key=lambda r: (*(r[k] for k in order), float(r["concurrency"]), r["date"], r["url"]))


def _configuration(row: dict) -> tuple[str, ...]:
    """What a measurement must share with another to be its repeat: model family, GPU, engine,
    precision, mode, lengths and concurrency (the parallel shape is left out: the calibration data
    spells it in more than one way, and sometimes not at all)."""
    from profiler.model.calibrate import family, rounded

    return (family(str(row.get("model"))), *(str(row.get(k, "")).strip() for k in ("gpu", "backend", "precision", "mode")),
            *(rounded(row.get(k), 12) for k in ("isl", "osl", "concurrency")))


def _measured_on(row: dict) -> str:
    """The date a row was measured: its ``date`` column, else the ``measured=YYYY-MM-DD`` its
    provenance names (the calibration data's spelling); empty when neither."""
    found = re.search(r"measured=(\d{4}-\d{2}-\d{2})", str(row.get("provenance") or ""))
    return str(row.get("date") or "") or (found.group(1) if found else "")


def _agree(a: str, b: str, within: float) -> bool:
    """Two measured times (ms text) within ``within`` of each other; False when either is missing."""
    try:
        return abs(float(a) / float(b) - 1.0) <= within
    except (TypeError, ValueError, ZeroDivisionError):
        return False


def known_measurements(known: list[dict]) -> dict[tuple[str, ...], list[tuple[str, str, str]]]:
    """Calibration rows by configuration (``_configuration``): their (measured day, TTFT, TPOT)."""
    index: dict[tuple[str, ...], list[tuple[str, str, str]]] = {}
    for row in known:
        index.setdefault(_configuration(row), []).append(
            (_measured_on(row), str(row.get("ttft_ms") or ""), str(row.get("tpot_ms") or "")))
    return index


def repeats(row: dict[str, str], known: dict[tuple[str, ...], list[tuple[str, str, str]]]) -> bool:
    """Whether ``row`` measures what a calibration row (``known_measurements``) already does: the
    same configuration, and TPOT (and TTFT, where ``row`` has a mean TTFT) within ``SAME_WITHIN``
    of each other, or within ``SAME_DAY_WITHIN`` when both were measured the same day."""
    day = _measured_on(row)
    for other_day, ttft_ms, tpot_ms in known.get(_configuration(row), ()):
        within = SAME_DAY_WITHIN if day and other_day == day else SAME_WITHIN
        if _agree(row["tpot_ms"], tpot_ms, within) and (not row["ttft_ms"] or _agree(row["ttft_ms"], ttft_ms, within)):
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    import json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("latest", type=Path, help=f"{FIXTURE_DIR}/benchmarks.json")
    parser.add_argument("history", type=Path, help=f"{FIXTURE_DIR}/benchmarks-history.json")
    parser.add_argument("--vendor", choices=("amd", "nvidia"), default="amd", help="whose GPUs (default amd)")
    parser.add_argument("--known", type=Path, metavar="CSV",
                        help="calibration rows: results they already hold are left out (an external check's rows)")
    parser.add_argument("--out", type=Path, help="default: benchmarks/data/<vendor>_measured.csv")
    args = parser.parse_args(argv)
    out = args.out or Path(__file__).resolve().parent / "data" / f"{args.vendor}_measured.csv"
    files = [(json.loads(path.read_text(encoding="utf-8")),
              f"{FIXTURE_REPO}:{FIXTURE_DIR}/{name}@{FIXTURE_COMMIT[:12]}")
             for path, name in ((args.latest, "benchmarks.json"), (args.history, "benchmarks-history.json"))]
    rows = rows_from(files, args.vendor)
    if args.known:
        with args.known.open(newline="", encoding="utf-8") as f:
            known = known_measurements(list(csv.DictReader(f)))
        kept = [row for row in rows if not repeats(row, known)]
        print(f"left out {len(rows) - len(kept)} results {args.known.name} already holds")
        rows = kept
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    counts: dict[tuple[str, str, str], int] = {}
    for row in rows:
        key = (row["gpu"], row["mode"], row["statistic"])
        counts[key] = counts.get(key, 0) + 1
    print(f"wrote {len(rows)} rows to {out.name}: "
          + ", ".join(f"{gpu} {mode} {stat} {n}" for (gpu, mode, stat), n in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
