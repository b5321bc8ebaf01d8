"""InferenceX measurements in the calibration columns (benchmarks/inferencex_data.py), and the model's AMD-only
parameters."""

from __future__ import annotations

import copy
import csv
import io

import numpy as np
import pytest

from profiler.model.calibrate import cross_validate, cross_validate_amd, fit, fit_by_vendor, prepare_rows
from profiler.model.config import Parallel, ServingConfig
from profiler.model.dataset import row_prepared
from profiler.model.estimate import estimate, evaluate, prepare, stack_prepared
from profiler.model.params import AMD_PARAMS, PARAMS, shipped_params
from tests.benchmark_scripts import load

inferencex = load("inferencex_data")

# One published result as the dashboard's JSON holds it (figures invented for the test, seconds).
AGG = {"hardware": "mi300x", "framework": "sglang", "model": "dsr1", "precision": "fp8", "spec_method": "none",
       "disagg": False, "is_multinode": False, "prefill_tp": 8, "prefill_ep": 1, "prefill_dp_attention": False,
       "prefill_num_workers": 0, "decode_tp": 8, "decode_ep": 1, "decode_dp_attention": False,
       "decode_num_workers": 0, "num_prefill_gpu": 8, "num_decode_gpu": 8, "isl": 1024, "osl": 1024, "conc": 16,
       "image": "lmsysorg/sglang:v0.5.9-rocm700-mi30x",
       "metrics": {"mean_ttft": 0.4, "median_ttft": 0.2, "mean_tpot": 0.025, "median_tpot": 0.0251,
                   "output_tput_per_gpu": 70.0, "tput_per_gpu": 140.0},
       "date": "2026-02-27", "run_url": "https://example.invalid/runs/1"}
DISAGG = {**AGG, "hardware": "mi355x", "framework": "mori-sglang", "disagg": True, "is_multinode": True,
          "prefill_tp": 8, "prefill_ep": 8, "prefill_dp_attention": True, "prefill_num_workers": 1,
          "decode_tp": 8, "decode_ep": 8, "decode_dp_attention": False, "decode_num_workers": 2,
          "num_prefill_gpu": 8, "num_decode_gpu": 16, "conc": 64, "image": None,
          "metrics": {"median_ttft": 0.3, "median_tpot": 0.02}}


def with_(record: dict, **changes) -> dict:
    out = copy.deepcopy(record)
    out.update(changes)
    return out


def test_a_result_with_means_keeps_them_and_its_provenance():
    row = inferencex.convert(AGG, "repo:file@abc")
    assert row["statistic"] == "mean"
    assert (row["ttft_ms"], row["tpot_ms"]) == ("400", "25")
    assert (row["median_ttft_ms"], row["median_tpot_ms"]) == ("200", "25.1")
    assert (row["gpu"], row["backend"], row["backend_version"], row["mode"]) == ("mi300x", "sglang", "0.5.9", "agg")
    assert (row["tp"], row["attn_dp"], row["moe_tp"], row["moe_ep"], row["num_gpus"]) == ("8", "1", "8", "1", "8")
    assert (row["source"], row["date"], row["url"]) == ("repo:file@abc", "2026-02-27", "https://example.invalid/runs/1")
    assert "Apache-2.0" in row["licence"] and row["derived_output_tok_s_per_gpu"] == "70"


def test_a_result_with_medians_only_gives_its_tpot_and_no_ttft():
    row = inferencex.convert(DISAGG, "s")
    assert row["statistic"] == "median" and row["ttft_ms"] == "" and row["tpot_ms"] == "20"
    assert row["median_ttft_ms"] == "300"


def test_a_disaggregated_result_spells_attention_dp_as_the_calibration_columns_do():
    row = inferencex.convert(DISAGG, "s")
    assert row["mode"] == "disagg" and row["backend"] == "sglang" and row["num_gpus"] == "24"
    assert (row["p_workers"], row["p_tp"], row["p_attn_dp"], row["p_moe_ep"]) == ("1", "1", "8", "8")
    assert (row["d_workers"], row["d_tp"], row["d_attn_dp"], row["d_moe_ep"]) == ("2", "8", "1", "8")
    # tp 1 with ep 8: an 8-GPU engine whose attention is data-parallel
    assert inferencex.engine_columns(1, 8, False) == {"tp": 1, "attn_dp": 8, "moe_tp": 1, "moe_ep": 8}


