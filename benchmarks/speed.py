"""Speed of the offline performance model.

1. One ``estimate()`` in-process: median wall time over many configurations (every
   predictable calibration row, each estimated several times), target ≤ 1 ms.
2. ``slaplan estimate --csv IN --out OUT`` on 5,000 rows resampled (seeded) from the
   calibration data: wall time of the whole CLI subprocess, start-up included, target ≤ 10 s.

    python benchmarks/speed.py [--data CSV] [--rows 5000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import csv
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from api.commands.calibrate import given_data_path, read_rows  # noqa: E402


def single_estimates(rows: list[dict], repeats: int) -> tuple[float, float, int]:
    """(median ms, p90 ms, configurations) of one ``estimate()`` call."""
    from profiler.model.dataset import row_config
    from profiler.model.errors import ModelError
    from profiler.model.estimate import estimate
    from profiler.model.gpus import get_gpu
    from profiler.model.model_catalog import resolve_model

    configs = []
    for row in rows:
        try:
            model, _ = resolve_model(row["model"])
            config, _ = row_config(row, model.num_heads, model.is_moe, get_gpu(row["gpu"]).nvlink_domain,
                                   model.moe_intermediate_size)
            estimate(config)  # warm: skip rows that cannot be predicted
        except (ModelError, ValueError):
            continue
        configs.append(config)
    times = []
    for _ in range(repeats):
        for config in configs:
            start = time.perf_counter()
            estimate(config)
            times.append(time.perf_counter() - start)
    times.sort()
    return statistics.median(times) * 1e3, times[int(0.9 * len(times))] * 1e3, len(configs)


def cli_batch(path: Path, rows: int, seed: int = 0) -> tuple[float, int]:
    """(wall s, rows written) of ``slaplan estimate`` on ``rows`` rows resampled from ``path``."""
    data = read_rows(path)
    rng = random.Random(seed)
    sample = [rng.choice(data) for _ in range(rows)]
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.csv", Path(tmp) / "out.csv"
        with src.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(data[0]))
            writer.writeheader()
            writer.writerows(sample)
        command = [sys.executable, "-m", "api.cli", "estimate", "--csv", str(src), "--out", str(dst)]
        start = time.perf_counter()
        subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
        wall = time.perf_counter() - start
        with dst.open(newline="") as f:
            written = sum(1 for _ in csv.DictReader(f))
    return wall, written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="calibration CSV (default: ../shared/data next to the repository)")
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3, help="passes over the configurations / CLI runs")
    args = parser.parse_args(argv)
    if (path := given_data_path(args.data)) is None:
        return 1
    median, p90, n = single_estimates(read_rows(path), args.repeats)
    print(f"estimate() in-process: median {median:.3f} ms, p90 {p90:.3f} ms over {n} configurations "
          f"x {args.repeats} (target ≤ 1 ms)")
    walls = []
    for _ in range(args.repeats):
        wall, written = cli_batch(path, args.rows)
        walls.append(wall)
        assert written == args.rows, (written, args.rows)
    print(f"slaplan estimate --csv, {args.rows} rows: median {statistics.median(walls):.2f} s wall "
          f"(runs: {', '.join(f'{w:.2f}' for w in walls)}; target ≤ 10 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
