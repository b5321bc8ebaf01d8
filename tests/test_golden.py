"""Predictions and manifests are what ``tests/golden.json`` recorded: a restructuring moves code,
never an answer.

Compared exactly: every example request's plan and every target's manifest text, and the model's
outputs on a seeded sample of the calibration rows (skipped when ``../shared/data`` is not beside
the checkout). A change meant to move them re-records the file, in one command, and the diff of
``tests/golden.json`` shows what moved:

    .venv/bin/python tests/golden.py
"""

from __future__ import annotations

import json

import pytest

from golden import CALIBRATION_CSV, GOLDEN, calibration_rows, example_answers, row_estimates

RECORDED = json.loads(GOLDEN.read_text(encoding="utf-8"))
HINT = "predictions or manifests moved; if meant, re-record with: .venv/bin/python tests/golden.py"


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
    assert now["plan"] == recorded["plan"], HINT
    for target, text in recorded["manifests"].items():
        assert now["manifests"].get(target) == text, f"{target}: {HINT}"
    assert set(now["manifests"]) == set(recorded["manifests"]), HINT


def test_calibration_sample_estimates_are_unchanged():
    if not CALIBRATION_CSV.exists():
        pytest.skip(f"{CALIBRATION_CSV.name} is not beside the checkout")
    recorded = RECORDED["calibration"]["rows"]
    now = row_estimates(calibration_rows())
    assert [r["row"] for r in now] == [r["row"] for r in recorded], "the sample drew other rows"
    changed = [(i, r["row"]) for i, (r, old) in enumerate(zip(now, recorded)) if r != old]
    assert not changed, f"{len(changed)} of {len(now)} rows moved, first {changed[:3]}; {HINT}"
