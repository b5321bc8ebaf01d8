"""The JSON a DGDR's status holds, read by the shape the pages expect.

Any client may write the status subresource, so the planner's results document and the
conditions can hold anything JSON can. ``conform`` keeps of a value only the parts of the
expected shape and leaves out the rest, so a part of the wrong type reads as absent and the
pages show what they can read.

A shape is a dict (an object: the listed keys, each with its own shape; other keys are left
out), a one-item list (an array of that shape; other items are left out) or a predicate.
"""

from __future__ import annotations

import math
from typing import Any


def is_number(value: Any) -> bool:
    """A finite JSON number (not a boolean)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_text(value: Any) -> bool:
    return isinstance(value, str)


def is_flag(value: Any) -> bool:
    return isinstance(value, bool)


def is_array(value: Any) -> bool:
    return isinstance(value, list)


def is_texts(value: Any) -> bool:
    """An array of strings only (a table's column names: one of another type would shift the rest)."""
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def conform(value: Any, shape: Any) -> Any:
    """``value`` with every part that does not have ``shape`` left out (null and absent alike);
    None when ``value`` itself does not have it."""
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return None
        kept = {key: conform(value.get(key), part) for key, part in shape.items()}
        return {key: item for key, item in kept.items() if item is not None}
    if isinstance(shape, list):
        if not isinstance(value, list):
            return None
        return [item for item in (conform(v, shape[0]) for v in value) if item is not None]
    return value if shape(value) else None


def _numbers(*keys: str) -> dict[str, Any]:
    return dict.fromkeys(keys, is_number)


def _texts(*keys: str) -> dict[str, Any]:
    return dict.fromkeys(keys, is_text)


ENGINE_CELLS = ("role", "replicas", "tp", "pp", "dp", "ep")  # an engine in a candidate table row
ENGINE = {**_numbers("tp", "pp", "dp", "ep", "replicas", "gpusPerEngine", "nodesPerEngine", "maxBatch", "maxNumTokens"),
          "role": is_text}
TTFT_PARTS = _numbers("frontend", "prefill", "kvTransfer", "firstStep", "queueing", "burst")
ITL_PARTS = _numbers("decodeStep", "prefillInterference")
PREDICTED = {**_numbers("ttftMs", "ttftP90Ms", "ttftP99Ms", "itlMs", "outputTokPerSecPerGpu", "tokPerSecPerUser",
                        "requestsPerSec", "concurrency"),
             "ttftPartsMs": TTFT_PARTS, "itlPartsMs": ITL_PARTS}
PLAN = {**_texts("model", "mode", "backend", "gpu", "precision", "reason"), **_numbers("totalGpus", "costPerHour"),
        "feasible": is_flag, "engines": [ENGINE], "predicted": PREDICTED}
# A row of the candidate table, its cells named by the table's columns.
CANDIDATE_ROW = {**_texts("mode", "reason"),
                 **_numbers("totalGpus", "costPerHour", "ttftMs", "itlMs", "tokPerSecPerUser", "outputTokPerSecPerGpu",
                            "requestsPerSec"),
                 "feasible": is_flag, "pareto": is_flag, "chosen": is_flag, "engines": [is_array]}
CANDIDATES = {"columns": is_texts, "rows": [is_array], **_numbers("total", "omitted")}
POINT = _numbers("concurrency", "ttftMs", "itlMs", "outputTokPerSec")
TRIAL = {**_numbers("number", "gpus", "score"), **_texts("unit", "state", "error", "resultsLocation"),
         "meetsSla": is_flag, "points": [POINT]}
ERRORS = _numbers("ttft_mdape_pct", "tpot_mdape_pct")
ONLINE = {**_texts("target", "stopped", "best"), "trialsDone": is_number,
          "budget": _numbers("maxTrials", "maxWallTimeMinutes"),
          "sweep": {"scenario": is_text, "concurrency": [is_number]},
          "calibration": {"unit": is_text, "scale": is_number, "before": ERRORS, "after": ERRORS},
          "trials": [TRIAL]}
MARGIN = {**_numbers("ttftPct", "itlPct"), "ttftBasis": is_text}
RESULTS = {**_texts("model", "gpu", "backend", "reason"), "evaluated": is_number, "feasible": is_flag,
           "closest": PLAN, "margin": MARGIN,
           "sla": _numbers("ttftMs", "itlMs", "e2eMs", "islTokens", "oslTokens", "concurrency", "requestRate"),
           "chosen": PLAN, "pareto": [PLAN], "candidates": CANDIDATES, "assumptions": [is_text], "online": ONLINE}
CONDITIONS = [_texts("type", "status", "reason", "message", "lastTransitionTime")]


def candidate(cells: dict[str, Any]) -> dict[str, Any]:
    """A candidate table row (cells by column name) as a plan entry with ``pareto`` and ``chosen`` marks."""
    row = conform(cells, CANDIDATE_ROW)
    engines = [conform(dict(zip(ENGINE_CELLS, e)), ENGINE) for e in row.get("engines", [])]
    predicted = {k: row[k] for k in ("ttftMs", "itlMs", "tokPerSecPerUser", "outputTokPerSecPerGpu", "requestsPerSec")
                 if k in row}
    return {**row, "engines": engines, "predicted": predicted}
