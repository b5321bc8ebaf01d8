"""Planner speed: median in-process time of ``plan`` and wall time of ``slaplan plan``.

Targets (issue: offline planner): Llama-3.1-70B on h200_sxm, ISL 3000 / OSL 500, TTFT 500 ms /
ITL 20 ms, up to 16 GPUs: ≤ 0.5 s in-process, ≤ 2 s for the CLI; DeepSeek-V3 on 16× h200_sxm:
≤ 3 s in-process. Run: ``.venv/bin/python benchmarks/planner_speed.py``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from planner import plan
from planner.types import PlanRequest

ROOT = Path(__file__).resolve().parent.parent

CASES = {
    "Llama-3.1-70B, h200_sxm, ≤16 GPUs": PlanRequest(
        name="llama", model="meta-llama/Llama-3.1-70B-Instruct", backend="vllm", gpu="h200_sxm",
        isl_tokens=3000, osl_tokens=500, ttft_ms=500, itl_ms=20, max_gpus_per_engine=16, total_gpus=16),
    "DeepSeek-V3, 16× h200_sxm": PlanRequest(
        name="dsv3", model="deepseek-ai/DeepSeek-V3", backend="sglang", gpu="h200_sxm",
        isl_tokens=4000, osl_tokens=1000, ttft_ms=2000, itl_ms=50, max_gpus_per_engine=16, total_gpus=16),
}


def in_process(req: PlanRequest, repeats: int = 7) -> tuple[float, int]:
    plan(req)  # warm caches and imports
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = plan(req)
        times.append(time.perf_counter() - start)
    return statistics.median(times), result.evaluated


def cli_wall(example: Path) -> float:
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        subprocess.run([str(Path(sys.executable).parent / "slaplan"), "plan", str(example), "--out", out, "--quiet"],
                       check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        return time.perf_counter() - start


def main() -> None:
    for label, req in CASES.items():
        median, evaluated = in_process(req)
        print(f"{label:40s} in-process median {median * 1e3:7.0f} ms  ({evaluated} candidates)")
    wall = cli_wall(ROOT / "examples" / "llama-70b-h200.dgdr.yaml")
    print(f"{'slaplan plan examples/llama-70b-h200':40s} CLI wall {wall * 1e3:14.0f} ms")


if __name__ == "__main__":
    main()
