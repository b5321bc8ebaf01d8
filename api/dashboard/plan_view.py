"""The planner's answer on the DGDR page: the chosen plan against the SLA, the Pareto chart of
output tokens/s per GPU against tokens/s per user, and the candidate table.

A candidate is feasible as the planner says (it meets the SLA within the GPU budget; for
results without its verdict, when its predicted mean TTFT and ITL are within the targets): the
table and the chart mark it by the same rule. In the chart's plane, ITL ≤ target is the same as
tokens/s per user ≥ 1000 / ITL target, which is the shaded region; TTFT is not an axis, so
candidates inside the region may still miss TTFT, or the budget (they are drawn hollow). A
candidate with an unbounded TTFT or ITL (``null`` when stored) is not drawn; the table says
"unbounded".
"""

from __future__ import annotations

from typing import Any

from api.dashboard.charts import Rule, Series, chart, figure
from api.dashboard.documents import candidate, is_number
from api.dashboard.html import dl, h, num


def shape(plan: dict[str, Any]) -> str:
    """``2P3D`` for disaggregated plans, ``3× aggregated`` otherwise."""
    engines = plan.get("engines") or []
    by_role = {e.get("role"): e for e in engines}
    if plan.get("mode") == "disagg":
        return f"{(by_role.get('prefill') or {}).get('replicas', '?')}P{(by_role.get('decode') or {}).get('replicas', '?')}D"
    replicas = sum(int(e.get("replicas") or 0) for e in engines)
    return f"{replicas}× aggregated"


def parallelism(engine: dict[str, Any]) -> str:
    parts = [f"TP{engine.get('tp', 1)}"]
    for key in ("pp", "dp", "ep"):
        if int(engine.get(key) or 1) > 1:
            parts.append(f"{key.upper()}{engine[key]}")
    return " ".join(parts)


def engines_text(plan: dict[str, Any]) -> str:
    return "; ".join(
        f"{e.get('role')}: {e.get('replicas')}× {parallelism(e)}" for e in plan.get("engines") or []
    )


def meets(plan: dict[str, Any], sla: dict[str, Any]) -> bool | None:
    """Whether the predicted mean TTFT and ITL are within the targets (None if unknown)."""
    p = plan.get("predicted") or {}
    checks = []
    for key in ("ttftMs", "itlMs"):
        target, value = sla.get(key), p.get(key)
        if target is None:
            continue
        if value is None:
            return False
        checks.append(value <= target * (1 + 1e-9))
    return all(checks) if checks else None


def feasible(plan: dict[str, Any], sla: dict[str, Any]) -> bool | None:
    """The planner's verdict on ``plan`` when stored, else whether it meets the SLA (None if unknown)."""
    verdict = plan.get("feasible")
    return meets(plan, sla) if verdict is None else verdict


def _time(value: Any, digits: int) -> str:
    """A predicted time of a stored plan: ``null`` (absent once conformed) is an unbounded one."""
    return "unbounded" if value is None else num(value, digits)


def _verdict(value: Any, target: Any, *, higher_is_better: bool = False) -> str:
    if value is None or target is None:
        return '<td class="verdict">—</td>'
    ok = value >= target if higher_is_better else value <= target
    word = "meets" if ok else "misses"
    return f'<td class="verdict verdict-{"ok" if ok else "bad"}">{"✓" if ok else "✗"} {word}</td>'


