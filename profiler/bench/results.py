"""genai-bench's result files as typed metrics (pure: callers hand in names and parsed JSON).

genai-bench writes one JSON per (scenario, concurrency) iteration, named
``<scenario>_<task>_num_concurrency_<N>_time_<secs>s.json`` (or ``…_batch_size_<N>_…`` for
embedding tasks), next to ``experiment_metadata.json``; a run that gets no successful request
writes ``debug_for_run_<scenario>_<N>.json`` instead. File names only select files: scenario
and concurrency are read inside each file. Times there are in ``_time_unit`` (seconds unless
``--metrics-time-unit ms``); here every time is in milliseconds. genai-bench's own
``error_rate`` is always 0 in 0.0.5, so the rate is computed: errors / requests.
"""

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

RESULT_FILE = re.compile(r"^(?P<scenario>.+)_(?P<task>[a-z]+(?:-[a-z]+)*-to-[a-z]+)_"
                         r"(?P<kind>num_concurrency|batch_size)_(?P<level>\d+)_time_(?P<secs>\d+)s\.json$")
DEBUG_FILE = re.compile(r"^debug_for_run_(?P<scenario>.+)_(?P<level>\d+)\.json$")
METADATA_FILE = "experiment_metadata.json"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Percentiles(_Frozen):
    """One latency's distribution over the successful requests of an iteration (ms)."""

    mean_ms: float | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None


class IterationMetrics(_Frozen):
    """What one (scenario, concurrency) iteration measured.

    TPOT is genai-bench's per request (E2E − TTFT) / (output tokens − 1), the mean gap
    between output tokens after the first (slaplan's ITL).
    """

    scenario: str
    concurrency: int
    file: str
    requests: int = Field(description="requests sent in the measured window")
    errors: int
    error_rate: float = Field(description="errors / requests")
    error_codes: dict[str, int] = Field(default_factory=dict, description="HTTP status → count")
    duration_s: float
    requests_per_s: float
    output_tok_s: float = Field(description="output tokens per second, whole server")
    input_tok_s: float
    mean_input_tokens: float | None = None
    mean_output_tokens: float | None = None
    ttft: Percentiles
    tpot: Percentiles
    e2e: Percentiles

    @property
    def successes(self) -> int:
        return self.requests - self.errors


def result_file_kind(name: str) -> str | None:
    """``result``, ``debug``, ``metadata`` or None for any other file name."""
    if RESULT_FILE.match(name):
        return "result"
    if DEBUG_FILE.match(name):
        return "debug"
    return "metadata" if name == METADATA_FILE else None


def _scale(unit: str | None) -> float:
    return 1.0 if (unit or "s").lower() == "ms" else 1e3


def _stat(stats: dict[str, Any], key: str, scale: float) -> Percentiles:
    field = stats.get(key) or {}

    def get(name: str) -> float | None:
        value = field.get(name)
        return None if value is None else float(value) * scale

    return Percentiles(mean_ms=get("mean"), p50_ms=get("p50"), p90_ms=get("p90"), p99_ms=get("p99"))


