"""The DGDR and BenchmarkJob lifecycles as pure functions on status dictionaries.

DGDR (``status.state``): Pending → Profiling → Ready, or → Deploying → Ready when autoApply
and a cluster is configured, or Failed with a reason. Conditions (by type, each with
``observedGeneration``): Validation, Profiling, SpecGenerated, DeploymentReady.
BenchmarkJob (``status.state``): Pending → Running → Completed | Failed, with startTime,
completionTime, failureMessage and details.

Times are passed in (``now``), never read here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from planner.conditions import Condition

BENCH_TERMINAL = frozenset({"Completed", "Failed"})
BENCH_UNFINISHED = frozenset({"", "Pending", "Running"})


def timestamp(now: datetime) -> str:
    """RFC 3339 in UTC with a Z, to the second, as Kubernetes writes ``metav1.Time``."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(kind: str, ok: bool | None, reason: str, message: str, generation: int, now: datetime) -> dict[str, Any]:
    """The condition ``kind`` as the status stores it: True/False as ``ok``, Unknown when None."""
    status = "Unknown" if ok is None else ("True" if ok else "False")
    return Condition.of(kind, status, reason, message, now=timestamp(now), generation=generation).stored()


def with_condition(status: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``status`` with ``new`` replacing the condition of the same type.

    ``lastTransitionTime`` is kept when the condition's status did not change.
    """
    conditions = list(status.get("conditions") or [])
    for i, old in enumerate(conditions):
        if old.get("type") == new["type"]:
            if old.get("status") == new["status"] and old.get("lastTransitionTime"):
                new = {**new, "lastTransitionTime": old["lastTransitionTime"]}
            conditions[i] = new
            break
    else:
        conditions.append(new)
    return {**status, "conditions": conditions}


def dgdr_pending(generation: int, now: datetime) -> dict[str, Any]:
    """The status of a DGDR that passed admission validation."""
    status = {"state": "Pending", "observedGeneration": generation}
    return with_condition(status, condition("Validation", True, "SpecValid", "the request is valid", generation, now))


def bench_pending() -> dict[str, Any]:
    return {"state": "Pending"}


def bench_running(status: dict[str, Any], now: datetime) -> dict[str, Any]:
    return {**status, "state": "Running", "startTime": timestamp(now), "lastReconcileTime": timestamp(now)}


def bench_finished(status: dict[str, Any], now: datetime, *, ok: bool, details: str = "", failure: str = "") -> dict[str, Any]:
    out = {**status, "state": "Completed" if ok else "Failed", "completionTime": timestamp(now), "lastReconcileTime": timestamp(now)}
    if details:
        out["details"] = details
    if failure:
        out["failureMessage"] = failure
    return out
