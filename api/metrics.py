"""Prometheus metrics of the API: requests, durations, and resources by kind and state."""

from __future__ import annotations

from typing import NamedTuple

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

from infra.db import SessionFactory
from infra.resources import count_by_state

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ApiMetrics(NamedTuple):
    registry: CollectorRegistry
    requests: Counter
    seconds: Histogram

    def observe_request(self, method: str, route: str, code: int, seconds: float) -> None:
        self.requests.labels(method, route, str(code)).inc()
        self.seconds.labels(method, route).observe(seconds)


class _StateCollector:
    """Counts stored resources by kind and ``status.state`` at scrape time."""

    def __init__(self, sessions: SessionFactory):
        self._sessions = sessions

    def describe(self):
        return []

    def collect(self):
        family = GaugeMetricFamily("slaplan_resources", "Stored resources by kind and state", labels=["kind", "state"])
        try:
            with self._sessions() as session:
                tally = count_by_state(session)
        except Exception:  # a scrape must not fail because the database is down
            yield family
            return
        for (kind, state), n in sorted(tally.items()):
            family.add_metric([kind, state], n)
        yield family


def make_metrics(sessions: SessionFactory) -> ApiMetrics:
    registry = CollectorRegistry(auto_describe=True)
    requests = Counter(
        "slaplan_http_requests", "HTTP requests by method, route and status code", ["method", "route", "code"], registry=registry
    )
    seconds = Histogram(
        "slaplan_http_request_duration_seconds",
        "HTTP request latency by method and route",
        ["method", "route"],
        buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        registry=registry,
    )
    registry.register(_StateCollector(sessions))
    return ApiMetrics(registry, requests, seconds)


def exposition(metrics: ApiMetrics, include_tasks: bool) -> bytes:
    """The Prometheus text format of the API's metrics, plus this process's task metrics."""
    text = generate_latest(metrics.registry)
    if include_tasks:
        from workers.metrics import task_metrics

        text += generate_latest(task_metrics().registry)
    return text
