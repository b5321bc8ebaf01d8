"""``slaplan calibrate``: deterministic params.json with provenance (a short fit on a subset)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from api.cli import main
from profiler.model.params import PARAMS
from paths import SHARED

DATA = SHARED / "data" / "measured_serving_calibration.csv"


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


@pytest.mark.slow
def test_cross_validation_in_processes_matches_one_process(subset):
    import numpy as np

    from api.commands.calibrate import read_rows, run_cross_validation
    from profiler.model.calibrate import prepare_rows
    from profiler.model.params import default_params

    data = prepare_rows(read_rows(subset))
    disagg = data.labels["mode"] == "disagg"
    assert 0 < disagg.sum() < disagg.size
    alone = run_cross_validation(data, default_params(), workers=1, max_evals=3, held_out={"disagg": disagg})
    spread = run_cross_validation(data, default_params(), workers=2, max_evals=3, held_out={"disagg": disagg})
    # each scheme is read as measured and as the engine alone (without the harnesses' terms)
    schemes = {"family", "gpu", "disagg"}
    assert set(alone) == set(spread) == schemes | {f"{s}/engine" for s in schemes}
    for scheme in alone:
        assert alone[scheme].shape == (3, len(data.index))
        np.testing.assert_array_equal(alone[scheme], spread[scheme])
    for scheme in ("family", "gpu"):
        # every row belongs to exactly one held-out group per scheme, so every row is predicted
        assert np.isfinite(alone[scheme]).all()
    # a group held out on its own: its rows predicted, no other
    assert np.isfinite(alone["disagg"][:, disagg]).all() and np.isnan(alone["disagg"][:, ~disagg]).all()
    # the engine alone never pays a harness term: its first tokens come no later
    for scheme in schemes:
        both = np.isfinite(alone[scheme][0]) & np.isfinite(alone[f"{scheme}/engine"][0])
        assert both.any() and (alone[f"{scheme}/engine"][0][both] <= alone[scheme][0][both] + 1e-9).all()


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
    assert "--data: none of the 1 rows has ttft_ms or tpot_ms measured" in capsys.readouterr().err
    assert out.read_bytes() == before


def _strict_json(path: Path) -> dict:
    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(path.read_text(), parse_constant=refuse)


def _with_cells(subset: Path, path: Path, cells: dict[int, dict[str, str]]) -> Path:
    """A copy of ``subset`` at ``path`` with the given cells of data rows (0 = the first) replaced."""
    import csv

    with subset.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        fields, rows = reader.fieldnames, list(reader)
    for i, values in cells.items():
        rows[i].update(values)
    path.parent.mkdir(exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_measurements_that_are_not_finite_and_positive_are_unmeasured(subset, tmp_path, capsys):
    bad = {1: {"ttft_ms": "inf"}, 2: {"tpot_ms": "1e400"}, 3: {"ttft_ms": "0"}, 4: {"tpot_ms": "-1"},
           5: {"ttft_ms": "nan"}}
    odd = _with_cells(subset, tmp_path / "odd" / "data.csv", bad)
    empty = _with_cells(subset, tmp_path / "empty" / "data.csv",
                        {i: dict.fromkeys(cells, "") for i, cells in bad.items()})
    docs = []
    for data in (odd, empty):
        out = data.parent / "p.json"
        assert main(["calibrate", "--data", str(data), "--out", str(out), "--max-evals", "3"]) == 0
        captured = capsys.readouterr()
        assert "Warning" not in captured.err and "nan" not in captured.out
        assert "0 without a finite positive ttft_ms or tpot_ms, 5 fitted on the one of them they have" in captured.err
        docs.append(_strict_json(out))
    for doc in docs:
        del doc["provenance"]["sha256"]
    assert docs[0] == docs[1]


def test_a_measurement_that_is_not_a_number_makes_its_row_unusable(subset, tmp_path, capsys):
    text = _with_cells(subset, tmp_path / "text" / "data.csv", {1: {"ttft_ms": "abc"}})
    out = tmp_path / "p.json"
    assert main(["calibrate", "--data", str(text), "--out", str(out), "--max-evals", "3"]) == 0
    assert "Warning" not in capsys.readouterr().err
    assert main(["calibrate", "--data", str(subset), "--out", str(tmp_path / "q.json"), "--max-evals", "3"]) == 0
    prov, clean = _strict_json(out)["provenance"], _strict_json(tmp_path / "q.json")["provenance"]
    assert prov["rows_not_predictable"] == clean["rows_not_predictable"] + 1
    assert prov["rows_used"] == clean["rows_used"] - 1

    from profiler.model.calibrate import prepare_rows

    data = prepare_rows([{"model": "meta-llama/Llama-3.1-8B", "gpu": "h100", "isl": "512", "osl": "128",
                          "concurrency": "4", "ttft_ms": "abc", "tpot_ms": "20"}])
    assert data.errors == {0: "ttft_ms: not a number: 'abc'"}


@pytest.mark.parametrize("option", ["--data", "--kernels"])
def test_a_file_that_is_not_utf8_is_a_clear_error(subset, tmp_path, capsys, option):
    latin = tmp_path / "latin1.csv"
    latin.write_bytes("model,gpu\nCafé,h100\n".encode("latin-1"))
    out = tmp_path / "p.json"
    files = {"--data": str(subset), "--kernels": None} | {option: str(latin)}
    argv = ["calibrate", "--data", files["--data"], "--out", str(out), "--max-evals", "1"]
    assert main(argv + (["--kernels", files["--kernels"]] if files["--kernels"] else [])) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"error: {option}: {latin} is not a UTF-8 CSV file: ")
    assert not out.exists()


@pytest.mark.parametrize("value", ["0", "-5", "many"])
def test_max_evals_must_be_positive(value, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["calibrate", "--max-evals", value])
    assert exit_.value.code == 2
    assert f"argument --max-evals: must be a positive whole number, got '{value}'" in capsys.readouterr().err


def test_an_out_that_cannot_be_written_is_refused_before_fitting(subset, tmp_path, capsys):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("a file, not a folder\n")
    data_before = subset.read_bytes()
    for out, reason in ((tmp_path / "folder", f"{tmp_path / 'folder'} is a directory"),
                        (tmp_path / "file" / "p.json", f"cannot write {tmp_path / 'file' / 'p.json'}: "),
                        (subset, f"{subset} is the input file {subset}; writing it would overwrite it"),
                        ("", "empty; give a file path")):
        assert main(["calibrate", "--data", str(subset), "--out", str(out), "--max-evals", "1"]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: --out: {reason}") and err.count("\n") == 1  # before "fitting …"
    assert subset.read_bytes() == data_before
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["file", "folder", "subset.csv"]  # no side file left


def _rows(path: Path) -> list[dict]:
    from api.commands.calibrate import read_rows

    return read_rows(path)


def _recipe(row: dict, **facts: str) -> dict:
    from api.commands.calibrate import RECIPE_KEY

    return {**{k: row[k] for k in RECIPE_KEY}, **facts}


def test_recipes_fill_the_rows_they_name_and_nothing_else(subset):
    from api.commands.calibrate import with_recipes
    from profiler.model.calibrate import prepare_rows

    rows = _rows(subset)
    named = next(i for i, row in enumerate(rows) if row["mode"] == "disagg" and row["p_workers"])
    limited = with_recipes(rows, [_recipe(rows[named], max_batch="12")])
    assert limited[named]["max_batch"] == "12"
    assert [r for i, r in enumerate(limited) if i != named] == [r for i, r in enumerate(rows) if i != named]
    assert not rows[named].get("max_batch")  # the rows read are not changed in place
    before, after = prepare_rows(rows), prepare_rows(limited)
    where = list(after.index).index(named)
    assert after.batch.load["batch_cap"][where] < before.batch.load["batch_cap"][where]


def test_a_row_without_worker_counts_is_read_as_its_recipe_deploys_it(subset):
    from api.commands.calibrate import with_recipes
    from profiler.model.calibrate import prepare_rows

    rows = _rows(subset)
    named = next(i for i, row in enumerate(rows) if row["mode"] == "disagg" and not row["p_workers"]
                 and row["model"].startswith("deepseek-ai/") and int(row["p_tp"]) == 8 and int(row["d_tp"]) == 8)
    deployed = with_recipes(rows, [_recipe(rows[named], p_workers="2", d_workers="3", p_tp="1", p_attn_dp="8",
                                           p_moe_ep="8", d_tp="8", d_attn_dp="1", d_moe_ep="8", spec_tokens="0")])
    before, after = prepare_rows(rows), prepare_rows(deployed)
    where = list(after.index).index(named)
    assert before.inferred[where] and not after.inferred[where]  # now fitted like any recorded row
    assert after.batch.gpus[where] == 2 * 8 + 3 * 8
    # the same recipe stating engines of other sizes names no row
    with pytest.raises(ValueError, match="no measured row has them and engines of its GPUs"):
        with_recipes(rows, [_recipe(rows[named], p_workers="2", d_workers="3", p_tp="4", p_attn_dp="1")])


@pytest.mark.parametrize(("cells", "message"), [
    ({"max_batch": "0"}, "recipe row 1: max_batch: must be an integer ≥ 1, got '0'"),
    ({"max_batch": "2.5"}, "recipe row 1: max_batch: must be an integer ≥ 1, got '2.5'"),
    ({"spec_tokens": "-1"}, "recipe row 1: spec_tokens: must be an integer ≥ 0, got '-1'"),
    ({"max_batch": ""}, "recipe row 1: p_workers, d_workers, p_tp, p_attn_dp, p_moe_ep, d_tp, d_attn_dp, d_moe_ep, "
                        "max_batch, spec_tokens: none given"),
    ({"provenance": ""}, "recipe row 1: provenance: missing"),
    ({"concurrency": "123456789"}, "recipe row 1: provenance, model, gpu, backend, precision, isl, osl, concurrency: "
                                   "no measured row has them"),
])
def test_a_bad_recipe_row_is_an_error_naming_its_field(subset, cells, message):
    from api.commands.calibrate import with_recipes

    rows = _rows(subset)
    with pytest.raises(ValueError) as caught:
        with_recipes(rows, [{**_recipe(rows[0], max_batch="8"), **cells}])
    assert str(caught.value) == message


def test_a_recipe_that_contradicts_what_the_row_records_is_refused(subset):
    from api.commands.calibrate import with_recipes

    rows = _rows(subset)
    rows[0] = {**rows[0], "max_batch": "64"}
    with pytest.raises(ValueError, match="recipe row 1: max_batch: 8, but the measured row states 64"):
        with_recipes(rows, [_recipe(rows[0], max_batch="8")])
    assert with_recipes(rows, [_recipe(rows[0], max_batch="64")])[0]["max_batch"] == "64"
    recorded = next(i for i, row in enumerate(rows) if row["mode"] == "disagg" and row["p_workers"])
    other = str(int(rows[recorded]["d_workers"]) + 1)
    with pytest.raises(ValueError, match=f"recipe row 1: d_workers: {other}, but the measured row states"):
        with_recipes(rows, [_recipe(rows[recorded], d_workers=other)])


def _aggregated_spelling(gpus: int) -> dict:
    """A GB200 row a source recorded as aggregated, its disaggregated deployment's GPUs spelled as ``tp``."""
    return {"provenance": "sweep; measured=2025-11-17", "model": "deepseek-ai/DeepSeek-R1", "gpu": "gb200",
            "backend": "trtllm", "precision": "fp4", "mode": "agg", "isl": "1024", "osl": "1024",
            "concurrency": "64", "tp": str(gpus), "pp": "1", "attn_dp": "1", "moe_tp": str(gpus), "moe_ep": "1",
            "num_gpus": str(gpus), "ttft_ms": "262.5", "tpot_ms": "10.0"}


