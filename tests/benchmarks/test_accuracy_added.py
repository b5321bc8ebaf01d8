"""The accuracy benchmark's table of the rows of ``--also``: split by GPU type, mode and precision."""

import re
from types import SimpleNamespace

import numpy as np
from benchmark_scripts import load


def _table(precision: list[str], median: list[bool] | None = None) -> dict[str, str]:
    """Each row label of the table of four rows of one GPU type (two aggregated, two disaggregated;
    the first of each pair's TTFT predicted 10% high, the second 50%; ``median``: which rows' TTFT is
    a median, None: all means) -> its TTFT MdAPE."""
    measured = np.full(4, 100.0)
    labels = {"gpu": np.array(["mi355x"] * 4), "mode": np.array(["agg", "agg", "disagg", "disagg"])}
    data = SimpleNamespace(labels=labels, repeats=np.zeros(4, dtype=bool), ttft_ms=measured, tpot_ms=measured,
                           median=None if median is None else np.array(median))
    preds = {"gpu": np.stack([np.array([110.0, 150.0, 110.0, 150.0]), measured])}
    lines = load("accuracy").added_table(data, preds, np.ones(4, dtype=bool), np.array(precision)).splitlines()
    return {fields[1]: fields[3] for fields in (re.split(r"\s{2,}", line) for line in lines if line.startswith("gpu "))}


def test_one_precision_is_not_split():
    assert list(_table(["fp8"] * 4)) == ["all", "mi355x", "mi355x agg", "mi355x disagg"]


def test_two_precisions_are_split_alone_and_by_mode():
    table = _table(["fp4", "fp8", "fp4", "fp8"])
    assert list(table) == ["all", "mi355x", "mi355x agg", "mi355x disagg", "mi355x fp4", "mi355x fp4 agg",
                           "mi355x fp4 disagg", "mi355x fp8", "mi355x fp8 agg", "mi355x fp8 disagg"]
    assert table["mi355x fp4"] == table["mi355x fp4 disagg"] == "10.0%"
    assert table["mi355x fp8"] == table["mi355x fp8 agg"] == "50.0%"


def test_rows_reporting_mean_and_median_ttfts_are_split_by_statistic():
    table = _table(["fp8"] * 4, median=[False, True, False, True])
    assert list(table) == ["all", "mi355x", "all TTFT means", "all TTFT medians", "mi355x TTFT means",
                           "mi355x TTFT medians", "mi355x agg", "mi355x disagg"]
    assert table["mi355x TTFT means"] == "10.0%" and table["mi355x TTFT medians"] == "50.0%"
    assert "mi355x TTFT means" not in _table(["fp8"] * 4, median=[False] * 4)


def test_a_group_the_scheme_does_not_predict_is_left_out():
    """A scheme that holds some rows out predicts NaN for the others: their groups get no line."""
    measured = np.full(4, 100.0)
    labels = {"gpu": np.array(["mi300x", "mi300x", "mi355x", "mi355x"]), "mode": np.array(["agg"] * 4)}
    data = SimpleNamespace(labels=labels, repeats=np.zeros(4, dtype=bool), ttft_ms=measured, tpot_ms=measured,
                           median=None)
    preds = {"cdna3": np.stack([np.array([110.0, 110.0, np.nan, np.nan])] * 2)}
    lines = load("accuracy").added_table(data, preds, np.ones(4, dtype=bool), np.array(["fp8"] * 4)).splitlines()
    labels_shown = [re.split(r"\s{2,}", line)[1] for line in lines if line.startswith("cdna3 ")]
    assert labels_shown == ["all", "mi300x"]
    assert "nan" not in "\n".join(lines)
