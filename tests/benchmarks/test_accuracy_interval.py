"""The accuracy benchmark's sweep-resampled interval around a median error."""

import numpy as np
from benchmark_scripts import load


def _accuracy():
    return load("accuracy")


def test_sweeps_alike_give_no_spread():
    """Every sweep holding the same errors: any resample has the same median."""
    errors = np.tile([10.0, 20.0, 30.0], 5)
    sweeps = np.repeat(np.arange(5), 3)
    low, high = _accuracy().sweep_interval(errors, sweeps, draws=200)
    assert low == high == 20.0


def test_interval_holds_the_median_and_widens_with_sweep_differences():
    """Sweeps that differ from each other move the median more than sweeps that agree."""
    rng = np.random.default_rng(7)
    sweeps = np.repeat(np.arange(20), 30)
    noise = rng.lognormal(3.0, 0.5, size=sweeps.size)
    alike = noise
    apart = noise * np.exp(rng.normal(0.0, 0.8, size=20))[sweeps]  # one factor per sweep
    interval = _accuracy().sweep_interval
    for errors in (alike, apart):
        low, high = interval(errors, sweeps, draws=400)
        assert low <= np.median(errors) <= high
    width = lambda e: np.subtract(*interval(e, sweeps, draws=400)[::-1])  # noqa: E731
    assert width(apart) > 2 * width(alike)


def test_interval_is_seeded():
    errors = np.arange(40, dtype=float)
    sweeps = np.repeat(np.arange(8), 5)
    interval = _accuracy().sweep_interval
    assert interval(errors, sweeps, draws=100) == interval(errors, sweeps, draws=100)
    assert interval(errors, sweeps, seed=1, draws=100) != interval(errors, sweeps, seed=2, draws=100)


def test_rows_short_counts_what_the_median_needs():
    """Five errors, two within 30%: one more within and the median (the third) is."""
    short = _accuracy().rows_short
    assert short([10.0, 20.0, 40.0, 50.0, 60.0], 30.0) == (2, 1)
    assert short([10.0, 20.0, 25.0, 50.0, 60.0], 30.0) == (3, 0)
    # Even count: the two middle errors must both be within, so half plus one.
    assert short([10.0, 20.0, 40.0, 50.0], 30.0) == (2, 1)
    assert short([10.0, 20.0, 30.0, 50.0], 30.0) == (3, 0)


def test_measured_twice_pairs_rows_with_the_same_inputs():
    """Rows equal in every input pair up (however their numbers are spelled); a differing input,
    or an extra column such as the source, decides nothing else."""
    base = dict(model="m", gpu="h100_sxm", backend="vllm", isl="1024", osl="128", concurrency="8", tp="2")
    rows = [dict(base, backend_version="0.9", source="a"),
            dict(base, tp="2.0", backend_version="0.9", source="b"),  # same inputs, spelled otherwise
            dict(base, backend_version="0.10"),
            dict(base, concurrency="16", backend_version="0.9")]  # another configuration
    positions = np.array([0, 1, 2, 3])
    ttft = np.array([100.0, 150.0, 50.0, 999.0])
    tpot = np.array([10.0, 10.0, 12.0, 1.0])
    pairs = _accuracy().measured_twice(rows, positions, ttft, tpot)
    expected = [(0.5, 0.0, True), (1.0, 0.2, False), (2.0, 0.2, False)]
    assert [same for *_, same in sorted(pairs)] == [same for *_, same in expected]
    assert np.allclose([apart for *apart, _ in sorted(pairs)], [apart for *apart, _ in expected])
