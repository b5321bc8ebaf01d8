"""`slaplan plan` says which stored calibration each plan used (or that none, and why) in its
output and plan.json, and the database it reads does not depend on the working directory:
``--db``, else SLAPLAN_DATABASE_URL, else the per-user file under XDG_DATA_HOME."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api.cli import main
from profiler.model.measured import calibration_key
from tests.api.test_calibrate_measured import DGDR, GPU, MODEL, store_synthetic

CALIBRATED = "calibrated on 1 measured point(s) of a test"


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    """An empty working directory holding the request, with a data directory of its own."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    (tmp_path / "small.yaml").write_text(DGDR)
    return tmp_path


def _plan(capsys, *options: str) -> tuple[str, dict]:
    """(stdout, plan.json) of ``slaplan plan small.yaml --out out OPTIONS``, which must succeed."""
    assert main(["plan", "small.yaml", "--out", "out", *options]) == 0
    return capsys.readouterr().out, json.loads(Path("out/small.plan.json").read_text())


def test_no_database_is_said_and_none_is_created(workdir, capsys):
    user_db = workdir / "data" / "slaplan" / "slaplan.db"
    out, doc = _plan(capsys)
    assert f"  calibration: none, the shipped parameters (no database at {user_db})\n" in out
    assert out.rstrip().endswith(f"no stored calibration used (no database at {user_db})")
    assert doc["calibration"] == {"database": str(user_db), "database_exists": False, "used": None}
    assert not (workdir / "data").exists()


def test_a_database_in_the_working_directory_is_read_only_when_named(workdir, capsys):
    store_synthetic(workdir / "slaplan.db")
    _, shipped = _plan(capsys)
    assert shipped["calibration"]["used"] is None  # the working directory's file is not the default
    out, calibrated = _plan(capsys, "--db", "slaplan.db")
    assert f"  calibration: {CALIBRATED}" in out and f"from {workdir / 'slaplan.db'}" in out
    used = calibrated["calibration"]["used"]
    assert (used["model"], used["gpu"], used["backend"]) == calibration_key(MODEL, GPU, "vllm")
    assert (used["points"], used["source"]) == (1, "a test") and used["summary"].startswith(CALIBRATED)
    assert calibrated["calibration"]["database"] == str(workdir / "slaplan.db")
    assert calibrated["predicted"] != shipped["predicted"]  # the calibration changed the answer, and says so
    assert out.rstrip().endswith(f"1 planned with a stored calibration from {workdir / 'slaplan.db'}")


def test_the_per_user_file_is_the_default_and_the_variable_and_db_override_it(workdir, capsys, monkeypatch):
    user_db = workdir / "data" / "slaplan" / "slaplan.db"
    user_db.parent.mkdir(parents=True)
    store_synthetic(user_db)
    assert _plan(capsys)[1]["calibration"]["used"]["summary"].startswith(CALIBRATED)
    monkeypatch.setenv("SLAPLAN_DATABASE_URL", f"sqlite:///{workdir / 'other.db'}")
    assert _plan(capsys)[1]["calibration"] == {"database": str(workdir / "other.db"), "database_exists": False,
                                               "used": None}
    assert _plan(capsys, "--db", str(user_db))[1]["calibration"]["database"] == str(user_db)


def test_quiet_still_says_whether_a_calibration_was_used(workdir, capsys):
    store_synthetic(workdir / "s.db")
    out, _ = _plan(capsys, "--quiet", "--db", "s.db")
    assert out == f"1 planned, 1 feasible, 0 infeasible; written to out/; 1 planned with a stored calibration from " \
                  f"{workdir / 's.db'}\n"


@pytest.mark.parametrize("value,says", [
    ("", "must name a SQLite file or a database URL"),
    ("mysql://user@host/db", "unsupported database driver 'mysql'"),
])
def test_a_db_option_slaplan_cannot_use_is_a_usage_error(workdir, capsys, value, says):
    with pytest.raises(SystemExit) as info:
        main(["plan", "small.yaml", "--out", "out", "--db", value])
    assert info.value.code == 1  # plan's usage errors: 1 (2 means infeasible)
    assert f"argument --db: {says}" in capsys.readouterr().err
    assert not (workdir / "out").exists()


@pytest.mark.parametrize("value,says", [
    ("slaplan.db", "not a database URL"),
    ("mysql://user@host/db", "unsupported database driver 'mysql'"),
])
def test_a_database_variable_slaplan_cannot_use_is_named_and_nothing_is_written(workdir, capsys, monkeypatch, value,
                                                                                 says):
    """Found before the settings are built (no database, no settings: ``plan`` starts faster), the
    variable's error reads as the settings' own."""
    monkeypatch.setenv("SLAPLAN_DATABASE_URL", value)
    assert main(["plan", "small.yaml", "--out", "out"]) == 2
    assert f"slaplan: invalid setting: SLAPLAN_DATABASE_URL: {says}" in capsys.readouterr().err
    assert not list((workdir / "out").iterdir())