def chosen_section(doc: dict[str, Any]) -> str:
    chosen = doc.get("chosen")
    sla = doc.get("sla") or {}
    if not chosen:
        closest = doc.get("closest")
        named = ""
        if closest:
            p = closest.get("predicted") or {}
            named = (f'<p id="closest">The configuration it names: {h(shape(closest))} ({h(engines_text(closest))}), '
                     f"{h(closest.get('totalGpus'))} GPUs, TTFT {_time(p.get('ttftMs'), 1)} ms, "
                     f"ITL {_time(p.get('itlMs'), 2)} ms.</p>")
        return (
            '<section aria-labelledby="plan-h"><h2 id="plan-h">Chosen plan</h2>'
            f'<p class="notice notice-bad">No configuration meets the SLA: {h(doc.get("reason") or "no candidate is feasible")}.'
            f"</p>{named}</section>"
        )
    p = chosen.get("predicted") or {}
    engines = "".join(
        f"<tr><th scope=\"row\">{h(e.get('role'))}</th><td>{h(parallelism(e))}</td><td class=\"n\">{h(e.get('replicas'))}</td>"
        f"<td class=\"n\">{h(e.get('gpusPerEngine'))}</td><td class=\"n\">{h(e.get('nodesPerEngine'))}</td>"
        f"<td class=\"n\">{h(e.get('maxBatch'))}</td><td class=\"n\">{num(e.get('maxNumTokens'), 0)}</td></tr>"
        for e in chosen.get("engines") or []
    )
    mode = "Disaggregated prefill/decode" if chosen.get("mode") == "disagg" else "Aggregated"
    facts = dl([
        ("Mode", h(f"{mode} ({shape(chosen)})")),
        ("Backend", h(chosen.get("backend"))),
        ("GPU", h(f"{chosen.get('totalGpus')} × {chosen.get('gpu')}")),
        ("Precision", h(chosen.get("precision"))),
        ("Cost", num(chosen.get("costPerHour"), 2, "$/h") if chosen.get("costPerHour") is not None else ""),
        ("Margin", _margin(doc.get("margin") or {})),
    ])
    user_target = 1000.0 / sla["itlMs"] if sla.get("itlMs") else None
    ttft_extra = f" (p90 {num(p.get('ttftP90Ms'), 0)}, p99 {num(p.get('ttftP99Ms'), 0)})" if p.get("ttftP90Ms") is not None else ""
    rows = [
        ("Time to first token (mean)", num(p.get("ttftMs"), 1, "ms") + ttft_extra, num(sla.get("ttftMs"), 0, "ms"),
         _verdict(p.get("ttftMs"), sla.get("ttftMs"))),
        ("Inter-token latency (mean)", num(p.get("itlMs"), 2, "ms"), num(sla.get("itlMs"), 1, "ms"),
         _verdict(p.get("itlMs"), sla.get("itlMs"))),
        ("Tokens/s per user", num(p.get("tokPerSecPerUser"), 1), f"≥ {num(user_target, 1)}" if user_target else "—",
         _verdict(p.get("tokPerSecPerUser"), user_target, higher_is_better=True)),
        ("Output tokens/s per GPU", num(p.get("outputTokPerSecPerGpu"), 0), "—", '<td class="verdict">—</td>'),
        ("Output tokens/s, whole deployment",
         num((p.get("outputTokPerSecPerGpu") or 0) * (chosen.get("totalGpus") or 0), 0) if p.get("outputTokPerSecPerGpu") else "—",
         "—", '<td class="verdict">—</td>'),
        ("Requests/s", num(p.get("requestsPerSec"), 2),
         num(sla.get("requestRate"), 2) if sla.get("requestRate") else "—", '<td class="verdict">—</td>'),
        ("Requests in flight", num(p.get("concurrency"), 0),
         num(sla.get("concurrency"), 0) if sla.get("concurrency") else "—", '<td class="verdict">—</td>'),
    ]
    predicted = "".join(f'<tr><th scope="row">{h(a)}</th><td class="n">{b}</td><td class="n">{c}</td>{d}</tr>' for a, b, c, d in rows)
    return f"""<section aria-labelledby="plan-h"><h2 id="plan-h">Chosen plan</h2>
{facts}
<div class="table-wrap"><table id="predicted"><caption>Predicted against the SLA</caption>
<thead><tr><th scope="col">Metric</th><th scope="col" class="n">Predicted</th><th scope="col" class="n">Target</th><th scope="col">Verdict</th></tr></thead>
<tbody>{predicted}</tbody></table></div>
{_parts_section(p)}
<div class="table-wrap"><table><caption>Engines</caption>
<thead><tr><th scope="col">Role</th><th scope="col">Parallelism</th><th scope="col" class="n">Replicas</th><th scope="col" class="n">GPUs / engine</th>
<th scope="col" class="n">Nodes / engine</th><th scope="col" class="n">Max batch</th><th scope="col" class="n">Tokens / step</th></tr></thead>
<tbody>{engines}</tbody></table></div>
</section>"""


def _margin(m: dict[str, Any]) -> str:
    """The headroom the chosen plan keeps, in % of each target ('' when not stored)."""
    if "ttftPct" not in m or "itlPct" not in m:
        return ""
    return h(f"TTFT {m.get('ttftBasis', 'mean')} {m['ttftPct']:.0f}% under its target, ITL {m['itlPct']:.0f}% under")


# The stored keys (camelCase field names of profiler.model.config's TtftParts/ItlParts) in words, as the CLI says them.
_TTFT_PARTS = (("frontend", "frontend"), ("prefill", "prefill pass"), ("kvTransfer", "KV transfer"),
               ("firstStep", "first decode step"), ("queueing", "queue wait"),
               ("burst", "wait behind other clients' prompts"))
_ITL_PARTS = (("decodeStep", "decode step"), ("prefillInterference", "prefill interference"))


def _parts_section(predicted: dict[str, Any]) -> str:
    """Where the mean TTFT and ITL go, as the performance model splits them ('' when not stored)."""
    lines = []
    for label, key, names, digits in (("Time to first token", "ttftPartsMs", _TTFT_PARTS, 0),
                                      ("Inter-token latency", "itlPartsMs", _ITL_PARTS, 2)):
        parts = predicted.get(key) or {}
        shown = [f"{name} {num(parts.get(k), digits, 'ms')}" for k, name in names if (parts.get(k) or 0) > 0]
        if shown:
            lines.append(f"<li>{h(label)}: {' + '.join(shown)}</li>")
    return f'<ul id="time-parts" aria-label="Where the time goes">{"".join(lines)}</ul>' if lines else ""


