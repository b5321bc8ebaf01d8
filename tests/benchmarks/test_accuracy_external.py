"""The accuracy benchmark's external check: rows never fitted, scored by model family × GPU type."""

import numpy as np
from benchmark_scripts import load

from profiler.model.calibrate import family, prepare_rows


def _row(gpu: str, mode: str, concurrency: int, ttft_ms: str, tpot_ms: float) -> dict:
    row = {"model": "deepseek-ai/DeepSeek-R1", "gpu": gpu, "backend": "sglang", "precision": "fp8", "mode": mode,
           "isl": "1024", "osl": "1024", "concurrency": str(concurrency), "tp": "8", "ttft_ms": ttft_ms,
           "tpot_ms": str(tpot_ms)}
    if mode == "disagg":
        row.update(tp="", p_workers="1", p_tp="8", d_workers="1", d_tp="8", num_gpus="16")
    return row


def test_each_family_and_gpu_is_scored_on_its_own_rows_and_a_row_without_ttft_counts_for_tpot_only():
    rows = [_row("b200_sxm", "agg", 4, "100", 10.0), _row("b200_sxm", "agg", 16, "", 12.0),
            _row("b200_sxm", "disagg", 8, "200", 9.0), _row("h200_sxm", "agg", 4, "150", 14.0)]
    external = prepare_rows(rows)
    # predictions twice the measurement on B200, equal on H200
    double = np.where(external.labels["gpu"] == "b200_sxm", 2.0, 1.0)
    preds = {"shipped": np.stack([external.ttft_ms * double, external.tpot_ms * double])}
    table = load("accuracy").external_table(external, preds).splitlines()
    lines = {" ".join(line.split()[1:-6]): line.split()[-6:] for line in table if line.startswith("shipped")}
    name = family("deepseek-ai/DeepSeek-R1").split("/")[-1]
    assert lines[f"{name} b200_sxm"] == ["2", "100.0%", "+100%", "3", "100.0%", "+100%"]
    assert lines[f"{name} b200_sxm agg"][:4] == ["1", "100.0%", "+100%", "2"]
    assert lines[f"{name} h200_sxm"] == ["1", "0.0%", "+0%", "1", "0.0%", "+0%"]
    assert lines["all"][0] == "3" and lines["all"][3] == "4"