DEPLOYED = {"mode": "disagg", "p_workers": "1", "p_tp": "1", "p_attn_dp": "4", "p_moe_ep": "4",
            "d_workers": "4", "d_tp": "8", "d_attn_dp": "1", "d_moe_ep": "8"}


def test_an_aggregated_row_is_read_as_the_disaggregated_deployment_its_recipe_states():
    from api.commands.calibrate import with_recipes
    from profiler.model.calibrate import prepare_rows

    rows = [_aggregated_spelling(36), _aggregated_spelling(40)]
    deployed = with_recipes(rows, [_recipe(rows[0], **DEPLOYED)])
    assert deployed[1] == rows[1]  # the same key with another GPU count is another deployment
    assert (deployed[0]["mode"], deployed[0]["tp"], deployed[0]["moe_tp"]) == ("disagg", "", "")
    before, after = prepare_rows(rows), prepare_rows(deployed)
    assert before.inferred[0] and not after.inferred[0]  # fitted like any recorded deployment
    assert after.labels["mode"][0] == "disagg" and after.batch.gpus[0] == 36 == 4 + 4 * 8


@pytest.mark.parametrize(("cells", "message"), [
    ({"mode": "agg"}, "recipe row 1: mode: only disagg can be stated"),
    ({"d_workers": ""}, "recipe row 1: d_workers: missing"),
    ({"d_workers": "3"}, "recipe row 1: .*no measured row has them as an aggregated row of the deployment's GPUs"),
])
def test_a_recipe_reading_an_aggregated_row_states_a_whole_deployment_of_its_gpus(cells, message):
    from api.commands.calibrate import with_recipes

    rows = [_aggregated_spelling(36)]
    with pytest.raises(ValueError, match=message):
        with_recipes(rows, [{**_recipe(rows[0], **DEPLOYED), **cells}])


