"""Stored calibrations: what the fit kept (sides, held-out errors, harness time) is stored and shown,
and a calibration stored before those were recorded still reads."""

from __future__ import annotations

from infra import migrate
from infra.calibrations import get_calibration, save_calibration
from infra.db import make_engine, make_session_factory, session_scope
from infra.settings import load_settings
from infra.tables import CalibrationRow
from profiler.model.config import Parallel, ServingConfig
from profiler.model.estimate import estimate
from profiler.model.measured import Point, calibration_key, fit_deployment

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
DEPLOYMENT = ServingConfig(model=MODEL, gpu="a100_sxm", engine=Parallel(tp=1), isl_tokens=200, osl_tokens=40)


def _points() -> list[Point]:
    out = []
    for c in (1, 4, 16):
        e = estimate(DEPLOYMENT.model_copy(update={"concurrency": c}))
        out.append(Point(isl_tokens=200, osl_tokens=40, concurrency=c, ttft_ms=1.3 * e.ttft_ms + 2.5,
                         tpot_ms=1.3 * e.itl_ms))
    return out


def test_sides_held_out_errors_and_harness_time_are_stored_and_older_rows_still_read(tmp_path):
    settings = load_settings({}, database_url=f"sqlite:///{tmp_path / 's.db'}")
    migrate.upgrade(settings)
    engine = make_engine(settings)
    key = calibration_key(MODEL, "a100_sxm", "vllm")
    try:
        sessions = make_session_factory(engine)
        fit = fit_deployment(DEPLOYMENT, _points(), harness_ms=2.5)
        with session_scope(sessions) as s:
            save_calibration(s, key, fit, deployment={}, source="a test")
        with session_scope(sessions) as s:
            cal = get_calibration(s, key)
        assert cal.fit == fit and cal.fit.harness_ms == 2.5 and set(cal.fit.sides) == {"prefill", "decode"}
        assert cal.fit.held_out and "held out: TTFT" in cal.summary() and "TPOT" in cal.summary().split("held out")[1]
        # a row written before the fit recorded its sides, held-out errors and harness time
        with session_scope(sessions) as s:
            row = s.query(CalibrationRow).one()
            row.fit = {k: v for k, v in row.fit.items() if k not in ("sides", "held_out", "harness_ms", "uncertainty")}
        with session_scope(sessions) as s:
            old = get_calibration(s, key)
        assert (old.fit.sides, old.fit.held_out, old.fit.harness_ms) == ({}, {}, 0.0)
        assert "times ×" in old.summary() and "held out" not in old.summary()
        assert old.params == cal.params  # the parameters are untouched
    finally:
        engine.dispose()
