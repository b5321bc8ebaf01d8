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
