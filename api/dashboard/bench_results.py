"""Benchmark results of a BenchmarkJob, read from its status, in one normalized shape.

The runner reports in ``status.details`` (a JSON string or object) or ``status.results`` /
``status.metrics``. Accepted shapes, so that both slaplan's runner and genai-bench's own
per-run documents read the same:

- ``{"results": [run, ...], "reports": [...], "sla": {"ttftMs": .., "itlMs": ..}}``
  (``runs``, ``points`` or ``iterations`` instead of ``results`` too);
- ``{"scenarios": {"D(100,100)": [run, ...]}}`` or ``{"scenarios": [{"scenario": .., "results": [..]}]}``;
- a bare list of runs.

A run is one (scenario, concurrency) pair: ``scenario``, ``concurrency`` and metrics in ms or
tokens/s (``ttftMs``, ``itlMs`` or ``tpotMs``, ``outputTokPerSec``, ``requestsPerSec``, ``e2eMs``,
optional ``...P99Ms``; a metric may also be a percentile object ``{"mean", "p50", "p90",
"p99"}`` in ms, as in ``tpotMs: {mean: 12.1, p99: 15.0}``), or genai-bench's ``aggregated_metrics`` with ``stats.ttft.mean`` and
``stats.tpot.mean`` in seconds, ``mean_output_throughput_tokens_per_s`` and
``requests_per_second``.
"""

from __future__ import annotations

import json
import math
from typing import Any, NamedTuple


class Run(NamedTuple):
    scenario: str
    concurrency: float
    ttft_ms: float | None
    ttft_p99_ms: float | None
    itl_ms: float | None
    itl_p99_ms: float | None
    output_tok_s: float | None
    requests_s: float | None
    e2e_ms: float | None
    error_rate: float | None


class Targets(NamedTuple):
    """The SLA a job's numbers are drawn against (ms): the results document's ``sla``, else the job's
    ``slaplan.io/ttft-ms`` / ``slaplan.io/itl-ms`` annotations; None where neither states one."""

    ttft_ms: float | None = None
    itl_ms: float | None = None

    @property
    def stated(self) -> bool:
        return self.ttft_ms is not None or self.itl_ms is not None


# Targets field -> its key in a results document's ``sla`` and the job annotation that also sets it
_TARGET_KEYS = {"ttft_ms": ("ttftMs", "slaplan.io/ttft-ms"), "itl_ms": ("itlMs", "slaplan.io/itl-ms")}


class Results(NamedTuple):
    runs: list[Run]
    reports: list[tuple[str, str]]  # (label, location)
    sla: Targets
    message: str  # free text the runner left, when it is not a results document


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        try:
            v = float(v)
        except (TypeError, ValueError):
            return None
    return float(v) if math.isfinite(v) else None


def _first_number(*values: Any) -> float | None:
    """The first of ``values`` that reads as a finite number."""
    return next((n for n in map(_number, values) if n is not None), None)


def _pick(d: dict[str, Any], *keys: str, stat: str = "mean") -> float | None:
    """The first numeric value under ``keys``; a percentile object (``{"mean": .., "p99": ..}``)
    gives its ``stat``."""
    for key in keys:
        if key in d:
            raw = d[key]
            value = _number(raw.get(stat)) if isinstance(raw, dict) else _number(raw)
            if value is not None:
                return value
    return None


def _stat_s(stats: dict[str, Any], name: str, field: str = "mean") -> float | None:
    """A genai-bench statistic in seconds, as milliseconds."""
    value = _number((stats.get(name) or {}).get(field)) if isinstance(stats.get(name), dict) else None
    return None if value is None else value * 1000.0


