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

import math

from api.dashboard.charts import Rule, Series, chart, figure
from api.dashboard.html import dl, h, num
from planner.candidate_table import CandidateRow, EngineCells
from planner.choice import margin_text
from planner.results import ResultsParts, Sla
from planner.types import Engine, Plan
from profiler.model import PART_LABELS, ItlParts, Prediction, TtftParts


def shape(plan: Plan | CandidateRow) -> str:
    """``2P3D`` for disaggregated plans, ``1×TP8 + 1×TP4`` for a mix of aggregated engine shapes,
    ``3× aggregated`` otherwise."""
    by_role = {e.role: e for e in plan.engines}
    if plan.mode == "disagg":
        return f"{_replicas(by_role.get('prefill'))}P{_replicas(by_role.get('decode'))}D"
    if len(plan.engines) > 1:
        return plan_label(plan)
    return f"{sum(e.replicas for e in plan.engines)}× aggregated"


def plan_label(plan: Plan | CandidateRow) -> str:
    """Every engine of ``plan`` with its replicas and parallelism: ``1×TP8 + 1×TP4`` (a mix),
    ``2×TP8``, ``P1×TP4 + D2×TP8`` (disaggregated)."""
    return " + ".join(("" if e.role == "aggregated" else e.role[0].upper())
                      + f"{e.replicas}×{parallelism(e).replace(' ', '')}" for e in plan.engines)


def _replicas(engine: Engine | EngineCells | None) -> int | str:
    return "?" if engine is None else engine.replicas


def parallelism(engine: Engine | EngineCells) -> str:
    parts = [f"TP{engine.tp}"]
    parts += [f"{name}{degree}" for name, degree in (("PP", engine.pp), ("DP", engine.dp), ("EP", engine.ep)) if degree > 1]
    return " ".join(parts)


def engines_text(plan: Plan | CandidateRow) -> str:
    return "; ".join(f"{e.role}: {e.replicas}× {parallelism(e)}" for e in plan.engines)


def meets(plan: Plan, sla: Sla | None) -> bool | None:
    """Whether the predicted mean TTFT and ITL are within the targets (None if unknown)."""
    if sla is None:
        return None
    p = plan.predicted
    return p.ttft_ms <= sla.ttft_ms * (1 + 1e-9) and p.itl_ms <= sla.itl_ms * (1 + 1e-9)


def _finite(x: float | None) -> float | None:
    """``x`` when it is a finite number (an unbounded prediction reads as unknown)."""
    return x if x is not None and math.isfinite(x) else None


def _time(value: float | None, digits: int) -> str:
    """A predicted time: "unbounded" for an overloaded queue's (stored as null)."""
    return "unbounded" if value is not None and not math.isfinite(value) else num(value, digits)


def _verdict(value: float | None, target: float | None, *, higher_is_better: bool = False) -> str:
    if value is None or target is None:
        return '<td class="verdict">—</td>'
    ok = value >= target if higher_is_better else value <= target
    word = "meets" if ok else "misses"
    return f'<td class="verdict verdict-{"ok" if ok else "bad"}">{"✓" if ok else "✗"} {word}</td>'


