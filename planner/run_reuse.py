"""Runs an earlier online search measured, reused by a later one of the same workload.

A run's numbers depend on the model, GPU type, backend, the engine (image or command, and its
version), the harness that measured it (genai-bench, its scenario and request options), the
ISL/OSL distribution, the unit's shape and engine settings and the run's clients, never on the
SLA. A run is stored under all of these (``RunWorkload.key`` for what the whole search shares,
``unit_settings`` for the unit, and the clients); a later search reuses a stored run only when
all three are equal, so a stale or mismatched run is never read. The reused runs are where the
search starts (``planner.online.next_run`` reads them as measured; they use none of the budget),
in the service (``planner.online_loop``) and in ``benchmarks/online_replay.py`` alike.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RunWorkload", "StoredRun", "reusable", "unit_settings"]

Run = tuple[str, int]  # (unit key, closed-loop clients), as planner.online.Run


def _digest(value: Any) -> str:
    """A short stable digest of a JSON-able value (sorted keys)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class RunWorkload(BaseModel):
    """What every run of one online search shares and that changes its numbers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    gpu: str
    backend: str
    engine: str = Field(description="the engine as deployed: image or command template, and its version")
    isl_tokens: int = Field(gt=0, description="input tokens per request (the ISL distribution's centre)")
    osl_tokens: int = Field(gt=0, description="output tokens per request")
    distribution: str = Field(description="the traffic scenario, e.g. D(4000,500): fixed lengths")
    harness: str = Field(description="the benchmark and its request options (time per run, request cap, ignore_eos)")

    def key(self) -> str:
        """The digest runs of this workload are stored under."""
        return _digest(self.model_dump())


class StoredRun(BaseModel):
    """One run measured by an online search, as stored for later searches of its workload.
    ``points``: its sweep points (``planner.online.SweepPoint`` fields: ms, output tokens/s);
    ``iterations``: genai-bench's iterations as stored (for calibration); ``source``: the DGDR
    that measured it (``namespace/name``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workload: str = Field(min_length=1, description="RunWorkload.key()")
    unit: str = Field(min_length=1, description="the unit's key, e.g. agg tp2")
    settings: str = Field(min_length=1, description="unit_settings of the unit measured")
    concurrency: int = Field(gt=0, description="closed-loop clients")
    points: tuple[dict[str, float], ...] = Field(min_length=1)
    iterations: tuple[dict[str, Any], ...] = ()
    source: str
    measured_at: datetime

    @property
    def run(self) -> Run:
        return (self.unit, self.concurrency)


def unit_settings(unit: Any, clients: int) -> str:
    """A digest of everything a unit (``planner.types.Plan``) deploys with, as it bears on a run at
    ``clients`` closed-loop clients: checkpoint, precision, KV-cache dtype, memory share, mode, and
    each engine's role, parallelism, replicas, prompt tokens per step and running-sequence limit.
    The limit counts only up to ``clients``: an engine never holds more sequences than there are
    clients, so a run at 4 clients is the same under a limit of 96 or of 103."""
    fields = ("model", "gpu", "backend", "precision", "kv_dtype", "memory_fraction", "mode")
    engines = [{**e.model_dump(include={"role", "tp", "pp", "dp", "ep", "replicas", "max_num_tokens",
                                        "gpus_per_node"}), "max_batch": min(e.max_batch, clients)}
               for e in unit.engines]
    return _digest({**{f: getattr(unit, f) for f in fields}, "engines": engines})


def reusable(stored: Iterable[StoredRun], workload: str, settings: Callable[[Run], str | None],
             concurrency: Iterable[int]) -> dict[Run, StoredRun]:
    """The stored runs a search of ``workload`` (a ``RunWorkload.key()``) reuses: at one of its
    ``concurrency``, of a unit whose ``settings`` for the run (``unit_settings``; None: not one of
    the search's units) are the stored ones; the newest wins where a run was stored twice."""
    clients = set(concurrency)
    out: dict[Run, StoredRun] = {}
    for s in sorted(stored, key=lambda s: s.measured_at):
        if s.workload == workload and s.concurrency in clients and settings(s.run) == s.settings:
            out[s.run] = s
    return out