def run_from(d: dict[str, Any], scenario: str = "") -> Run | None:
    agg = d.get("aggregated_metrics") if isinstance(d.get("aggregated_metrics"), dict) else None
    if agg is not None:
        stats = agg.get("stats") if isinstance(agg.get("stats"), dict) else {}
        errors = _pick(agg, "error_rate")
        return Run(
            scenario=str(agg.get("scenario") or scenario or "default"),
            concurrency=_pick(agg, "num_concurrency", "concurrency") or 0.0,
            ttft_ms=_stat_s(stats, "ttft"),
            ttft_p99_ms=_stat_s(stats, "ttft", "p99"),
            itl_ms=_stat_s(stats, "tpot"),
            itl_p99_ms=_stat_s(stats, "tpot", "p99"),
            output_tok_s=_pick(agg, "mean_output_throughput_tokens_per_s", "output_throughput"),
            requests_s=_pick(agg, "requests_per_second"),
            e2e_ms=_stat_s(stats, "e2e_latency"),
            error_rate=errors,
        )
    concurrency = _pick(d, "concurrency", "numConcurrency", "num_concurrency")
    if concurrency is None:
        return None
    return Run(
        scenario=str(d.get("scenario") or d.get("trafficScenario") or scenario or "default"),
        concurrency=concurrency,
        ttft_ms=_pick(d, "ttftMs", "ttft_ms", "meanTtftMs", "mean_ttft_ms"),
        ttft_p99_ms=_pick(d, "ttftP99Ms", "ttft_p99_ms", "p99TtftMs") or _pick(d, "ttftMs", stat="p99"),
        itl_ms=_pick(d, "itlMs", "itl_ms", "tpotMs", "tpot_ms", "meanItlMs", "mean_itl_ms", "meanTpotMs"),
        itl_p99_ms=_pick(d, "itlP99Ms", "itl_p99_ms", "tpotP99Ms", "p99ItlMs") or _pick(d, "itlMs", "tpotMs", stat="p99"),
        output_tok_s=_pick(d, "outputTokPerSec", "outputTokensPerSec", "outputTokensPerSecond", "outputThroughputTokPerSec",
                           "output_tok_s", "output_throughput", "mean_output_throughput_tokens_per_s"),
        requests_s=_pick(d, "requestsPerSec", "requestsPerSecond", "requests_per_second", "rps"),
        e2e_ms=_pick(d, "e2eMs", "e2e_ms", "meanE2eMs", "e2eLatencyMs"),
        error_rate=_pick(d, "errorRate", "error_rate"),
    )


def _runs(value: Any, scenario: str = "") -> list[Run]:
    out: list[Run] = []
    if isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                nested = next((item[k] for k in ("results", "runs", "points", "iterations") if isinstance(item.get(k), list)), None)
                if nested is not None:
                    out += _runs(nested, str(item.get("scenario") or item.get("name") or scenario))
                else:
                    run = run_from(item, scenario)
                    if run is not None:
                        out.append(run)
    elif isinstance(value, dict):
        for name, items in value.items():
            out += _runs(items if isinstance(items, list) else [items], str(name))
    return out


def _reports(doc: dict[str, Any]) -> list[tuple[str, str]]:
    raw = next((doc[k] for k in ("reports", "reportFiles", "files", "artifacts") if doc.get(k)), [])
    if isinstance(raw, (str, dict)):
        raw = [raw]
    out = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, str):
            out.append((item.rstrip("/").rsplit("/", 1)[-1] or item, item))
        elif isinstance(item, dict):
            where = item.get("url") or item.get("href") or item.get("path") or item.get("uri")
            if where:
                out.append((str(item.get("name") or item.get("label") or where), str(where)))
    if isinstance(doc.get("reportDir"), str):
        out.append(("report folder", doc["reportDir"]))
    return out


def read_results(status: dict[str, Any], annotations: dict[str, str] | None = None) -> Results:
    """The runs, report files and SLA targets a BenchmarkJob's status holds (empty when not run)."""
    message = ""
    doc: Any = None
    for key in ("details", "results", "metrics"):
        value = status.get(key)
        if isinstance(value, str):
            text = value.strip()
            if text[:1] in ("{", "["):
                try:
                    doc = json.loads(text)
                    break
                except (ValueError, RecursionError):  # not JSON, or nested beyond what the parser follows
                    pass
            if text and not message:
                message = text
        elif isinstance(value, (dict, list)):
            doc = value
            break
    runs: list[Run] = []
    reports: list[tuple[str, str]] = []
    stated: dict[str, Any] = {}
    if isinstance(doc, list):
        runs = _runs(doc)
    elif isinstance(doc, dict):
        body = next((doc[k] for k in ("results", "runs", "points", "iterations", "metrics", "scenarios") if k in doc), None)
        runs = _runs(body) if body is not None else ([r] if (r := run_from(doc)) else [])
        reports = _reports(doc)
        stated = doc["sla"] if isinstance(doc.get("sla"), dict) else {}
        if isinstance(doc.get("message"), str):
            message = doc["message"]
    if isinstance(status.get("resultsLocation"), str) and status["resultsLocation"]:
        reports.append(("genai-bench results folder", status["resultsLocation"]))
    notes = annotations or {}
    sla = Targets(**{field: _first_number(stated.get(key), notes.get(ann)) for field, (key, ann) in _TARGET_KEYS.items()})
    runs.sort(key=lambda r: (r.scenario, r.concurrency))
    return Results(runs, reports, sla, message)


def by_scenario(runs: list[Run]) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = {}
    for run in runs:
        out.setdefault(run.scenario, []).append(run)
    return out
