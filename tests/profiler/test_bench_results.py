"""Parsing genai-bench 0.0.5 result folders (files written here, shaped like the real ones)."""

from __future__ import annotations

import json

import pytest

from profiler.bench.results import parse_folder, parse_iteration, result_file_kind, status_metrics, table
from profiler.bench.runner import explain_exit, read_results


def _stat(mean, p50=None, p90=None, p99=None):
    return {"min": mean, "max": mean, "mean": mean, "stddev": 0.0, "sum": mean, "p25": mean,
            "p50": p50 or mean, "p75": mean, "p90": p90 or mean, "p95": mean, "p99": p99 or mean}


def _result(scenario, concurrency, *, ttft=0.08, tpot=0.012, e2e=0.3, requests=10, errors=0, unit="s"):
    scale = 1000.0 if unit == "ms" else 1.0
    return {
        "aggregated_metrics": {
            "scenario": scenario, "num_concurrency": concurrency, "batch_size": 1, "iteration_type": "num_concurrency",
            "run_duration": 4.2, "mean_output_throughput_tokens_per_s": 62.0, "mean_input_throughput_tokens_per_s": 313.0,
            "mean_total_tokens_throughput_tokens_per_s": 375.0, "requests_per_second": 3.1,
            "error_codes_frequency": {"503": errors} if errors else {}, "error_rate": 0,  # always 0 in 0.0.5
            "num_error_requests": errors, "num_completed_requests": requests - errors, "num_requests": requests,
            "stats": {"ttft": _stat(ttft * scale, p90=ttft * 1.1 * scale, p99=ttft * 1.2 * scale),
                      "tpot": _stat(tpot * scale), "e2e_latency": _stat(e2e * scale),
                      "num_input_tokens": _stat(101), "num_output_tokens": _stat(20)},
        },
        "individual_request_metrics": [{"ttft": ttft, "error_code": None, "error_message": None}],
        "_time_unit": unit,
    }


def test_file_names_are_matched_by_pattern():
    assert result_file_kind("D100_20_text-to-text_num_concurrency_4_time_2s.json") == "result"
    assert result_file_kind("N480_240_300_150_image-text-to-text_num_concurrency_16_time_61s.json") == "result"
    assert result_file_kind("E128_text-to-embeddings_batch_size_8_time_3s.json") == "result"
    assert result_file_kind("debug_for_run_D100_20_4.json") == "debug"
    assert result_file_kind("experiment_metadata.json") == "metadata"
    assert result_file_kind("run1_summary.xlsx") is None


def test_one_iteration_in_ms_with_computed_error_rate():
    m = parse_iteration("x_text-to-text_num_concurrency_4_time_2s.json", _result("D(100,20)", 4, requests=8, errors=2))
    assert (m.scenario, m.concurrency, m.requests, m.errors) == ("D(100,20)", 4, 8, 2)
    assert m.error_rate == pytest.approx(0.25)  # genai-bench's own error_rate says 0
    assert m.error_codes == {"503": 2}
    assert m.ttft.mean_ms == pytest.approx(80.0) and m.ttft.p90_ms == pytest.approx(88.0) and m.ttft.p99_ms == pytest.approx(96.0)
    assert m.tpot.mean_ms == pytest.approx(12.0) and m.e2e.p50_ms == pytest.approx(300.0)
    assert m.output_tok_s == 62.0 and m.requests_per_s == 3.1 and m.mean_output_tokens == 20


def test_ms_unit_is_not_scaled_again():
    m = parse_iteration("a_text-to-text_num_concurrency_1_time_1s.json", _result("D(1,1)", 1, unit="ms"))
    assert m.ttft.mean_ms == pytest.approx(80.0)


def test_scenario_and_concurrency_come_from_inside_the_file(tmp_path):
    # the names lie about the concurrency; the contents are what counts
    (tmp_path / "D100_20_text-to-text_num_concurrency_1_time_9s.json").write_text(json.dumps(_result("D(100,20)", 4, ttft=0.12)))
    (tmp_path / "D100_20_text-to-text_num_concurrency_4_time_9s.json").write_text(json.dumps(_result("D(100,20)", 1)))
    (tmp_path / "N480_240_300_150_text-to-text_num_concurrency_1_time_9s.json").write_text(
        json.dumps(_result("N(480,240)/(300,150)", 1)))
    (tmp_path / "debug_for_run_D2000_200_2.json").write_text(json.dumps(_result("D(2000,200)", 2, requests=3, errors=3)))
    (tmp_path / "experiment_metadata.json").write_text(json.dumps(
        {"traffic_scenario": ["N(480,240)/(300,150)", "D(100,20)", "D(2000,200)"], "metrics_time_unit": "s"}))
    (tmp_path / "broken_text-to-text_num_concurrency_1_time_1s.json").write_text("{not json")
    (tmp_path / "notes.json").write_text("{}")
    results, failed = read_results(tmp_path)
    assert [(r.scenario, r.concurrency) for r in results] == [("N(480,240)/(300,150)", 1), ("D(100,20)", 1), ("D(100,20)", 4)]
    assert results[2].ttft.mean_ms == pytest.approx(120.0)
    assert [(r.scenario, r.successes) for r in failed] == [("D(2000,200)", 0)]
    rows = status_metrics(results)
    assert rows[2]["ttftMs"]["mean"] == 120.0 and rows[2]["tpotMs"]["p99"] == 12.0 and rows[0]["errorRate"] == 0
    text = table(results)
    assert "D(100,20)" in text and "TTFT mean" in text


def test_not_a_result_file():
    with pytest.raises(ValueError, match="aggregated_metrics"):
        parse_iteration("x.json", {"hello": 1})
    assert parse_folder({"a_text-to-text_num_concurrency_1_time_1s.json": {"x": 1}}) == ([], [])


def test_exit_reasons_in_plain_words():
    assert explain_exit(1, "OSError: Can't load tokenizer for 'org/m'").startswith("tokenizer missing")
    assert explain_exit(1, "ValueError: No values found for metric 'ttft'") == "zero successful requests"
    assert "code 2" in explain_exit(2, "Error: Invalid value for '--task'")


def test_a_result_file_nested_beyond_reason_is_skipped_like_any_unreadable_one(tmp_path):
    (tmp_path / "D100_20_text-to-text_num_concurrency_1_time_10s.json").write_text("[" * 100_000 + "]" * 100_000)
    assert read_results(tmp_path) == ([], [])
