"""Task counters and durations of this process's workers (Prometheus), created on first use."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

from prometheus_client import CollectorRegistry, Counter, Histogram


class TaskMetrics(NamedTuple):
    registry: CollectorRegistry
    runs: Counter
    seconds: Histogram


@cache
def task_metrics() -> TaskMetrics:
    registry = CollectorRegistry(auto_describe=True)
    runs = Counter(
        "slaplan_tasks", "Tasks finished by this process's workers, by outcome", ["task", "outcome"], registry=registry
    )
    seconds = Histogram(
        "slaplan_task_duration_seconds",
        "Wall time of tasks run by this process's workers",
        ["task"],
        buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200),
        registry=registry,
    )
    return TaskMetrics(registry, runs, seconds)
