"""The home page: every DGDR and BenchmarkJob with its state, model, GPU, SLA, GPUs and age."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from api.dashboard.html import h, page, q, state_badge, timestamp
from api.dashboard.summaries import bench_summary, dgdr_summary, sla_text, state_of
from infra.resources import Resource
from planner.status import UNFINISHED as DGDR_UNFINISHED
from workers.lifecycle import BENCH_UNFINISHED

KINDS = {"dgdr": "DGDR", "benchmarkjob": "BenchmarkJob"}
STATE_CHOICES = ("", "active", "Pending", "Profiling", "Deploying", "Running", "Ready", "Completed", "Failed")
STATE_LABELS = {"": "Any state", "active": "In progress"}
MAX_ROWS = 500


class Filters(NamedTuple):
    state: str = ""
    kind: str = ""
    text: str = ""


class Row(NamedTuple):
    kind: str  # dgdr | benchmarkjob
    resource: Resource
    state: str
    active: bool
    model: str
    gpu: str
    sla: str
    plan: str  # the chosen plan's engines (a DGDR's), e.g. "1×TP8 + 1×TP4"
    gpus: Any
    href: str


def dgdr_href(r: Resource) -> str:
    return f"/ui/dgdr/{q(r.namespace)}/{q(r.name)}"


def bench_href(r: Resource) -> str:
    return f"/ui/benchmarkjob/{q(r.namespace)}/{q(r.name)}"


def rows(dgdrs: list[Resource], jobs: list[Resource]) -> list[Row]:
    """One row per resource, newest first."""
    out: list[Row] = []
    for r in dgdrs:
        s = dgdr_summary(r)
        state = state_of(r)
        out.append(Row("dgdr", r, state, state in DGDR_UNFINISHED, s["model"] or "", s["gpu"] or "",
                       sla_text(s["ttft_ms"], s["itl_ms"]), s["plan"] or "", s["gpus"], dgdr_href(r)))
    for r in jobs:
        s = bench_summary(r)
        state = state_of(r)
        out.append(Row("benchmarkjob", r, state, state in BENCH_UNFINISHED, s["model"] or s["target"], s["gpu"] or "",
                       "", "", s["gpus"], bench_href(r)))
    out.sort(key=lambda row: row.resource.created_at, reverse=True)
    return out


def keep(row: Row, f: Filters) -> bool:
    if f.kind and row.kind != f.kind:
        return False
    if f.state == "active" and not row.active:
        return False
    if f.state and f.state != "active" and row.state != f.state:
        return False
    if f.text:
        haystack = " ".join((row.resource.name, row.resource.namespace, row.model, row.gpu, row.state)).lower()
        return all(word in haystack for word in f.text.lower().split())
    return True


def _filter_form(f: Filters) -> str:
    states = "".join(
        f'<option value="{h(s)}"{" selected" if s == f.state else ""}>{h(STATE_LABELS.get(s, s))}</option>' for s in STATE_CHOICES
    )
    kinds = '<option value="">All kinds</option>' + "".join(
        f'<option value="{k}"{" selected" if k == f.kind else ""}>{h(v)}</option>' for k, v in KINDS.items()
    )
    return f"""<form class="filters" method="get" action="/" role="search" aria-label="Filter requests" data-autosubmit>
<div class="field"><label for="f-text">Search</label>
<input id="f-text" name="q" type="search" value="{h(f.text)}" placeholder="name, model, GPU…" autocomplete="off"></div>
<div class="field"><label for="f-state">State</label><select id="f-state" name="state">{states}</select></div>
<div class="field"><label for="f-kind">Kind</label><select id="f-kind" name="kind">{kinds}</select></div>
<div class="field actions"><button type="submit">Apply</button> <a href="/">Clear</a></div>
</form>"""


def _row_html(row: Row, now: datetime) -> str:
    r = row.resource
    gpus = "" if row.gpus is None else h(row.gpus)
    return (
        f'<tr data-kind="{row.kind}" data-state="{h(row.state)}">'
        f'<td><a href="{row.href}">{h(r.name)}</a><div class="sub">{h(r.namespace)}</div></td>'
        f"<td>{h(KINDS[row.kind])}</td><td>{state_badge(row.state)}</td>"
        f'<td class="wrap">{h(row.model)}</td><td>{h(row.gpu)}</td><td>{h(row.sla)}</td>'
        f'<td class="plan">{h(row.plan)}</td><td class="n">{gpus}</td><td>{timestamp(r.created_at, ago_from=now)}</td></tr>'
    )


def _counts(all_rows: list[Row]) -> str:
    active = sum(1 for r in all_rows if r.active)
    failed = sum(1 for r in all_rows if r.state == "Failed")
    done = sum(1 for r in all_rows if r.state in ("Ready", "Completed"))
    cards = [
        ("Requests", len(all_rows), "/"),
        ("In progress", active, "/?state=active"),
        ("Ready / completed", done, None),
        ("Failed", failed, "/?state=Failed"),
    ]
    items = "".join(
        f'<li><a href="{href}"><span class="count">{n}</span> {h(label)}</a></li>' if href else
        f'<li><span><span class="count">{n}</span> {h(label)}</span></li>'
        for label, n, href in cards
    )
    return f'<ul class="counts" aria-label="Summary">{items}</ul>'


def render_home(dgdrs: list[Resource], jobs: list[Resource], f: Filters, now: datetime) -> str:
    all_rows = rows(dgdrs, jobs)
    shown = [r for r in all_rows if keep(r, f)]
    active = any(r.active for r in all_rows)
    if shown:
        body_rows = "".join(_row_html(r, now) for r in shown[:MAX_ROWS])
        more = f'<p class="sub">Showing the newest {MAX_ROWS} of {len(shown)}.</p>' if len(shown) > MAX_ROWS else ""
        table = f"""<div class="table-wrap"><table class="list" data-sortable>
<caption class="visually-hidden">Requests, newest first</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Kind</th><th scope="col">State</th><th scope="col">Model</th>
<th scope="col">GPU</th><th scope="col">SLA</th><th scope="col">Plan</th><th scope="col" class="n">GPUs</th><th scope="col">Age</th></tr></thead>
<tbody>{body_rows}</tbody></table></div>{more}"""
    elif all_rows:
        table = '<p class="empty">Nothing matches these filters. <a href="/">Show everything</a>.</p>'
    else:
        table = ('<p class="empty">No requests yet. <a href="/ui/submit">Submit a DGDR or BenchmarkJob</a>, '
                 "or create one with <code>kubectl</code> or the REST API.</p>")
    refresh = ('<p class="live-note" role="status"><span class="spinner" aria-hidden="true"></span>'
               "Work in progress: this list refreshes by itself.</p>") if active else ""
    body = f"""<div class="title-row"><h1>Requests</h1><a class="button" href="/ui/submit">Submit a request</a></div>
{_filter_form(f)}
<section id="live" aria-label="Request list"{' data-live="1"' if active else ""} aria-live="polite">
{_counts(all_rows)}{refresh}{table}
</section>"""
    return page("Requests", body, current="home")