def parse_iteration(name: str, data: dict[str, Any], unit: str | None = None) -> IterationMetrics:
    """Parse one result (or debug) file's JSON. ``unit`` (``s``/``ms``) overrides the file's
    ``_time_unit``. Raises ``ValueError`` when the file is not a genai-bench result."""
    agg = data.get("aggregated_metrics")
    if not isinstance(agg, dict):
        raise ValueError(f"{name}: no aggregated_metrics (not a genai-bench result file)")
    scale = _scale(unit or data.get("_time_unit"))
    stats = agg.get("stats") or {}
    requests = int(agg.get("num_requests") or 0)
    errors = int(agg.get("num_error_requests") or 0)
    level = agg.get("num_concurrency") if agg.get("iteration_type", "num_concurrency") == "num_concurrency" \
        else agg.get("batch_size")
    if level is None:
        match = RESULT_FILE.match(name) or DEBUG_FILE.match(name)
        level = int(match.group("level")) if match else 0
    scenario = agg.get("scenario")
    if scenario is None:
        match = RESULT_FILE.match(name) or DEBUG_FILE.match(name)
        scenario = match.group("scenario") if match else ""
    mean = lambda key: (stats.get(key) or {}).get("mean")  # noqa: E731
    return IterationMetrics(
        scenario=str(scenario), concurrency=int(level), file=name,
        requests=requests, errors=errors, error_rate=errors / requests if requests else 0.0,
        error_codes={str(k): int(v) for k, v in (agg.get("error_codes_frequency") or {}).items()},
        duration_s=float(agg.get("run_duration") or 0.0),
        requests_per_s=float(agg.get("requests_per_second") or 0.0),
        output_tok_s=float(agg.get("mean_output_throughput_tokens_per_s") or 0.0),
        input_tok_s=float(agg.get("mean_input_throughput_tokens_per_s") or 0.0),
        mean_input_tokens=mean("num_input_tokens"), mean_output_tokens=mean("num_output_tokens"),
        ttft=_stat(stats, "ttft", scale), tpot=_stat(stats, "tpot", scale), e2e=_stat(stats, "e2e_latency", scale),
    )


def parse_folder(files: dict[str, dict[str, Any]]) -> tuple[list[IterationMetrics], list[IterationMetrics]]:
    """(results, failed runs) from a folder's JSON files (name → parsed content), each list
    ordered by scenario as genai-bench ran them, then concurrency. Unparseable files are skipped."""
    meta = files.get(METADATA_FILE) or {}
    unit = meta.get("metrics_time_unit")
    order = {s: i for i, s in enumerate(meta.get("traffic_scenario") or [])}
    results, debug = [], []
    for name, data in files.items():
        kind = result_file_kind(name)
        if kind not in ("result", "debug") or not isinstance(data, dict):
            continue
        try:
            parsed = parse_iteration(name, data, unit)
        except (ValueError, TypeError):
            continue
        (results if kind == "result" else debug).append(parsed)
    key = lambda m: (order.get(m.scenario, len(order)), m.scenario, m.concurrency)  # noqa: E731
    return sorted(results, key=key), sorted(debug, key=key)


def status_metrics(results: list[IterationMetrics]) -> list[dict[str, Any]]:
    """Compact per-iteration metrics for a job's status (ms, per second, counts)."""
    out = []
    for m in results:
        out.append({
            "scenario": m.scenario, "concurrency": m.concurrency, "requests": m.requests, "errors": m.errors,
            "errorRate": round(m.error_rate, 6), "requestsPerSecond": _r(m.requests_per_s),
            "outputTokensPerSecond": _r(m.output_tok_s),
            "ttftMs": _pct(m.ttft), "tpotMs": _pct(m.tpot), "e2eMs": _pct(m.e2e),
        })
    return out


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def _pct(p: Percentiles) -> dict[str, float | None]:
    return {"mean": _r(p.mean_ms), "p50": _r(p.p50_ms), "p90": _r(p.p90_ms), "p99": _r(p.p99_ms)}


def table(results: list[IterationMetrics]) -> str:
    """A fixed-width text table, one row per iteration."""
    head = ("scenario", "conc", "reqs", "err%", "req/s", "out tok/s", "TTFT mean", "TTFT p90", "TTFT p99",
            "TPOT mean", "TPOT p90", "E2E mean", "E2E p99")
    rows = [head]
    fmt = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
    for m in results:
        rows.append((m.scenario, str(m.concurrency), str(m.requests), f"{100 * m.error_rate:.1f}",
                     f"{m.requests_per_s:.2f}", f"{m.output_tok_s:.1f}", fmt(m.ttft.mean_ms), fmt(m.ttft.p90_ms),
                     fmt(m.ttft.p99_ms), fmt(m.tpot.mean_ms), fmt(m.tpot.p90_ms), fmt(m.e2e.mean_ms), fmt(m.e2e.p99_ms)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n(times in ms)"