def _tip(plan: dict[str, Any]) -> str:
    p = plan.get("predicted") or {}
    return (
        f"{shape(plan)} {engines_text(plan)} · {plan.get('totalGpus')} GPUs · "
        f"{num(p.get('tokPerSecPerUser'), 1)} tok/s/user, {num(p.get('outputTokPerSecPerGpu'), 0)} tok/s/GPU, "
        f"TTFT {num(p.get('ttftMs'), 0)} ms, ITL {num(p.get('itlMs'), 2)} ms"
    )


def _xy(plan: dict[str, Any]) -> tuple[float, float] | None:
    """The chart point of ``plan``; None when a prediction is missing or unbounded (stored as null)."""
    p = plan.get("predicted") or {}
    x, y = p.get("tokPerSecPerUser"), p.get("outputTokPerSecPerGpu")
    if all(is_number(p.get(k)) for k in ("ttftMs", "itlMs")) and is_number(x) and is_number(y):
        return float(x), float(y)
    return None


def pareto_section(doc: dict[str, Any]) -> str:
    sla = doc.get("sla") or {}
    pareto = doc.get("pareto") or []
    chosen = doc.get("chosen")
    good, bad = [], []
    for plan in pareto:
        xy = _xy(plan)
        if xy is None:
            continue
        (good if feasible(plan, sla) is not False else bad).append((*xy, _tip(plan)))
    line = Series("Pareto front", [*good, *bad], tone="a", joined=True, radius=0)
    series = [line, Series("Pareto candidate, feasible", good, tone="a"), Series("Pareto candidate, not feasible", bad, tone="miss")]
    legend = [("a", "Pareto candidate, feasible: meets the SLA within the budget"),
              ("miss", "Pareto candidate, not feasible: misses the SLA (e.g. TTFT) or the GPU budget")]
    chosen_xy = _xy(chosen) if chosen else None
    if chosen_xy:
        series.append(Series("Chosen plan", [(*chosen_xy, "Chosen: " + _tip(chosen))], tone="chosen", radius=7.5))
        legend.append(("chosen", "Chosen plan"))
    itl = sla.get("itlMs")
    shade = 1000.0 / itl if itl else None
    if shade:
        legend.append(("region", f"SLA region: ITL ≤ {itl:g} ms (≥ {shade:.1f} tok/s per user)"))
    if not good and not bad and not chosen_xy:
        return ('<section aria-labelledby="pareto-h"><h2 id="pareto-h">Pareto front</h2>'
                '<p class="empty">No candidate has finite predictions to chart.</p></section>')
    svg = chart(
        chart_id="pareto-chart",
        title="Output tokens/s per GPU against tokens/s per user",
        description=f"{len(good) + len(bad)} Pareto-optimal candidates"
        + (f"; the chosen plan is highlighted; tokens/s per user at or above {shade:.1f} meets the ITL target" if shade else ""),
        x_label="tokens/s per user (interactivity)",
        y_label="output tokens/s per GPU",
        series=series,
        rules=(Rule("x", shade, f"ITL {itl:g} ms"),) if shade else (),
        shade_x_from=shade,
        shade_label="meets ITL" if shade else "",
    )
    caption = ("Each point is a configuration no other beats on both axes. Right is faster for each user, "
               "up is cheaper per token. Hover or focus a point for its configuration.")
    return f'<section aria-labelledby="pareto-h"><h2 id="pareto-h">Pareto front</h2>{figure(svg, caption, legend)}</section>'


def candidate_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every evaluated candidate as a plan-like dict with ``pareto`` and ``chosen`` marks, chosen
    first, then the Pareto ones, then feasible ones by GPUs. Results stored before the planner kept
    every candidate give only their Pareto set. ``doc`` is conformed (``summaries.results``)."""
    table = doc.get("candidates") or {}
    columns, rows = table.get("columns") or [], table.get("rows") or []
    if not rows:
        chosen = doc.get("chosen") or {}
        return [
            {**plan, "pareto": True,
             "chosen": bool(chosen) and plan.get("engines") == chosen.get("engines") and plan.get("mode") == chosen.get("mode")}
            for plan in doc.get("pareto") or []
        ]
    out = [candidate(dict(zip(columns, row))) for row in rows]
    return sorted(out, key=lambda c: (not c.get("chosen"), not c.get("pareto"), c.get("feasible") is False, c.get("totalGpus") or 0))


def _feasible_cell(plan: dict[str, Any], sla: dict[str, Any]) -> tuple[str, str]:
    """(sort value, html) of the Feasible column: the planner's verdict, or the SLA check."""
    ok = feasible(plan, sla)
    if ok is None:
        return "", "—"
    if ok:
        return "1", '<span class="verdict-ok">✓ yes</span>'
    reason = plan.get("reason") or "misses the SLA"
    return "0", f'<span class="verdict-bad">✗ no</span> <span class="sub">{h(reason)}</span>'


