"""The compact table of every evaluated candidate in the profiling results: all of them, marked,
small enough for an object's status, and bounded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner import plan
from planner.candidate_table import COLUMNS, candidate_table
from planner.request import parse_documents
from planner.results import ProfilingResults, pareto_front
from profiler.hub import load_model

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "deepseek-v3-h200.dgdr.yaml"


@pytest.fixture(scope="module")
def deepseek():
    """DeepSeek-V3 on 16 H200, the thorough search."""
    request = parse_documents(EXAMPLE.read_text(), str(EXAMPLE))[0].model_copy(update={"search_strategy": "thorough"})
    return plan(request, model=load_model(request.model))


def test_every_candidate_is_stored_and_marked(deepseek):
    doc = ProfilingResults.of(deepseek).stored()
    table = doc["candidates"]
    rows = [dict(zip(table["columns"], row)) for row in table["rows"]]
    assert table["columns"] == list(COLUMNS)
    assert len(rows) == table["total"] == deepseek.evaluated == len(deepseek.candidates) and table["omitted"] == 0
    assert sum(r["chosen"] for r in rows) == 1
    chosen = next(r for r in rows if r["chosen"])
    assert chosen["totalGpus"] == deepseek.chosen.total_gpus and chosen["feasible"]
    assert sum(r["pareto"] for r in rows) == len(doc["pareto"])
    assert [r["feasible"] for r in rows] == [p.feasible for p in deepseek.candidates]
    assert all(r["reason"] for r in rows if not r["feasible"])  # why not, for each one not chosen
    for row, cand in zip(rows, deepseek.candidates):
        assert [e[0] for e in row["engines"]] == [e.role for e in cand.engines]
        assert row["ttftMs"] == pytest.approx(cand.predicted.ttft_ms, rel=1e-3)


def test_the_table_is_compact(deepseek):
    table = ProfilingResults.of(deepseek).stored()["candidates"]
    size = len(json.dumps(table, separators=(",", ":")))
    assert size / table["total"] < 200, f"{size} bytes for {table['total']} rows"


def test_a_bounded_table_keeps_the_chosen_and_pareto_candidates_first(deepseek):
    front = pareto_front(deepseek.candidates)
    limit = len(front) + 3
    table = candidate_table(deepseek, front, max_rows=limit)
    rows = [dict(zip(table["columns"], row)) for row in table["rows"]]
    assert len(rows) == limit and table["omitted"] == len(deepseek.candidates) - limit
    assert rows[0]["chosen"] and sum(r["pareto"] for r in rows) == len(front)