def chosen_section(doc: ResultsParts) -> str:
    chosen, sla = doc.chosen, doc.sla
    if chosen is None and doc.feasible:
        return ('<section aria-labelledby="plan-h"><h2 id="plan-h">Chosen plan</h2>'
                '<p class="notice notice-muted">A plan was chosen, but it is stored in a shape this page cannot read.</p>'
                "</section>")
    if chosen is None:
        closest, named = doc.closest, ""
        if closest is not None:
            c = closest.predicted
            named = (f'<p id="closest">The configuration it names: {h(shape(closest))} ({h(engines_text(closest))}), '
                     f"{h(closest.total_gpus)} GPUs, TTFT {_time(c.ttft_ms, 1)} ms, ITL {_time(c.itl_ms, 2)} ms.</p>")
        return (
            '<section aria-labelledby="plan-h"><h2 id="plan-h">Chosen plan</h2>'
            f'<p class="notice notice-bad">No configuration meets the SLA: {h(doc.reason or "no candidate is feasible")}.'
            f"</p>{named}</section>"
        )
    p = chosen.predicted
    engines = "".join(
        f'<tr><th scope="row">{h(e.role)}</th><td>{h(parallelism(e))}</td><td class="n">{h(e.replicas)}</td>'
        f'<td class="n">{h(e.gpus)}</td><td class="n">{h(e.nodes)}</td>'
        f'<td class="n">{h(e.max_batch)}</td><td class="n">{num(e.max_num_tokens, 0)}</td></tr>'
        for e in chosen.engines
    )
    mode = ("Disaggregated prefill/decode" if chosen.mode == "disagg"
            else "Mix of aggregated engine shapes" if len(chosen.engines) > 1 else "Aggregated")
    facts = dl([
        ("Mode", h(f"{mode} ({shape(chosen)})")),
        ("Backend", h(chosen.backend)),
        ("GPU", h(f"{chosen.total_gpus} × {chosen.gpu}")),
        ("Precision", h(chosen.precision)),
        ("Cost", num(chosen.cost_per_hour, 2, "$/h") if chosen.cost_per_hour is not None else ""),
        ("Margin", h(margin_text(doc.margin)) if doc.margin is not None else ""),
    ])
    ttft_target, itl_target = (sla.ttft_ms, sla.itl_ms) if sla is not None else (None, None)
    user_target = 1000.0 / itl_target if itl_target else None
    ttft_extra = f" (p90 {num(p.ttft_p90_ms, 0)}, p99 {num(p.ttft_p99_ms, 0)})" if _finite(p.ttft_p90_ms) is not None else ""
    per_gpu = _finite(p.output_tok_s_per_gpu)
    rows = [
        ("Time to first token (mean)", num(p.ttft_ms, 1, "ms") + ttft_extra, num(ttft_target, 0, "ms"),
         _verdict(_finite(p.ttft_ms), ttft_target)),
        ("Inter-token latency (mean)", num(p.itl_ms, 2, "ms"), num(itl_target, 1, "ms"), _verdict(_finite(p.itl_ms), itl_target)),
        ("Tokens/s per user", num(p.tok_s_per_user, 1), f"≥ {num(user_target, 1)}" if user_target else "—",
         _verdict(_finite(p.tok_s_per_user), user_target, higher_is_better=True)),
        ("Output tokens/s per GPU", num(per_gpu, 0), "—", '<td class="verdict">—</td>'),
        ("Output tokens/s, whole deployment", num(per_gpu * chosen.total_gpus, 0) if per_gpu else "—",
         "—", '<td class="verdict">—</td>'),
        ("Requests/s", num(p.requests_per_s, 2),
         num(sla.request_rate, 2) if sla is not None and sla.request_rate else "—", '<td class="verdict">—</td>'),
        ("Requests in flight", num(p.concurrency, 0),
         num(sla.concurrency, 0) if sla is not None and sla.concurrency else "—", '<td class="verdict">—</td>'),
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


def _parts_section(predicted: Prediction) -> str:
    """Where the mean TTFT and ITL go, as the performance model splits them ('' when not stored);
    each part named as the CLI names it, unbounded parts left out."""
    lines = []
    for label, parts, digits in (("Time to first token", predicted.ttft_parts, 0),
                                 ("Inter-token latency", predicted.itl_parts, 2)):
        shown = [f"{PART_LABELS[name]} {num(ms, digits, 'ms')}" for name, ms in _parts(parts) if (_finite(ms) or 0) > 0]
        if shown:
            lines.append(f"<li>{h(label)}: {' + '.join(shown)}</li>")
    return f'<ul id="time-parts" aria-label="Where the time goes">{"".join(lines)}</ul>' if lines else ""


def _parts(parts: TtftParts | ItlParts | None) -> list[tuple[str, float]]:
    """(field name, ms) of each part, in the model's order."""
    return list(dict(parts).items()) if parts is not None else []


def _tip(plan: Plan) -> str:
    p = plan.predicted
    return (
        f"{shape(plan)} {engines_text(plan)} · {plan.total_gpus} GPUs · "
        f"{num(p.tok_s_per_user, 1)} tok/s/user, {num(p.output_tok_s_per_gpu, 0)} tok/s/GPU, "
        f"TTFT {num(p.ttft_ms, 0)} ms, ITL {num(p.itl_ms, 2)} ms"
    )


def _xy(plan: Plan) -> tuple[float, float] | None:
    """The chart point of ``plan``; None when a prediction is unbounded (no point to draw)."""
    p = plan.predicted
    x, y = _finite(p.tok_s_per_user), _finite(p.output_tok_s_per_gpu)
    bounded = _finite(p.ttft_ms) is not None and _finite(p.itl_ms) is not None
    return (x, y) if bounded and x is not None and y is not None else None


def pareto_section(doc: ResultsParts) -> str:
    sla, chosen = doc.sla, doc.chosen
    good, bad = [], []
    for plan in doc.pareto:
        xy = _xy(plan)
        if xy is None:
            continue
        (good if plan.feasible else bad).append((*xy, _tip(plan)))  # the table's verdict: SLA and budget
    line = Series("Pareto front", [*good, *bad], tone="a", joined=True, radius=0)
    series = [line, Series("Pareto candidate, feasible", good, tone="a"), Series("Pareto candidate, not feasible", bad, tone="miss")]
    legend = [("a", "Pareto candidate, feasible: meets the SLA within the budget"),
              ("miss", "Pareto candidate, not feasible: misses the SLA (e.g. TTFT) or the GPU budget")]
    chosen_xy = _xy(chosen) if chosen is not None else None
    if chosen_xy:
        series.append(Series("Chosen plan", [(*chosen_xy, "Chosen: " + _tip(chosen))], tone="chosen", radius=7.5))
        legend.append(("chosen", "Chosen plan"))
    itl = sla.itl_ms if sla is not None else None
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


def candidate_rows(doc: ResultsParts) -> list[CandidateRow]:
    """Every evaluated candidate with its ``pareto`` and ``chosen`` marks, chosen first, then the
    Pareto ones, then feasible ones by GPUs. Results stored before the planner kept every
    candidate (or whose table cannot be read) give only their Pareto set."""
    rows = doc.candidates.rows if doc.candidates is not None else ()
    if not rows:
        chosen = doc.chosen
        return [CandidateRow.of(plan, pareto=True, chosen=chosen is not None and plan.engines == chosen.engines
                                and plan.mode == chosen.mode) for plan in doc.pareto]
    return sorted(rows, key=lambda c: (not c.chosen, not c.pareto, not c.feasible, c.total_gpus))


def _feasible_cell(row: CandidateRow) -> tuple[str, str]:
    """(sort value, html) of the Feasible column: the planner's verdict, and why not."""
    if row.feasible:
        return "1", '<span class="verdict-ok">✓ yes</span>'
    return "0", f'<span class="verdict-bad">✗ no</span> <span class="sub">{h(row.reason or "misses the SLA")}</span>'


def candidates_section(doc: ResultsParts, *, feasible_only: bool = False, action: str = "") -> str:
    """The sortable table of every evaluated candidate; ``feasible_only`` hides the others."""
    rows = candidate_rows(doc)
    if not rows:
        return ""
    shown = [r for r in rows if r.feasible] if feasible_only else rows
    body = []
    for i, row in enumerate(shown, 1):
        feasible_value, feasible_html = _feasible_cell(row)
        marks = [m for m, on in (("Chosen", row.chosen), ("Pareto", row.pareto)) if on]
        cells = [
            (i, str(i)),
            (row.mode, h(row.mode)),
            (shape(row), h(shape(row))),
            (engines_text(row), h(engines_text(row))),
            (row.total_gpus, h(row.total_gpus)),
            (_finite(row.ttft_ms), _time(row.ttft_ms, 1)),
            (_finite(row.itl_ms), _time(row.itl_ms, 2)),
            (_finite(row.tok_s_per_user), num(row.tok_s_per_user, 1)),
            (_finite(row.output_tok_s_per_gpu), num(row.output_tok_s_per_gpu, 0)),
            (_finite(row.requests_per_s), num(row.requests_per_s, 2)),
            (feasible_value, feasible_html),
            (" ".join(marks), " ".join(f'<span class="badge badge-{"chosen" if m == "Chosen" else "muted"}">{m}</span>' for m in marks)),
        ]
        tds = "".join(
            f'<td{" class=n" if isinstance(v, (int, float)) else ""} data-value="{h(v if v is not None else "")}">{text}</td>'
            for v, text in cells
        )
        classes = " ".join(c for c, on in (("is-chosen", row.chosen), ("is-pareto", row.pareto)) if on)
        mark = (f' class="{classes}"' if classes else "") + (' aria-label="chosen plan"' if row.chosen else "")
        body.append(f'<tr{mark} data-feasible="{feasible_value}">{tds}</tr>')
    headers = ["#", "Mode", "Shape", "Engines", "GPUs", "TTFT ms", "ITL ms", "tok/s/user", "tok/s/GPU", "req/s", "Feasible", "Marks"]
    numeric = {"#", "GPUs", "TTFT ms", "ITL ms", "tok/s/user", "tok/s/GPU", "req/s"}
    ths = "".join(
        f'<th scope="col" aria-sort="none"{" class=n" if t in numeric else ""}>'
        f'<button type="button" class="sort" data-type="{"num" if t in numeric else "text"}">{h(t)}</button></th>'
        for t in headers
    )
    table = doc.candidates
    total = (table.total if table is not None else 0) or doc.evaluated or len(rows)
    omitted = table.omitted if table is not None else 0
    pareto_n = sum(1 for r in rows if r.pareto)
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


def assumptions_section(doc: ResultsParts) -> str:
    items = "".join(f"<li>{h(a)}</li>" for a in doc.assumptions)
    if not items:
        return ""
    return f'<section aria-labelledby="assume-h"><h2 id="assume-h">Assumptions</h2><ul class="assumptions">{items}</ul></section>'
