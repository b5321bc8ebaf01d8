"""Rows that report a median TTFT: read as a median, predicted as one (no burst wait, the harness
term's median share), and fitted for that share alone."""

from __future__ import annotations

import numpy as np
import pytest

from profiler.model.calibrate import fit_by_vendor, predict_as_measured, prepare_rows, reports_median
from profiler.model.errors import ModelError
from profiler.model.estimate import evaluate
from profiler.model.harness import MEDIAN_SHARE, TYPICAL
from profiler.model.params import PARAMS, default_params


def _row(concurrency: float, statistic: str = "mean", ttft_ms: float = 300.0, median_ttft_ms: float = 200.0) -> dict:
    return {"provenance": "bench_a | run 3", "model": "meta-llama/Llama-3.1-8B", "gpu": "h100_sxm",
            "backend": "sglang", "precision": "bf16", "mode": "agg", "isl": "4000", "osl": "500",
            "concurrency": str(concurrency), "tp": "1", "statistic": statistic,
            "ttft_ms": "" if statistic == "median" else str(ttft_ms), "median_ttft_ms": str(median_ttft_ms),
            "tpot_ms": "12"}


def test_a_row_reporting_a_median_is_read_as_its_median_ttft():
    data = prepare_rows([_row(4), _row(4, "median"), _row(4, "Median "), {**_row(4), "statistic": ""}])
    assert data.median.tolist() == [False, True, True, False]
    assert data.ttft_ms.tolist() == [300.0, 200.0, 200.0, 300.0]


def test_an_unknown_statistic_is_an_error_naming_the_column():
    with pytest.raises(ModelError, match="statistic"):
        reports_median({"statistic": "p90"})
    data = prepare_rows([_row(4), _row(4, "p90")])
    assert data.index.tolist() == [0] and "statistic" in data.errors[1]


def test_the_median_request_waits_no_burst_and_pays_its_share_of_the_harness_term():
    rows = [_row(c, s) for c in (1, 8, 64) for s in ("mean", "median")]
    data = prepare_rows(rows)
    params = default_params() | {MEDIAN_SHARE: 0.25}
    engine = evaluate(data.batch, params)
    # The engine's own median: the mean less the closed loop's burst wait, which grows with clients.
    assert engine["ttft_p50_ms"] == pytest.approx(engine["ttft_ms"] - engine["ttft_burst_ms"])
    assert engine["ttft_burst_ms"][4] > engine["ttft_burst_ms"][2] > engine["ttft_burst_ms"][0] == 0
    measured = predict_as_measured(data, params)["ttft_ms"]
    term = TYPICAL["harness_ttft_ms_sglang"][0]
    mean, median = measured[0::2], measured[1::2]
    # A mean pays the whole harness term, a median its share; at one client nothing else differs
    # (the operating point is the same: both rows' clients pay the whole term between requests).
    assert median[0] == pytest.approx(mean[0] - 0.75 * term)
    assert np.all(np.diff(mean - median) > 0)  # and beyond, the burst the median does not wait


def test_disaggregated_medians_wait_the_burst_at_the_shared_prefill_pool():
    rows = [{**_row(c), "mode": "disagg", "model": "deepseek-ai/DeepSeek-R1-0528", "gpu": "mi355x", "precision": "fp8",
             "isl": "1024", "osl": "1024", "tp": "", "p_workers": "1", "p_tp": "8", "d_workers": "2", "d_tp": "8"}
            for c in (8, 64)]
    engine = evaluate(prepare_rows(rows).batch, default_params())
    assert engine["ttft_burst_ms"][1] > engine["ttft_burst_ms"][0] > 0
    assert engine["ttft_p50_ms"] == pytest.approx(engine["ttft_ms"])


def _as_predicted(rows: list[dict], params: dict[str, float], scale: float = 1.0) -> list[dict]:
    """``rows`` with the TTFT each reports and the TPOT the model predicts with ``params`` (TTFT × ``scale``)."""
    out = predict_as_measured(prepare_rows(rows), params)
    key = lambda row: "median_ttft_ms" if row["statistic"] == "median" else "ttft_ms"  # noqa: E731
    return [{**row, key(row): str(scale * t), "tpot_ms": str(i)} for row, t, i in zip(rows, out["ttft_ms"], out["itl_ms"])]


def test_the_medians_fit_their_share_and_nothing_else():
    start = default_params()
    means = _as_predicted([_row(c) for c in (1, 8, 64)], start)

    def fitted(truth: float, scale: float = 1.0) -> dict[str, float]:
        """Parameters fitted to the mean rows and median rows whose medians are the model's at share
        ``truth``, times ``scale``."""
        medians = _as_predicted([_row(c, "median") for c in (1, 8, 64)], start | {MEDIAN_SHARE: truth}, scale)
        return fit_by_vendor(prepare_rows(means + medians), start, max_evals=30)

    low, high, off = fitted(0.2), fitted(0.8), fitted(0.2, scale=1.5)
    assert low[MEDIAN_SHARE] < high[MEDIAN_SHARE] < off[MEDIAN_SHARE]
    assert low[MEDIAN_SHARE] == pytest.approx(0.2, rel=0.1)
    # The engine's parameters are fitted on the means and TPOTs alone: the medians do not move them.
    assert all(low[n] == high[n] == off[n] for n in PARAMS)
