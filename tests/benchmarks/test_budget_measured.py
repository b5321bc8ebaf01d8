"""The measured judge of budget plans: the most clients an engine's measurements show within the
SLA, a plan's verdict, and AIConfigurator's listed configurations read back."""

import math

from benchmark_scripts import load

# One engine measured at 4, 8, 16 and 32 clients: TTFT and TPOT grow with the load.
CURVE = dict(clients=(4.0, 8.0, 16.0, 32.0), ttft_ms=(100.0, 120.0, 200.0, 400.0), tpot_ms=(10.0, 11.0, 13.0, 20.0),
             tok_s=(400.0, 700.0, 1200.0, 1600.0))


def test_capacity_interpolates_the_first_crossing_in_log_log():
    bench = load("budget_measured")
    curve = bench.Curve(**CURVE)
    cap = bench.capacity(curve, ttft_ms=160.0, tpot_ms=30.0)  # TTFT first over at 16 clients
    expected = math.exp(math.log(8) + (math.log(160) - math.log(120)) / (math.log(200) - math.log(120)) * math.log(2))
    assert cap.clients == math.floor(expected) and 8 < cap.clients < 16 and not cap.at_least
    assert 700.0 < cap.tok_s < 1200.0
    tighter = bench.capacity(curve, ttft_ms=160.0, tpot_ms=11.5)  # TPOT binds first, between 8 and 16 too
    assert 8 <= tighter.clients < cap.clients
    assert (cap.bound_by, tighter.bound_by) == ("TTFT", "TPOT")


def test_capacity_is_a_lower_bound_or_not_judged_outside_the_measured_range():
    bench = load("budget_measured")
    curve = bench.Curve(**CURVE)
    loose = bench.capacity(curve, ttft_ms=1000.0, tpot_ms=100.0)
    assert (loose.clients, loose.tok_s, loose.at_least) == (32, 1600.0, True)
    assert bench.capacity(curve, ttft_ms=50.0, tpot_ms=100.0) is None  # over at 4 clients: fewer never measured
    from_one = bench.Curve(**{**CURVE, "clients": (1.0, 8.0, 16.0, 32.0)})
    assert bench.capacity(from_one, ttft_ms=50.0, tpot_ms=100.0).clients == 0


def test_judge_sums_engines_and_flags_a_planned_load_over_the_sla():
    bench = load("budget_measured")
    measured = {(4, 1): bench.Curve(**CURVE)}
    sla = (160.0, 30.0)
    cap = bench.capacity(measured[(4, 1)], *sla)
    within = bench.judge(bench.Engines("2×tp4", (((4, 1), 2, cap.clients - 1.0),)), measured, sla, osl=1000)
    assert within.tok_s == 2 * cap.tok_s and within.req_s == within.tok_s / 1000 and within.missed is False
    assert within.capacity_over_planned > 1
    over = bench.judge(bench.Engines("2×tp4", (((4, 1), 2, cap.clients + 3.0),)), measured, sla, osl=1000)
    assert over.missed is True and over.capacity_over_planned < 1 and over.bound_by == {"TTFT"}
    beyond = bench.judge(bench.Engines("1×tp4", (((4, 1), 1, 64.0),)), measured, (1000.0, 100.0), osl=1000)
    assert beyond.missed is None and beyond.at_least  # planned past the most clients measured, all within
    assert bench.judge(bench.Engines("1×tp8", (((8, 1), 1, 4.0),)), measured, sla, osl=1000) is None


def test_compare_leaves_open_what_a_lower_bound_cannot_decide():
    bench = load("budget_measured")
    engines = bench.Engines("x", ())

    def j(tok_s, at_least=False):
        return bench.Judged(engines, tok_s, tok_s / 100, at_least, False, 1.0)

    assert bench.compare(j(200), j(100)) == "more" and bench.compare(j(100), j(200)) == "less"
    assert bench.compare(j(200, True), j(100)) == "more"
    assert bench.compare(j(200), j(100, True)) is None
    assert bench.compare(j(100, True), j(100, True)) == "same"


