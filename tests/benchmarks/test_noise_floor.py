"""The noise floor of benchmarks/accuracy.py: rows with identical inputs measured apart."""

import math

import numpy as np
from benchmark_scripts import load

noise = load("noise_floor")


def test_a_groups_median_is_the_oracle_and_singletons_do_not_count():
    keys = ["a", "a", "a", "b", "c", "c"]
    measured = np.array([100.0, 120.0, 150.0, 999.0, 10.0, 10.0])
    predicted = np.array([100.0, 100.0, 100.0, 1.0, 20.0, 20.0])
    f = noise.floor(keys, measured, predicted)
    assert (f.rows, f.groups) == (5, 2)
    # group a's median is 120: off by 20%, 0%, 20%; group c's by 0% twice
    assert math.isclose(f.oracle_pct, np.median([20.0, 0.0, 20.0, 0.0, 0.0]))
    assert math.isclose(f.model_pct, np.median([0.0, 100 * 20 / 120, 100 * 50 / 150, 100.0, 100.0]))


def test_the_implied_floor_recovers_the_noise_of_log_normal_repeats():
    rng = np.random.default_rng(3)
    sd = 0.2
    truth = np.exp(rng.normal(5.0, 1.0, 4000))
    measured = np.repeat(truth, 2) * np.exp(rng.normal(0.0, sd, 8000))
    keys = list(np.repeat(np.arange(4000), 2))
    f = noise.floor(keys, measured, np.repeat(truth, 2))
    exact_model = 100 * np.median(np.abs(np.repeat(truth, 2) - measured) / measured)
    assert abs(f.implied_pct - exact_model) < 1.0  # the model that knows every expected value
    assert abs(f.model_pct - exact_model) < 1e-9


def test_no_repeated_inputs_prints_nothing():
    assert noise.floor_lines(["a", "b"], {"TTFT": np.ones(2)}, {"TTFT": np.ones(2)}) == []
