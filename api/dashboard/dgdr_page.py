"""The page of one DynamoGraphDeploymentRequest: request and SLA, what happened (in plain
words), the chosen plan, the Pareto chart, the candidates and the manifests for every target."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from api.dashboard.html import dl, h, num, page, q, state_badge, timestamp
from api.dashboard.online_view import online_section
from api.dashboard.plan_view import assumptions_section, candidates_section, chosen_section, pareto_section, shape
from api.dashboard.summaries import dgdr_summary, results_reference, state_of
from api.dashboard.targets import TARGET_LABELS, TARGETS, render_target
from infra.resources import Resource
from planner.conditions import Condition, read_conditions
from planner.results import ResultsParts
from planner.status import UNFINISHED as DGDR_UNFINISHED

STEP_NAMES = {
    "Validation": "Request validated",
    "Profiling": "Profiling",
    "SpecGenerated": "Deployment generated",
    "DeploymentReady": "Deployment ready",
}
IN_PROGRESS = {"ProfilingRunning", "DeploymentInProgress"}
NOT_APPLICABLE = {"AutoApplyDisabled", "NoClusterConfigured", "NoDeployment", "DeploymentDeleted", "NotStarted"}


def step_outcome(cond: Condition) -> tuple[str, str]:
    """(tone, words) for one condition: done, in progress, waiting, skipped or failed."""
    status, reason = cond.status, cond.reason
    if status == "True":
        return "ok", "✓ Done"
    if status == "Unknown":
        return ("busy", "… In progress") if reason in IN_PROGRESS else ("wait", "Waiting")
    if reason in IN_PROGRESS:
        return "busy", "… In progress"
    if reason in NOT_APPLICABLE:
        return "muted", "— Not done"
    return "bad", "✗ Failed"


def headline(resource: Resource, doc: ResultsParts | None) -> tuple[str, str]:
    """(tone, sentence) saying where the request stands; ``doc``: the readable results."""
    state = state_of(resource)
    steps = read_conditions(resource.status)
    if state == "Failed":
        failed = next((c for c in steps if step_outcome(c)[0] == "bad"), None)
        if failed is None:
            return "bad", "The request failed."
        step = STEP_NAMES.get(failed.type, failed.type)
        return "bad", f"Failed at “{step}”: {failed.message or failed.reason}"
    if state == "Pending":
        return "wait", "Waiting for a worker to pick this request up."
    if state == "Profiling":
        running = next((c.message for c in steps if c.type == "Profiling"), "")
        return "busy", f"Profiling: {running or 'searching for the cheapest configuration that meets the SLA'}…"
    if state == "Deploying":
        return "busy", "Applying the deployment and waiting for it to become ready…"
    if state == "Ready":
        chosen = doc.chosen if doc is not None else None
        what = (f" The planner chose {shape(chosen)} on {num(chosen.total_gpus, 0)} {chosen.gpu} GPUs."
                if chosen is not None else "")
        deploy = next((c for c in steps if c.type == "DeploymentReady"), None)
        extra = f" {deploy.message[0].upper()}{deploy.message[1:]}." if deploy and deploy.status != "True" and deploy.message else ""
        return "ok", f"Ready.{what}{extra}"
    return "muted", f"State: {state}."


def _conditions_table(resource: Resource) -> str:
    rows = []
    for c in read_conditions(resource.status):
        tone, words = step_outcome(c)
        rows.append(
            f"<tr><th scope=\"row\">{h(STEP_NAMES.get(c.type, c.type))}</th>"
            f'<td><span class="badge badge-{tone}">{h(words)}</span></td>'
            f"<td class=\"wrap\">{h(c.message)}<div class=\"sub\">{h(c.reason)}</div></td>"
            f"<td>{timestamp(c.last_transition_time)}</td></tr>"
        )
    if not rows:
        return '<p class="empty">No steps recorded yet.</p>'
    return f"""<div class="table-wrap"><table id="conditions"><caption>Steps</caption>
<thead><tr><th scope="col">Step</th><th scope="col">Outcome</th><th scope="col">Details</th><th scope="col">Since</th></tr></thead>
<tbody>{"".join(rows)}</tbody></table></div>"""


def _request_section(resource: Resource, s: dict[str, Any]) -> str:
    from planner.request import profiling_label  # on use: the API starts without the planner

    spec = resource.spec
    load = ""
    if s["concurrency"]:
        load = f"{s['concurrency']} concurrent clients"
    elif s["request_rate"]:
        load = f"{s['request_rate']} requests/s"
    hardware = spec.get("hardware") or {}
    gpu_spec = spec.get("gpu") or {}
    bounds = ""
    if gpu_spec.get("minNumGPUsPerEngine") or gpu_spec.get("maxNumGPUsPerEngine"):
        bounds = f"{gpu_spec.get('minNumGPUsPerEngine', 1)}–{gpu_spec.get('maxNumGPUsPerEngine', '?')} GPUs per engine"
    facts = dl([
        ("Model", h(s["model"])),
        ("Backend", h(s["backend"])),
        ("GPU type", h(s["gpu"])),
        ("Engine size", h(bounds)),
        ("GPU budget", h(f"{hardware['totalGpus']} GPUs") if hardware.get("totalGpus") else ""),
        ("Input / output tokens", h(f"{s['isl']} / {s['osl']}") if s["isl"] or s["osl"] else ""),
        ("Load", h(load or "not stated: one deployment unit sized for the best goodput per GPU")),
        ("Profiling asked", h(profiling_label(s["online"]))),
        ("Profiling ran", h(profiling_label(s["results"].online is not None)) if s["results"] else ""),
        ("Apply automatically", h("yes" if spec.get("autoApply") else "no")),
    ])
    sla = dl([
        ("Time to first token", num(s["ttft_ms"], 0, "ms") if s["ttft_ms"] is not None else ""),
        ("Inter-token latency", num(s["itl_ms"], 1, "ms") if s["itl_ms"] is not None else ""),
        ("End-to-end latency", num(s["e2e_ms"], 0, "ms") if s["e2e_ms"] is not None else ""),
        ("Tokens/s per user at least", num(1000 / s["itl_ms"], 1) if s["itl_ms"] else ""),
    ])
    return f"""<section aria-labelledby="req-h" class="grid2">