def test_calibrate_records_the_recipes_and_refuses_a_bad_file(subset, tmp_path, capsys):
    import csv

    row = next(r for r in _rows(subset) if r["mode"] == "disagg")
    recipes = tmp_path / "recipes.csv"
    with recipes.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(_recipe(row, max_batch="4")), lineterminator="\n")
        writer.writeheader()
        writer.writerow(_recipe(row, max_batch="4"))
    out = tmp_path / "p.json"
    assert main(["calibrate", "--data", str(subset), "--recipes", str(recipes), "--out", str(out),
                 "--max-evals", "3"]) == 0
    prov = _strict_json(out)["provenance"]
    assert prov["recipes"] == {"recipes": "recipes.csv", "sha256": hashlib.sha256(recipes.read_bytes()).hexdigest()}
    assert prov["command"].endswith("--recipes recipes.csv --max-evals 3")
    capsys.readouterr()
    recipes.write_text(recipes.read_text().replace(",4\n", ",none\n"))
    assert main(["calibrate", "--data", str(subset), "--recipes", str(recipes), "--out", str(out),
                 "--max-evals", "3"]) == 1
    assert "error: --recipes: recipe row 1: max_batch: must be an integer ≥ 1, got 'none'" in capsys.readouterr().err
    assert main(["calibrate", "--data", str(subset), "--recipes", str(tmp_path / "absent.csv"), "--out", str(out),
                 "--max-evals", "3"]) == 1
    assert "error: --recipes: cannot read" in capsys.readouterr().err


def test_cross_validation_runs_only_the_schemes_asked_for(subset):
    """``schemes=()`` leaves out the family and GPU folds: only the groups of ``held_out`` are fitted,
    and their predictions are those of the full run (each fold's fit is its own)."""
    import numpy as np

    from api.commands.calibrate import read_rows, run_cross_validation
    from profiler.model.calibrate import prepare_rows
    from profiler.model.params import default_params

    data = prepare_rows(read_rows(subset))
    disagg = data.labels["mode"] == "disagg"
    only = run_cross_validation(data, default_params(), workers=1, max_evals=3, held_out={"disagg": disagg},
                                schemes=())
    assert set(only) == {"disagg", "disagg/engine"}
    every = run_cross_validation(data, default_params(), workers=1, max_evals=3, held_out={"disagg": disagg},
                                 schemes=("gpu",))
    assert set(every) == {"gpu", "gpu/engine", "disagg", "disagg/engine"}
    np.testing.assert_array_equal(only["disagg"], every["disagg"])