@pytest.mark.parametrize("record", [
    with_(AGG, hardware="b200"),  # not an AMD GPU
    with_(AGG, framework="atom"),  # an engine slaplan does not model
    with_(AGG, spec_method="mtp"),  # drafted tokens and acceptance unpublished
    with_(AGG, model="unknown"),
    with_(DISAGG, num_decode_gpu=8),  # GPU counts disagree with the workers' engines
])
def test_results_slaplan_cannot_read_as_deployments_are_left_out(record):
    assert inferencex.convert(record, "s") is None


def test_nvidia_results_are_read_with_the_catalog_gpu_and_engine_names():
    record = with_(DISAGG, hardware="b200", framework="dynamo-trt", image="nvcr.io/x/tensorrtllm-runtime:0.8.1.post2")
    assert inferencex.convert(record, "s") is None  # not an AMD GPU
    row = inferencex.convert(record, "s", vendor="nvidia")
    assert (row["gpu"], row["backend"], row["mode"], row["backend_version"]) == ("b200_sxm", "trtllm", "disagg",
                                                                                 "0.8.1.post2")
    assert inferencex.convert(AGG, "s", vendor="nvidia") is None  # an AMD GPU
    assert inferencex.convert(with_(AGG, hardware="tpu9"), "s", vendor="nvidia") is None  # not in the catalog


def test_a_result_the_calibration_data_holds_is_a_repeat_and_another_is_not():
    row = inferencex.convert(with_(AGG, hardware="h200", date="2026-01-02"), "s", vendor="nvidia")
    same = {**row, "model": "deepseek-ai/DeepSeek-R1", "source": "other", "provenance": "", "date": ""}
    known = inferencex.known_measurements([same])
    assert inferencex.repeats(row, known)
    slower = {**same, "tpot_ms": str(float(row["tpot_ms"]) * (1 + 2 * inferencex.SAME_WITHIN))}
    assert not inferencex.repeats(row, inferencex.known_measurements([slower]))
    # measured the same day (as the calibration data's provenance spells it): a wider tolerance
    same_day = {**slower, "provenance": "db; measured=2026-01-02T00:00:00.000Z"}
    assert inferencex.repeats(row, inferencex.known_measurements([same_day]))
    other_length = {**same, "isl": "8192"}
    assert not inferencex.repeats(row, inferencex.known_measurements([other_length]))
    median_only = {**row, "ttft_ms": "", "statistic": "median"}  # TPOT alone decides
    assert inferencex.repeats(median_only, inferencex.known_measurements([{**same, "ttft_ms": "1"}]))


def test_a_run_in_both_files_is_one_row_the_one_with_means():
    median_only = with_(AGG, metrics={"median_ttft": 0.2, "median_tpot": 0.0251})
    rows = inferencex.rows_from([([median_only], "history"), ([AGG, with_(AGG, conc=4)], "latest")])
    assert [(r["concurrency"], r["statistic"], r["source"]) for r in rows] == [("4", "mean", "latest"),
                                                                               ("16", "mean", "latest")]


def test_written_rows_read_back_as_deployments_and_fit_on_what_they_measure():
    rows = inferencex.rows_from([([AGG, DISAGG], "s")])
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=inferencex.COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    read = list(csv.DictReader(io.StringIO(text.getvalue())))
    for row in read:
        row_prepared(row)
    data = prepare_rows(read)
    assert not data.errors
    # A median-only result: its TTFT is the median it publishes, read as one.
    assert data.median.tolist() == [False, True]
    assert data.ttft_ms[1] == float(read[1]["median_ttft_ms"]) and data.tpot_ms[1] == 20.0
    names = ("amd_gemm_share", "cdna3_layer_us")
    fitted = fit(data, shipped_params(), names, max_evals=5)
    assert all(PARAMS[n][1] <= fitted[n] <= PARAMS[n][2] for n in names)


