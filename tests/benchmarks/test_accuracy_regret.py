"""The accuracy benchmark's selection regret: pick by prediction, score by measurement."""

import math

import numpy as np
import pytest
from benchmark_scripts import load


def _accuracy():
    return load("accuracy")


def _rows(ttft_ms, tpot_ms, tok_s):
    """(3, configurations): TTFT ms, TPOT ms, output tokens/s per GPU."""
    return np.array([ttft_ms, tpot_ms, tok_s], dtype=float)


def test_pick_is_the_fastest_predicted_within_the_sla_and_scored_by_measurement():
    """All three predicted within 100 ms TTFT, 10 ms TPOT; the model ranks the third fastest, but
    measured the second is: regret 1 − 250/300."""
    predicted = _rows([50, 60, 70], [5, 5, 5], [100, 200, 300])
    measured = _rows([55, 65, 75], [6, 6, 6], [100, 300, 250])
    pick = _accuracy().pick_within_sla(predicted, measured, 100.0, 10.0)
    assert (pick.index, pick.best, pick.missed) == (2, False, False)
    assert pick.regret == pytest.approx(1 - 250 / 300)


def test_pick_measured_over_the_sla_is_a_miss_without_a_regret():
    """The third is predicted within 60 ms TTFT but measured at 75 ms: a miss, even though its
    measured throughput beats every configuration within the SLA."""
    predicted = _rows([50, 60, 55], [5, 5, 5], [100, 200, 300])
    measured = _rows([55, 58, 75], [6, 6, 6], [100, 200, 400])
    pick = _accuracy().pick_within_sla(predicted, measured, 60.0, 10.0)
    assert (pick.index, pick.best, pick.missed) == (2, False, True)
    assert math.isnan(pick.regret)


def test_no_pick_when_nothing_is_predicted_within_and_nothing_to_score_when_nothing_is_measured_within():
    predicted = _rows([80, 90], [5, 5], [100, 200])
    measured = _rows([50, 90], [5, 5], [100, 200])
    pick_within_sla = _accuracy().pick_within_sla
    pick = pick_within_sla(predicted, measured, 60.0, 10.0)
    assert pick.index is None and not pick.missed and not pick.best and math.isnan(pick.regret)
    assert pick_within_sla(predicted, measured, 40.0, 10.0) is None


def test_selection_regret_sums_up_regrets_and_misses_over_workloads():
    """SLAs at the median: workload a picks its slower configuration within (regret 1 − 50/150),
    workload d picks one measured over the SLA; workload b has too few configurations, and one
    configuration of c is not predicted, leaving it too few as well."""
    labels = ["a"] * 3 + ["d"] * 3 + ["b"] * 2 + ["c"] * 3
    configurations = ["1", "2", "3"] * 2 + ["1", "2"] + ["1", "2", "3"]
    measured = _rows([10, 20, 30, 10, 20, 30, 1, 2, 1, 2, 3], [1] * 11, [50, 150, 300, 10, 20, 30, 1, 2, 1, 2, 3])
    predicted = measured.copy()
    predicted[2, :3] = [50, 40, 400]  # a: the third is fastest but predicted at 30 ms, over the 20 ms SLA
    predicted[0, 5] = 15.0  # d: the third predicted within 20 ms, measured at 30
    predicted[0, 10] = math.nan  # c: its third configuration unpredicted
    regret = _accuracy().selection_regret(np.array(labels), np.array(configurations), predicted, measured,
                                          quantiles=(0.5,))
    assert (regret.workloads, regret.slas, regret.best, regret.missed, regret.no_pick) == (2, 2, 0, 1, 0)
    assert regret.mean_regret_pct == pytest.approx(100 * (1 - 50 / 150))


def test_repeated_configuration_counts_once_with_its_mean_measurement():
    """Configuration 3 measured twice (100 and 300 tokens/s, mean 200) is one candidate: the best,
    and picked; scored row by row its first measurement would lose to configuration 2."""
    labels = np.array(["a"] * 4)
    configurations = np.array(["1", "2", "3", "3"])
    measured = _rows([10, 20, 30, 30], [1, 1, 1, 1], [50, 150, 100, 300])
    predicted = _rows([10, 20, 30, 30], [1, 1, 1, 1], [50, 150, 400, 400])
    selection_regret = _accuracy().selection_regret
    regret = selection_regret(labels, configurations, predicted, measured, quantiles=(1.0,))
    assert (regret.workloads, regret.slas, regret.best, regret.missed, regret.no_pick) == (1, 1, 1, 0, 0)
    assert regret.mean_regret_pct == 0.0
    assert selection_regret(labels, configurations, predicted, measured, quantiles=(1.0,), least=4).workloads == 0
