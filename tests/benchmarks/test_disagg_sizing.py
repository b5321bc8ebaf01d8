"""The fit behind the sizing of disaggregated deployments whose worker counts are not recorded."""

import pytest
from benchmark_scripts import load

sizing = load("disagg_sizing")


def test_power_fit_recovers_a_power_law_and_how_closely_it_holds():
    clients = [1, 4, 16, 64, 256, 1024]
    fit = sizing.power_fit(clients, [round(3.0 * c**0.25) for c in clients])
    assert fit.rows == 6 and fit.power == pytest.approx(0.25, abs=0.03) and fit.scale == pytest.approx(3.0, rel=0.15)
    assert 1.0 <= fit.factor < 1.1  # rounding to whole GPUs only
    spread = sizing.power_fit(clients, [8, 2, 8, 2, 8, 2])  # no trend, a factor of 2 either way
    assert abs(spread.power) < 0.1 and 1.7 < spread.factor < 2.0
    with pytest.raises(ValueError):
        sizing.power_fit([8, 8], [4, 8])


def test_only_disaggregated_rows_with_both_worker_counts_are_read():
    base = dict(model="deepseek-ai/DeepSeek-R1", gpu="b200_sxm", backend="sglang", precision="fp4", isl="8192",
                osl="1024", concurrency="64", mode="disagg", p_tp="4", d_tp="8")
    rows = [dict(base, p_workers="2", d_workers="3"), dict(base, p_workers="2"), dict(base, mode="agg", tp="8"),
            dict(base, p_workers="0", d_workers="3")]  # unreadable: skipped
    (only,) = sizing.recorded_deployments(rows)
    assert only == sizing.Deployment(clients=64.0, long=True, prefill_gpus=8, decode_gpus=24)


def test_the_model_sizes_unrecorded_deployments_with_the_fit_to_the_data_beside_the_checkout():
    from paths import SHARED

    from api.commands.calibrate import read_rows
    from profiler.model.dataset import UNRECORDED_GPUS

    data = SHARED / "data" / "measured_serving_calibration.csv"
    if not data.exists():
        pytest.skip(f"{data.name} is not beside the checkout")
    deployments = [d for d in sizing.recorded_deployments(read_rows(data)) if d.clients > 0]
    for long, roles in UNRECORDED_GPUS.items():
        picked = [d for d in deployments if d.long == long]
        for role, used in zip(("prefill_gpus", "decode_gpus"), roles):
            fit = sizing.power_fit([d.clients for d in picked], [getattr(d, role) for d in picked])
            assert (round(fit.scale, 2), round(fit.power, 3)) == (used.scale, used.power), (long, role)