def _config(gpu: str) -> ServingConfig:
    return ServingConfig(model="deepseek-ai/DeepSeek-R1", gpu=gpu, backend="sglang", precision="fp8",
                         engine=Parallel(tp=8), isl_tokens=4096, osl_tokens=512, concurrency=32)


def test_amd_parameters_change_amd_gpus_only():
    base = shipped_params()
    changed = dict(base, amd_gemm_share=0.5, amd_hbm_share=0.6, amd_attn_share=0.4, amd_link_eff=0.1,
                   amd_coll_latency_us=80.0, amd_peer_us=9.0, cdna3_layer_us=400.0, cdna4_layer_us=300.0)
    assert all(changed[n] != base[n] for n in PARAMS if n.startswith(("amd_", "cdna")))
    for gpu in ("h200_sxm", "b200_sxm", "b300_sxm", "gb200"):
        assert estimate(_config(gpu), params=changed) == estimate(_config(gpu), params=base)
    for gpu in ("mi300x", "mi325x", "mi350x", "mi355x"):
        before, after = estimate(_config(gpu), params=base), estimate(_config(gpu), params=changed)
        assert after.itl_ms > before.itl_ms and after.ttft_ms > before.ttft_ms


def test_each_instinct_generation_has_its_own_decode_layer_cost():
    batch = stack_prepared([prepare(_config(gpu)) for gpu in ("mi300x", "mi355x")])
    base = shipped_params()
    itl = lambda **p: evaluate(batch, dict(base, **p))["itl_ms"]  # noqa: E731
    cdna3, cdna4 = itl(cdna3_layer_us=500.0) - itl(), itl(cdna4_layer_us=500.0) - itl()
    # the other generation's rows move by the batched solver's round-off at most (ms)
    assert cdna3[0] > 0 and abs(cdna3[1]) < 1e-9 and abs(cdna4[0]) < 1e-9 and cdna4[1] > 0
    assert np.all(itl(layer_us=500.0) == itl())  # NVIDIA's per-layer cost is not theirs


def _nvidia_rows() -> list[dict]:
    return [{"model": "deepseek-ai/DeepSeek-R1", "gpu": "b200_sxm", "backend": "sglang", "precision": "fp8",
             "mode": "agg", "isl": "1024", "osl": "1024", "concurrency": str(c), "tp": "8",
             "ttft_ms": str(300 + 10 * c), "tpot_ms": str(8 + c / 4)} for c in (4, 16, 64)]


def test_amd_rows_fit_only_the_amd_parameters():
    amd_rows = inferencex.rows_from([([AGG, with_(AGG, conc=4), DISAGG], "s")])
    nvidia_rows = _nvidia_rows()
    start = shipped_params()
    both = fit_by_vendor(prepare_rows(nvidia_rows + amd_rows), start, max_evals=3)
    alone = fit_by_vendor(prepare_rows(nvidia_rows), start, max_evals=3)
    assert all(both[n] == alone[n] for n in PARAMS if n not in AMD_PARAMS)
    assert all(alone[n] == start[n] for n in AMD_PARAMS)
    assert any(both[n] != start[n] for n in AMD_PARAMS)


def test_amd_folds_alone_predict_as_the_full_cross_validation():
    amd_rows = inferencex.rows_from([([AGG, with_(AGG, conc=4), with_(AGG, hardware="mi325x"), DISAGG], "s")])
    data = prepare_rows(_nvidia_rows() + amd_rows)
    amd = data.batch.decode["cdna"] > 0
    held_out = {"cdna3": data.batch.decode["cdna"] == 3, "amd": amd}
    full = cross_validate(data, shipped_params(), max_evals=3, held_out=held_out)
    alone = cross_validate_amd(data, shipped_params(), max_evals=3)
    assert set(alone) == {"gpu", "gpu/engine", "cdna3", "cdna3/engine", "amd", "amd/engine"}
    for scheme, predicted in alone.items():
        assert np.all(np.isnan(predicted[:, ~amd]))
        assert np.isfinite(predicted[:2, amd]).sum() >= 6  # the aggregated rows at least
        assert np.array_equal(predicted[:, amd], full[scheme][:, amd], equal_nan=True)
