"""The page of one BenchmarkJob: what it measures, its state, and per traffic scenario TTFT,
ITL and throughput against concurrency (with the SLA lines), the raw numbers and the report
files."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import quote

from api.dashboard.bench_caveats import caveats
from api.dashboard.bench_results import Results, Run, Targets, by_scenario, read_results
from api.dashboard.charts import Rule, Series, chart, figure
from api.dashboard.html import dl, h, num, page, q, state_badge, timestamp
from api.dashboard.summaries import bench_summary, state_of
from api.report_files import files_url, report_files, results_folder
from infra.resources import Resource
from workers.lifecycle import BENCH_UNFINISHED


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text).strip("-").lower() or "default"


def _spec_section(resource: Resource) -> str:
    spec = resource.spec
    s = bench_summary(resource)
    out = spec.get("outputLocation") or {}
    facts = dl([
        ("Target", h(s["target"])),
        ("Model", h(s["model"])),
        ("Engine", h(s["engine"])),
        ("GPUs", h(f"{s['gpus']} × {s['gpu']}") if s["gpus"] else ""),
        ("Task", h(spec.get("task"))),
        ("Traffic scenarios", h(", ".join(spec.get("trafficScenarios") or []) or "genai-bench defaults")),
        ("Concurrency levels", h(", ".join(str(c) for c in spec.get("numConcurrency") or []) or "genai-bench defaults")),
        ("Per iteration", h(f"at most {spec.get('maxTimePerIteration')} min or {spec.get('maxRequestsPerIteration')} requests")),
        ("Results go to", h(out.get("storageUri")) + (f" / {h(spec['resultFolderName'])}" if spec.get("resultFolderName") else "")),
    ])
    return f'<section aria-labelledby="spec-h"><h2 id="spec-h">Benchmark</h2>{facts}</section>'


def _status_section(resource: Resource, results: Results) -> str:
    st = resource.status
    state = state_of(resource)
    if state == "Failed":
        tone, sentence = "bad", f"Failed: {st.get('failureMessage') or results.message or 'no reason given'}"
    elif state == "Completed":
        tone, sentence = "ok", f"Completed: {len(results.runs)} measured runs."
    elif state == "Running":
        tone, sentence = "busy", "Running: genai-bench is measuring; results appear as they arrive…"
    else:
        tone, sentence = "wait", f"Not run yet: {results.message}" if results.message else "Not run yet."
    facts = dl([
        ("Started", timestamp(st.get("startTime"))),
        ("Completed", timestamp(st.get("completionTime"))),
        ("Last update", timestamp(st.get("lastReconcileTime"))),
    ])
    spinner = '<span class="spinner" aria-hidden="true"></span>' if state in BENCH_UNFINISHED else ""
    return f'<div aria-live="polite"><p class="notice notice-{tone}" id="headline">{spinner}{h(sentence)}</p></div>{facts}'


def _warnings(resource: Resource) -> str:
    """The caveats the runner recorded in ``status.details``, as a warnings block (empty when none)."""
    items = "".join(f"<li>{h(text)}</li>" for text in caveats(resource.status.get("details")))
    if not items:
        return ""
    return (f'<section aria-labelledby="warn-h" class="notice notice-wait" id="warnings">'
            f'<h2 id="warn-h">Warnings</h2><ul>{items}</ul></section>')


def _charts(scenario: str, runs: list[Run], sla: Targets) -> str:
    slug = _slug(scenario)

    def pts(attr: str, unit: str) -> list[tuple[float, float, str]]:
        return [(r.concurrency, getattr(r, attr), f"concurrency {r.concurrency:g}: {getattr(r, attr):.4g} {unit}")
                for r in runs if getattr(r, attr) is not None]

    specs = [
        ("ttft", "Time to first token", "TTFT (ms)", "ttft_ms", "ttft_p99_ms", "ms", sla.ttft_ms),
        ("itl", "Inter-token latency", "ITL (ms)", "itl_ms", "itl_p99_ms", "ms", sla.itl_ms),
        ("tput", "Output throughput", "output tokens/s", "output_tok_s", None, "tok/s", None),
    ]
    figures = []
    for key, title, y_label, attr, p99, unit, target in specs:
        mean = pts(attr, unit)
        if not mean:
            figures.append(f'<figure class="chart-box"><p class="empty">No {h(title.lower())} reported.</p><figcaption>{h(title)}</figcaption></figure>')
            continue
        series = [Series("mean", mean, tone="a", joined=True)]
        legend = [("a", "mean")]
        tail = pts(p99, unit) if p99 else []
        if tail:
            series.append(Series("p99", tail, tone="b", joined=True, radius=3.5))
            legend.append(("b", "p99"))
        rules = (Rule("y", target, f"SLA {target:g} {unit}"),) if target else ()
        if target:
            legend.append(("rule", f"SLA target {target:g} {unit}"))
        svg = chart(
            chart_id=f"chart-{slug}-{key}", title=f"{title} against concurrency, {scenario}",
            description=f"{len(mean)} measured concurrency levels" + (f"; SLA target {target:g} {unit}" if target else ""),
            x_label="concurrency (clients, log scale)", y_label=y_label, series=series, rules=rules,
            size=(460, 320), log_x=True,
        )
        figures.append(figure(svg, title, legend))
    return f'<div class="grid3">{"".join(figures)}</div>'


def _table(scenario: str, runs: list[Run], sla: Targets) -> str:
    def ok(value: float | None, target: float | None) -> str:
        if value is None or target is None:
            return ""
        return ' class="n verdict-ok"' if value <= target else ' class="n verdict-bad"'

    rows = "".join(
        f"<tr><td class=\"n\">{r.concurrency:g}</td><td{ok(r.ttft_ms, sla.ttft_ms) or ' class=n'}>{num(r.ttft_ms, 1)}</td>"
        f"<td class=\"n\">{num(r.ttft_p99_ms, 1)}</td><td{ok(r.itl_ms, sla.itl_ms) or ' class=n'}>{num(r.itl_ms, 2)}</td>"
        f"<td class=\"n\">{num(r.itl_p99_ms, 2)}</td><td class=\"n\">{num(r.output_tok_s, 1)}</td>"
        f"<td class=\"n\">{num(r.requests_s, 2)}</td><td class=\"n\">{num(r.e2e_ms, 0)}</td>"
        f"<td class=\"n\">{num(None if r.error_rate is None else r.error_rate * 100, 1, '%')}</td></tr>"
        for r in runs
    )
    return f"""<div class="table-wrap"><table class="list" data-sortable><caption>Raw numbers, {h(scenario)}</caption>