def candidates_section(doc: dict[str, Any], *, feasible_only: bool = False, action: str = "") -> str:
    """The sortable table of every evaluated candidate; ``feasible_only`` hides the others."""
    sla = doc.get("sla") or {}
    plans = candidate_rows(doc)
    if not plans:
        return ""
    shown = [p for p in plans if feasible(p, sla) is not False] if feasible_only else plans
    body = []
    for i, plan in enumerate(shown, 1):
        p = plan.get("predicted") or {}
        feasible_value, feasible_html = _feasible_cell(plan, sla)
        marks = [m for m, on in (("Chosen", plan.get("chosen")), ("Pareto", plan.get("pareto"))) if on]
        cells = [
            (i, str(i)),
            (plan.get("mode"), h(plan.get("mode"))),
            (shape(plan), h(shape(plan))),
            (engines_text(plan), h(engines_text(plan))),
            (plan.get("totalGpus"), h(plan.get("totalGpus"))),
            (p.get("ttftMs"), _time(p.get("ttftMs"), 1)),
            (p.get("itlMs"), _time(p.get("itlMs"), 2)),
            (p.get("tokPerSecPerUser"), num(p.get("tokPerSecPerUser"), 1)),
            (p.get("outputTokPerSecPerGpu"), num(p.get("outputTokPerSecPerGpu"), 0)),
            (p.get("requestsPerSec"), num(p.get("requestsPerSec"), 2)),
            (feasible_value, feasible_html),
            (" ".join(marks), " ".join(f'<span class="badge badge-{"chosen" if m == "Chosen" else "muted"}">{m}</span>' for m in marks)),
        ]
        tds = "".join(
            f'<td{" class=n" if isinstance(v, (int, float)) else ""} data-value="{h(v if v is not None else "")}">{text}</td>'
            for v, text in cells
        )
        classes = " ".join(c for c, on in (("is-chosen", plan.get("chosen")), ("is-pareto", plan.get("pareto"))) if on)
        mark = (f' class="{classes}"' if classes else "") + (' aria-label="chosen plan"' if plan.get("chosen") else "")
        body.append(f'<tr{mark} data-feasible="{feasible_value}">{tds}</tr>')
    headers = ["#", "Mode", "Shape", "Engines", "GPUs", "TTFT ms", "ITL ms", "tok/s/user", "tok/s/GPU", "req/s", "Feasible", "Marks"]
    numeric = {"#", "GPUs", "TTFT ms", "ITL ms", "tok/s/user", "tok/s/GPU", "req/s"}
    ths = "".join(
        f'<th scope="col" aria-sort="none"{" class=n" if t in numeric else ""}>'
        f'<button type="button" class="sort" data-type="{"num" if t in numeric else "text"}">{h(t)}</button></th>'
        for t in headers
    )
    total = (doc.get("candidates") or {}).get("total") or doc.get("evaluated") or len(plans)
    omitted = (doc.get("candidates") or {}).get("omitted") or 0
    pareto_n = sum(1 for p in plans if p.get("pareto"))
    summary = f"{len(shown)} shown of {total} evaluated; {pareto_n} on the Pareto front"
    if omitted:
        summary += f"; {omitted} far from the SLA not stored"
    checked = " checked" if feasible_only else ""
    return f"""<section aria-labelledby="cand-h"><h2 id="cand-h">Candidates</h2>
<p class="sub">{h(summary)}. Sort by any column; the chosen plan is highlighted and marked, Pareto-optimal ones are marked.</p>
<form class="filters" method="get" action="{h(action)}" data-autosubmit aria-label="Filter candidates">
<div class="field actions"><label><input type="checkbox" name="feasible" value="1" id="feasible-only"{checked}> Feasible only</label>
<button type="submit">Apply</button></div></form>
<div class="table-wrap"><table class="list" id="candidates" data-sortable>
<caption class="visually-hidden">Evaluated candidates, sortable by column</caption>
<thead><tr>{ths}</tr></thead><tbody>{"".join(body)}</tbody></table></div></section>"""


def assumptions_section(doc: dict[str, Any]) -> str:
    items = "".join(f"<li>{h(a)}</li>" for a in doc.get("assumptions") or [])
    if not items:
        return ""
    return f'<section aria-labelledby="assume-h"><h2 id="assume-h">Assumptions</h2><ul class="assumptions">{items}</ul></section>'
