"""The compact table of every evaluated candidate in the profiling results: all of them, marked,
small enough for an object's status, and bounded."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from planner import plan
from planner.candidate_table import COLUMNS, CandidateTable, EngineCells, candidate_table
from planner.request import parse_documents
from planner.results import ProfilingResults, ResultsParts, pareto_front
from profiler.hub import load_model
from paths import ROOT

EXAMPLE = ROOT / "examples" / "deepseek-v3-h200.dgdr.yaml"


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
    assert len(table.rows) == limit and table.omitted == len(deepseek.candidates) - limit
    assert table.rows[0].chosen and sum(r.pareto for r in table.rows) == len(front)


def test_the_stored_table_reads_back_typed_as_stored(deepseek):
    stored = ProfilingResults.of(deepseek).stored()["candidates"]
    table = CandidateTable.model_validate(stored)
    assert table.model_dump(mode="json") == stored and len(table.rows) == stored["total"]
    row, cand = table.rows[0], deepseek.candidates[0]
    assert row.engines[0] == EngineCells(*stored["rows"][0][1][0]) and row.engines[0].tp == cand.engines[0].tp
    assert row.ttft_ms == pytest.approx(cand.predicted.ttft_ms, rel=1e-3)  # 4 significant digits
    assert CandidateTable.model_validate({**stored, "columns": list(reversed(COLUMNS)),
                                          "rows": [row[::-1] for row in stored["rows"]]}) == table  # cells by name


def test_rows_of_another_shape_are_left_out_and_the_rest_read():
    row = ["agg", [["aggregated", 2, 4, 1, 1, 1]], 8, 812.3, None, 50.0, 900.0, 1.5, None, True, None, False, True]
    table = CandidateTable.model_validate({"columns": list(COLUMNS), "total": 9, "omitted": 0,
                                           "rows": [row, "x", row[:3], [*row[:3], "fast", *row[4:]], row]})
    assert len(table.rows) == 2 and table.rows[0].itl_ms == math.inf  # null: unbounded
    assert table.rows[0].engines == (EngineCells("aggregated", 2, 4, 1, 1, 1),)
    for columns in (["mode", 5], "x"):
        with pytest.raises(ValidationError):
            CandidateTable.model_validate({"columns": columns, "rows": [], "total": 0})


def test_a_results_document_reads_part_by_part(deepseek):
    doc = ProfilingResults.of(deepseek).stored()
    whole = ResultsParts.read(json.dumps(doc))
    assert whole.chosen == deepseek.chosen and len(whole.candidates.rows) == doc["candidates"]["total"]
    broken = {**doc, "candidates": {"columns": 5}, "pareto": [7, *doc["pareto"]], "sla": "x", "extra": 1}
    parts = ResultsParts.read(json.dumps(broken))
    assert parts.chosen == deepseek.chosen and parts.candidates is None and parts.sla is None
    assert parts.pareto == whole.pareto and parts.model == doc["model"]
    assert ProfilingResults.read(json.dumps(broken)) is None  # whole or nothing, for rendering manifests
    for nothing in ('{"chosen": [1]}', "[1]", "configmap/results", None, 5):
        assert ResultsParts.read(nothing) is None