AIC_TABLE = """agg Top Configurations: (Ranked by tokens/s/gpu)
+------+---------+--------------+----------+----------+-----+
| Rank | backend | tokens/s/gpu | replicas | parallel |  bs |
+------+---------+--------------+----------+----------+-----+
|  1   |   vllm  |    932.61    |    1     |  tp8pp1  | 224 |
|  2   |   vllm  |    929.37    |    2     |  tp4pp1  | 112 |
+------+---------+--------------+----------+----------+-----+
disagg Top Configurations: (Ranked by tokens/s/gpu)
+------+---------+
| Rank | backend |
+------+---------+
|  1   |   vllm  |
+------+---------+
"""


def test_aiconfigurator_rows_are_read_per_table():
    rows = load("budget_use").table_rows(AIC_TABLE, "agg")
    assert [(r["parallel"], r["replicas"], r["bs"]) for r in rows] == [("tp8pp1", "1", "224"), ("tp4pp1", "2", "112")]
    assert load("budget_measured")._parallel("tp4pp2") == (4, 2)


def test_best_measured_fills_the_budget_with_the_shape_serving_most():
    bench = load("budget_measured")
    slow = bench.Curve(**{**CURVE, "tok_s": tuple(t / 4 for t in CURVE["tok_s"])})
    measured = {(4, 1): bench.Curve(**CURVE), (8, 1): slow, (16, 1): bench.Curve(**CURVE)}  # tp16: over the budget
    best = bench.best_measured(measured, (160.0, 30.0), osl=1000)
    cap = bench.capacity(measured[(4, 1)], 160.0, 30.0)
    assert best.engines.label == f"{bench.BUDGET // 4}×tp4" and best.tok_s == bench.BUDGET // 4 * cap.tok_s
    assert bench.best_measured(measured, (50.0, 30.0), osl=1000) is None  # over at the fewest clients measured


def test_a_workloads_harness_term_is_the_one_fitted_for_its_rows_backend():
    bench = load("budget_measured")
    w = bench.WORKLOADS[0]
    row = {"mode": "agg", "model": w.model, "gpu": w.gpu, "backend": w.backend, "precision": w.precision,
           "isl": str(w.isl), "osl": str(w.osl), "provenance": "some_bench | run 1"}
    other = {**row, "gpu": "a100_sxm"}  # another workload's row: not counted
    params = {f"harness_ttft_ms_{w.backend}": 30.0}
    assert bench.harness_ttft_ms([row, other], w, params) == 30.0
    assert bench.harness_ttft_ms([row], w, {f"harness_ttft_ms_{w.backend}": 60.0}) == 60.0


def test_a_sources_term_is_read_off_its_other_workloads_only():
    import numpy as np
    import pytest
    from types import SimpleNamespace

    bench = load("budget_measured")
    w = bench.WORKLOADS[0]
    judged = {"mode": "agg", "model": w.model, "gpu": w.gpu, "backend": w.backend, "precision": w.precision,
              "isl": str(w.isl), "osl": str(w.osl), "provenance": "bench_a | run 1"}
    longer = {**judged, "isl": "8192"}  # the same model at another ISL: another workload of the source
    other_family = {**judged, "model": "org/Other-7B"}
    elsewhere = {**judged, "provenance": "bench_b"}  # another source: never read
    rows = [judged, longer, other_family, elsewhere]
    measured = np.array([500.0, 130.0, 150.0, 90.0])  # TTFT, ms; the engine predicts 100 ms for each
    data = SimpleNamespace(index=np.arange(4), harness=np.array(["bench_a", "bench_a", "bench_a", "bench_b"]),
                           labels={"backend": np.full(4, w.backend),
                                   "family": np.array([w.model, w.model, "org/Other-7B", w.model])},
                           repeats=np.zeros(4, dtype=bool), ttft_ms=measured)
    engine = np.full(4, 100.0)
    term = bench.source_term(data, engine, rows, w)
    assert (term.source, term.rows, term.workloads) == ("bench_a", 2, 2) and term.ms == 40.0  # median of 30, 50
    held = bench.source_term(data, engine, rows, w, without_family=w.model)
    assert (held.rows, held.ms) == (1, 50.0)
    with pytest.raises(ValueError, match="bench_a"):
        bench.source_term(SimpleNamespace(**{**vars(data), "ttft_ms": np.array([500.0, np.nan, np.nan, 90.0])}),
                          engine, rows, w)
