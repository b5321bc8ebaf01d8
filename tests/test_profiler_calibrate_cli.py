"""``slaplan calibrate``: deterministic params.json with provenance (a short fit on a subset)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from api.cli import main
from profiler.params import PARAMS

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "measured_serving_calibration.csv"


@pytest.fixture
def subset(tmp_path) -> Path:
    if not DATA.is_file():
        pytest.skip("../shared/data/measured_serving_calibration.csv is absent")
    lines = DATA.read_text(encoding="utf-8").splitlines(keepends=True)
    path = tmp_path / "subset.csv"
    path.write_text("".join([lines[0], *lines[1::60]]), encoding="utf-8")
    return path


def test_calibrate_is_deterministic_and_records_provenance(subset, tmp_path, capsys):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    for out in (first, second):
        assert main(["calibrate", "--data", str(subset), "--out", str(out), "--max-evals", "3"]) == 0
    assert first.read_bytes() == second.read_bytes()
    doc = json.loads(first.read_text())
    assert set(doc["params"]) == set(PARAMS)
    for name, value in doc["params"].items():
        assert PARAMS[name][1] <= value <= PARAMS[name][2] or PARAMS[name][1] == 0
    prov = doc["provenance"]
    assert prov["data"] == "subset.csv"
    assert prov["sha256"] == hashlib.sha256(subset.read_bytes()).hexdigest()
    assert prov["rows"] == len(subset.read_text().splitlines()) - 1
    assert 0 < prov["rows_used"] <= prov["rows"]
    assert prov["command"].startswith("slaplan calibrate --data subset.csv")
    assert "date" not in prov and str(tmp_path) not in first.read_text()
    assert "TTFT" in capsys.readouterr().out


def test_calibrate_missing_data_is_a_clear_error(tmp_path, capsys):
    assert main(["calibrate", "--data", str(tmp_path / "absent.csv"), "--out", str(tmp_path / "p.json")]) == 1
    assert "error: --data" in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists()


KERNELS = DATA.parent / "vidur_linear_ops_measured.csv"


def test_calibrate_fits_the_gemm_prior_to_kernel_measurements(subset, tmp_path):
    if not KERNELS.is_file():
        pytest.skip("../shared/data/vidur_linear_ops_measured.csv is absent")
    lines = KERNELS.read_text(encoding="utf-8").splitlines(keepends=True)
    kernels = tmp_path / "kernels.csv"
    kernels.write_text("".join([lines[0], *lines[1::20]]), encoding="utf-8")
    out = tmp_path / "p.json"
    assert main(["calibrate", "--data", str(subset), "--kernels", str(kernels), "--out", str(out),
                 "--max-evals", "3"]) == 0
    prov = json.loads(out.read_text())["provenance"]
    assert prov["kernels"]["data"] == "kernels.csv"
    assert prov["kernels"]["sha256"] == hashlib.sha256(kernels.read_bytes()).hexdigest()
    prior = prov["kernels"]["prior"]
    assert set(prior) <= {"eff_gemm", "eff_fp4", "gemm_half_tokens", "gemm_half_width", "eff_hbm"}
    assert prior["eff_fp4"] == prior["eff_gemm"]  # no fp4 kernels measured: the same share of peak
    assert prov["command"] == "slaplan calibrate --data subset.csv --kernels kernels.csv --max-evals 3"


def test_calibrate_bad_kernel_file_is_a_clear_error(subset, tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["calibrate", "--data", str(subset), "--kernels", str(tmp_path / "absent.csv"), "--out", str(out)]) == 1
    assert "error: --kernels" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("gpu,model,tp,num_tokens,attn_pre_proj_ms,attn_post_proj_ms,mlp_up_proj_ms,mlp_down_proj_ms\n"
                   "h100,meta-llama/Llama-2-7b-hf,two,16,0.1,0.1,0.2,0.1\n", encoding="utf-8")
    assert main(["calibrate", "--data", str(subset), "--kernels", str(bad), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "error: --kernels: tp: not a number: 'two'" in err
    assert not out.exists()


def test_cross_validation_in_processes_matches_one_process(subset):
    import numpy as np

    from api.commands.calibrate import read_rows, run_cross_validation
    from profiler.calibrate import prepare_rows
    from profiler.params import default_params

    data = prepare_rows(read_rows(subset))
    alone = run_cross_validation(data, default_params(), workers=1, max_evals=3)
    spread = run_cross_validation(data, default_params(), workers=2, max_evals=3)
    assert set(alone) == set(spread) == {"family", "gpu"}
    for scheme in alone:
        assert alone[scheme].shape == (2, len(data.index))
        np.testing.assert_array_equal(alone[scheme], spread[scheme])
        # every row belongs to exactly one held-out group per scheme, so every row is predicted
        assert np.isfinite(alone[scheme]).all()


def test_calibrate_workers_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        main(["calibrate", "--cv", "--workers", "0"])
    assert "argument --workers: must be a positive whole number, got '0'" in capsys.readouterr().err


def test_calibrate_without_measurements_fails_and_keeps_the_parameters_file(tmp_path, capsys):
    data = tmp_path / "plan_only.csv"
    data.write_text("model,gpu,backend,mode,isl,osl,concurrency,tp\n"
                    "meta-llama/Llama-3.1-8B,h100_sxm,vllm,agg,1000,100,4,1\n")
    out = tmp_path / "params.json"
    out.write_text('{"params": {}, "provenance": {"kept": true}}\n')
    before = out.read_bytes()
    assert main(["calibrate", "--data", str(data), "--out", str(out), "--max-evals", "1"]) == 1
    assert "--data: none of the 1 rows has ttft_ms and tpot_ms measured" in capsys.readouterr().err
    assert out.read_bytes() == before