<thead><tr><th scope="col" class="n">Concurrency</th><th scope="col" class="n">TTFT mean ms</th><th scope="col" class="n">TTFT p99 ms</th>
<th scope="col" class="n">ITL mean ms</th><th scope="col" class="n">ITL p99 ms</th><th scope="col" class="n">Output tok/s</th>
<th scope="col" class="n">Requests/s</th><th scope="col" class="n">E2E mean ms</th><th scope="col" class="n">Errors</th></tr></thead>
<tbody>{rows}</tbody></table></div>"""


def _reports(resource: Resource, results: Results) -> str:
    items = []
    folder = results_folder(resource.status)
    for label, where in results.reports:
        if where.startswith(("http://", "https://")):
            items.append(f'<li><a href="{h(where)}">{h(label)}</a></li>')
        elif folder is None or where != resource.status.get("resultsLocation"):
            items.append(f"<li>{h(label)}: <code>{h(where)}</code></li>")
    if isinstance(resource.status.get("results"), list) and resource.status["results"]:
        items.append(f'<li><a href="{_api_path(resource)}/results">Measured results and file list (JSON)</a></li>')
    if folder is not None:
        url = files_url(resource.version, q(resource.namespace), q(resource.name))
        links = "".join(f'<li><a href="{url}/{h(quote(rel))}">{h(rel)}</a> <span class="sub">{_size(size)}</span></li>'
                        for rel, size in report_files(folder))
        items.append(f"<li>genai-bench's files, from <code>{h(resource.status['resultsLocation'])}</code>"
                     f'<ul id="report-files">{links}</ul></li>')
    out = resource.spec.get("outputLocation") or {}
    if out.get("storageUri"):
        folder = resource.spec.get("resultFolderName") or ""
        items.append(f"<li>genai-bench's report folder: <code>{h(out['storageUri'])}{'/' + h(folder) if folder else ''}</code></li>")
    if not items:
        return ""
    return f'<section aria-labelledby="rep-h"><h2 id="rep-h">Report files</h2><ul>{"".join(items)}</ul></section>'


def _api_path(resource: Resource) -> str:
    return f"/apis/{resource.group}/{resource.version}/namespaces/{q(resource.namespace)}/{resource.plural}/{q(resource.name)}"


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB" if n < 1024**2 else f"{n / 1024**2:.1f} MiB"


def render_bench(resource: Resource, now: datetime) -> str:
    results = read_results(resource.status, resource.annotations)
    state = state_of(resource)
    active = state in BENCH_UNFINISHED
    sections = []
    if results.runs:
        if not results.sla.stated:
            sections.append('<p class="sub">No SLA is attached to this job (annotations <code>slaplan.io/ttft-ms</code> and '
                            "<code>slaplan.io/itl-ms</code> add the target lines).</p>")
        for scenario, runs in by_scenario(results.runs).items():
            slug = _slug(scenario)
            sections.append(
                f'<section aria-labelledby="sc-{slug}" class="scenario"><h2 id="sc-{slug}">Scenario {h(scenario)}</h2>'
                f"{_charts(scenario, runs, results.sla)}{_table(scenario, runs, results.sla)}</section>"
            )
    else:
        sections.append('<p class="empty" id="no-results">No measurements yet: this benchmark has not run. '
                        "The charts of TTFT, ITL and throughput against concurrency appear here once it has.</p>")
    api = _api_path(resource)
    body = f"""<nav class="crumbs" aria-label="Breadcrumb"><a href="/">Requests</a> › BenchmarkJob</nav>
<div class="title-row"><h1>{h(resource.name)}</h1>
<div class="title-meta">{state_badge(state)} <span class="sub">BenchmarkJob · namespace {h(resource.namespace)} ·
created {timestamp(resource.created_at, ago_from=now)} ·
<a href="{api}">JSON</a></span></div></div>
{_spec_section(resource)}
<section id="live" aria-label="Status and results"{' data-live="1"' if active else ""}>
<h2 class="visually-hidden">Status</h2>
{_status_section(resource, results)}
{_warnings(resource)}
{"".join(sections)}
{_reports(resource, results)}
</section>"""
    return page(f"BenchmarkJob {resource.name}", body)