<div><h2 id="req-h">Request</h2>{facts}</div>
<div><h2 id="sla-h">Service-level objective</h2>{sla}</div>
</section>"""


def manifests_section(resource: Resource) -> str:
    base = f"/ui/dgdr/{q(resource.namespace)}/{q(resource.name)}/manifests"
    rest = (f"/apis/{resource.group}/{resource.version}/namespaces/{q(resource.namespace)}/{resource.plural}/"
            f"{q(resource.name)}/manifests?target=")
    tabs, panels = [], []
    for i, target in enumerate(TARGETS):
        r = render_target(resource, target)
        selected = "true" if i == 0 else "false"
        tabs.append(
            f'<button type="button" role="tab" id="tab-{target}" aria-controls="panel-{target}" aria-selected="{selected}"'
            f"{'' if i == 0 else ' tabindex=-1'}>{h(target)}</button>"
        )
        filename = f"{resource.name}.{target}.yaml"
        if r.text:
            note = f'<p class="notice notice-wait">{h(r.note)}</p>' if r.note else ""
            content = (
                f'{note}<div class="code-actions"><button type="button" class="copy" data-copy="code-{target}">Copy</button> '
                f'<a class="button" href="{base}/{target}" download="{h(filename)}">Download {h(filename)}</a>'
                f'<a href="{rest}{target}">REST API</a>'
                f'<span class="copied" role="status" aria-live="polite"></span></div>'
                f'<pre class="code" tabindex="0" aria-label="{h(TARGET_LABELS[target])} YAML"><code id="code-{target}">{h(r.text)}</code></pre>'
            )
        else:
            content = f'<p class="notice notice-muted">{h(r.problem)}</p>'
        panels.append(
            f'<div role="tabpanel" id="panel-{target}" aria-labelledby="tab-{target}" class="tabpanel"'
            f'{"" if i == 0 else " hidden"}><h3>{h(TARGET_LABELS[target])}</h3>{content}</div>'
        )
    return f"""<section aria-labelledby="man-h"><h2 id="man-h">Manifests</h2>
<p class="sub">The chosen plan for each deployment target, ready for <code>kubectl apply -f</code>.</p>
<div class="tabs" data-tabs><div role="tablist" aria-label="Deployment targets">{"".join(tabs)}</div>{"".join(panels)}</div></section>"""


def render_dgdr(resource: Resource, now: datetime, *, feasible_only: bool = False) -> str:
    """The page; ``feasible_only`` keeps only the feasible candidates in the table."""
    s = dgdr_summary(resource)
    doc = s["results"]
    state = state_of(resource)
    active = state in DGDR_UNFINISHED
    tone, sentence = headline(resource, doc)
    api = f"/apis/{resource.group}/{resource.version}/namespaces/{q(resource.namespace)}/{resource.plural}/{q(resource.name)}"
    spinner = '<span class="spinner" aria-hidden="true"></span>' if active else ""
    parts = [
        f'<p class="notice notice-{tone}" id="headline">{spinner}{h(sentence)}</p>',
        _conditions_table(resource),
    ]
    if doc:
        page_url = f"/ui/dgdr/{q(resource.namespace)}/{q(resource.name)}"
        parts += [chosen_section(doc), pareto_section(doc), candidates_section(doc, feasible_only=feasible_only, action=page_url)]
        if doc.chosen is not None:
            parts.append(manifests_section(resource))
        if doc.online is not None:
            parts.append(online_section(doc.online))
        parts.append(assumptions_section(doc))
    elif reference := results_reference(resource):
        parts.append(f'<p class="notice notice-muted">Profiling results are stored elsewhere: {h(reference)}</p>')
    elif active:
        parts.append('<p class="empty">The plan, the Pareto chart and the manifests appear here when profiling finishes.</p>')
    body = f"""<nav class="crumbs" aria-label="Breadcrumb"><a href="/">Requests</a> › DGDR</nav>
<div class="title-row"><h1>{h(resource.name)}</h1>
<div class="title-meta">{state_badge(state)} <span class="sub">DynamoGraphDeploymentRequest · namespace {h(resource.namespace)} ·
created {timestamp(resource.created_at, ago_from=now)} ·
<a href="{api}">JSON</a></span></div></div>
{_request_section(resource, s)}
<section id="live" aria-label="Status and results"{' data-live="1"' if active else ""}>
<h2 class="visually-hidden">Status</h2>
<div aria-live="polite">{parts[0]}</div>
{"".join(parts[1:])}
</section>"""
    return page(f"DGDR {resource.name}", body)
