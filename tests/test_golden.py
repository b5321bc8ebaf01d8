"""Predictions and manifests are what ``tests/golden.json`` recorded: a restructuring moves code,
never an answer.

Compared exactly: every target's manifest text; compared to the last few digits a float holds
(relative 1e-9, since BLAS builds and CPUs round differently): every example request's plan and
the model's outputs on a seeded sample of the calibration rows (skipped when ``../shared/data`` is
not beside the checkout). A change meant to move them re-records the file, in one command, and the diff of
``tests/golden.json`` shows what moved:

    .venv/bin/python tests/golden.py
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from golden import CALIBRATION_CSV, GOLDEN, calibration_rows, example_answers, row_estimates

RECORDED = json.loads(GOLDEN.read_text(encoding="utf-8"))
HINT = "predictions or manifests moved; if meant, re-record with: .venv/bin/python tests/golden.py"
REL_TOL = 1e-9  # a float's last digits differ between BLAS builds and CPUs; a change of the model moves more


def moved(now: Any, recorded: Any, path: str = "") -> str | None:
    """Where ``now`` differs from ``recorded`` (a path such as ``.chosen.ttftMs``), or None when
    they are the same: floats within ``REL_TOL`` of each other, everything else equal."""
    if isinstance(now, dict) and isinstance(recorded, dict):
        if set(now) != set(recorded):
            return f"{path} keys {sorted(set(now) ^ set(recorded))}"
        return next((m for k in now if (m := moved(now[k], recorded[k], f"{path}.{k}"))), None)
    if isinstance(now, list) and isinstance(recorded, list):
        if len(now) != len(recorded):
            return f"{path} length {len(now)} != {len(recorded)}"
        return next((m for i, (a, b) in enumerate(zip(now, recorded)) if (m := moved(a, b, f"{path}[{i}]"))), None)
    if isinstance(now, float) and isinstance(recorded, (int, float)) and not isinstance(recorded, bool):
        return None if math.isclose(now, recorded, rel_tol=REL_TOL, abs_tol=1e-12) else f"{path}: {now!r} != {recorded!r}"
    return None if now == recorded else f"{path}: {now!r} != {recorded!r}"


@pytest.fixture(scope="module")
def answers() -> dict:
    return example_answers()


def test_every_example_is_recorded_and_feasible(answers: dict):
    assert set(answers) == set(RECORDED["examples"])
    assert all(answer["plan"]["chosen"] is not None for answer in answers.values())


@pytest.mark.parametrize("name", sorted(RECORDED["examples"]))
def test_example_plan_and_manifests_are_unchanged(answers: dict, name: str):
    now = answers[name]
    recorded = RECORDED["examples"][name]
    where = moved(now["plan"], recorded["plan"])
    assert where is None, f"plan{where}; {HINT}"
    for target, text in recorded["manifests"].items():
        assert now["manifests"].get(target) == text, f"{target}: {HINT}"
    assert set(now["manifests"]) == set(recorded["manifests"]), HINT


def test_calibration_sample_estimates_are_unchanged():
    if not CALIBRATION_CSV.exists():
        pytest.skip(f"{CALIBRATION_CSV.name} is not beside the checkout")
    recorded = RECORDED["calibration"]["rows"]
    now = row_estimates(calibration_rows())
    assert [r["row"] for r in now] == [r["row"] for r in recorded], "the sample drew other rows"
    changed = [(i, r["row"], where) for i, (r, old) in enumerate(zip(now, recorded)) if (where := moved(r, old))]
    assert not changed, f"{len(changed)} of {len(now)} rows moved, first {changed[:3]}; {HINT}"


def test_a_move_beyond_rounding_is_caught_and_named():
    """The comparison forgives a float's last digits only: a model change of one part in a
    million, a changed string or a missing key is reported with where it is."""
    recorded = {"chosen": {"ttftMs": 283.1234567, "gpu": "h200_sxm"}, "points": [1.0, 2.0]}
    assert moved({"chosen": {"ttftMs": 283.1234567 * (1 + 1e-13), "gpu": "h200_sxm"}, "points": [1.0, 2.0]},
                 recorded) is None
    assert moved({"chosen": {"ttftMs": 283.1234567 * (1 + 1e-6), "gpu": "h200_sxm"}, "points": [1.0, 2.0]},
                 recorded).startswith(".chosen.ttftMs")
    assert moved({"chosen": {"ttftMs": 283.1234567, "gpu": "b200"}, "points": [1.0, 2.0]}, recorded).startswith(
        ".chosen.gpu")
    assert moved({"chosen": {"ttftMs": 283.1234567}, "points": [1.0, 2.0]}, recorded) == ".chosen keys ['gpu']"
    assert moved({**recorded, "points": [1.0, 2.5]}, recorded).startswith(".points[1]")
