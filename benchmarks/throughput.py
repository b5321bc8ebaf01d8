"""Output throughput per GPU: the model against measured throughput, on data it was not fitted to.

Reads any CSV with the calibration data's columns (as ``slaplan estimate --csv`` does) whose
``derived_output_tok_s_per_gpu`` holds the measured output tokens/s per GPU, e.g. a published
table of offline maximum-throughput runs typed into those columns (``concurrency``: the
requests queued at once, read as that many closed-loop clients). Predicts every row with the
shipped parameters and prints, for output tokens/s per GPU, the median absolute percentage
error (MdAPE) and the median bias (median of log(pred/measured), as the % it corresponds to;
positive = predictions too high), overall and by GPU, model family, backend and mode.

    python benchmarks/throughput.py [--data CSV] [--recipes CSV]

Without ``--data`` it reads the calibration data, whose rows the shipped parameters were fitted
on (their TTFT and TPOT, not their throughput): numbers for contrast, not a measure of accuracy.
An offline run of N requests queued at once is a closed loop of N clients only while it is full:
its ramp (every prompt prefilled first) and its tail (the last requests decoding alone) are in
the measured figure, and the model gives the steady state. The rows are read with what their
recipes state, as in ``benchmarks/accuracy.py`` (``--recipes``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from api.commands.calibrate import default_data_path, read_rows  # noqa: E402
from benchmarks.accuracy import add_recipes_argument, with_recipes_of  # noqa: E402

MEASURED = "derived_output_tok_s_per_gpu"


def table(labels: dict, pred, measured) -> list[tuple[str, str, int, float, float]]:
    """(group, value, n, MdAPE %, median bias %) overall and per value of each label."""
    from profiler.model.calibrate import median_errors

    rows = [("all", "", *median_errors(pred, measured))]
    for group in ("gpu", "family", "backend", "mode"):
        for value in sorted(set(labels[group].tolist())):
            mask = labels[group] == value
            rows.append((group, value, *median_errors(pred[mask], measured[mask])))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="CSV with the calibration columns and measured derived_output_tok_s_per_gpu "
                                       "(default: the calibration data, in sample)")
    add_recipes_argument(parser)
    args = parser.parse_args(argv)

    import numpy as np

    from profiler.model.calibrate import measured_column, prepare_rows
    from profiler.model.estimate import evaluate
    from profiler.model.params import shipped_params

    path = Path(args.data) if args.data else default_data_path()
    if path is None or not path.is_file():
        print(f"error: --data: no such file: {args.data or 'calibration data next to the repository'}", file=sys.stderr)
        return 1
    try:
        rows = read_rows(path)
    except (OSError, ValueError) as exc:
        print(f"error: --data: {exc}", file=sys.stderr)
        return 1
    try:
        rows = with_recipes_of(rows, args)
    except (OSError, ValueError) as exc:
        print(f"error: --recipes: {exc}", file=sys.stderr)
        return 1
    data = prepare_rows(rows)
    print(f"data: {path.name}, {len(rows)} rows, {len(data.index)} predicted"
          + ("" if args.data else " (the calibration data: in sample, for contrast only)"))
    for i, message in sorted(data.errors.items())[:10]:
        print(f"  row {i + 1} not predicted: {message[:140]}")
    if not len(data.index):
        return 1
    pred = evaluate(data.batch, shipped_params())["output_tok_s_per_gpu"]
    measured, bad = measured_column(rows, data.index, MEASURED)
    if bad:
        print(f"  {MEASURED} is not a number in row(s) {', '.join(str(i + 1) for i in bad[:10])}: not scored")
    if not args.data:  # one score per distinct measurement, as accuracy.py counts them
        measured = np.where(data.repeats, np.nan, measured)
    head = f"{'group':<8} {'value':<40} {'n':>5} {'MdAPE':>7} {'bias':>6}"
    print("output tokens/s per GPU\n" + head + "\n" + "-" * len(head))
    for group, value, n, mdape, bias in table(data.labels, pred, measured):
        print(f"{group:<8} {value[-40:]:<40} {n:>5} {mdape:>6.1f}% {bias:>+5.0f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
