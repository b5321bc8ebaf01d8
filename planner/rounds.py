"""Sizing steps run side by side, each round's rows evaluated by the model in one call.

The model's cost per ``evaluate`` call is mostly fixed (numpy's per-operation overhead on a few
rows: about 24 M instructions a call, whatever its rows), so sizing the aggregated and the
disaggregated candidates of a request in step costs fewer calls than sizing them in turn.

A step is a generator: it yields the rows (``Prepared``, never an empty list) it needs evaluated,
receives their outputs (``evaluate``'s dict of arrays, one entry a row) and returns its answer.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

import numpy as np

from profiler.model import Prepared, evaluate, stack_prepared

R = TypeVar("R")
Outputs = dict[str, np.ndarray]
Steps = Generator[list[Prepared], Outputs, R]


def run_together(steps: list[Steps[Any]], params: dict) -> list[Any]:
    """The answers of ``steps``, in their order: each round evaluates every rows a running step
    yielded in one ``evaluate`` call (``params``: the model's parameters)."""
    answers: list[Any] = [None] * len(steps)
    waiting: dict[int, list[Prepared]] = {}
    for i, step in enumerate(steps):
        _advance(steps, answers, waiting, i, None)
    while waiting:
        asked = list(waiting.items())
        waiting = {}
        out = evaluate(stack_prepared([row for _, rows in asked for row in rows]), params)
        at = 0
        for i, rows in asked:
            _advance(steps, answers, waiting, i, {k: v[at:at + len(rows)] for k, v in out.items()})
            at += len(rows)
    return answers


def run(step: Steps[R], params: dict) -> R:
    """The answer of one step."""
    return run_together([step], params)[0]


def _advance(steps: list[Steps[Any]], answers: list[Any], waiting: dict[int, list[Prepared]], i: int,
             out: Outputs | None) -> None:
    """Send step ``i`` its outputs (None: start it); what it yields next waits for the next round,
    what it returns is its answer."""
    try:
        rows = steps[i].send(out)
    except StopIteration as done:
        answers[i] = done.value
        return
    assert rows, "a sizing step yields the rows it needs evaluated, never none"
    waiting[i] = rows
