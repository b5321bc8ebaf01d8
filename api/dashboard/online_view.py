"""The DGDR page's section for an online search: how it ended, the calibration, every trial (one
run: a candidate at one concurrency) with what genai-bench measured, and each measured point next to the offline prediction it replaced
and the calibrated model's (``profilingResults.online``, ``planner.online_results``)."""

from __future__ import annotations

from api.dashboard.html import dl, h, num
from planner.online_results import Calibration, MeasuredPoint, OnlineSearch, Trial
from profiler.model.measured import held_out_text, kept_text, uncertainty_text

# The measured quantities compared with the models: (attribute, heading, digits, unit).
QUANTITIES = (("ttft_ms", "TTFT", 0, "ms"), ("itl_ms", "ITL", 1, "ms"), ("output_tok_s", "Output", 0, "tok/s"))


def _points(points: tuple[MeasuredPoint, ...]) -> str:
    return "<br>".join(f"{num(p.concurrency, 0)} clients: TTFT {num(p.ttft_ms, 0, 'ms')}, "
                       f"ITL {num(p.itl_ms, 1, 'ms')}, {num(p.output_tok_s, 0)} tok/s" for p in points)


def _score(trial: Trial) -> str:
    if trial.score is None:
        return ""
    if trial.meets_sla:
        return f"{num(trial.score, 0)} tok/s/GPU"
    return f"misses the SLA ×{num(-trial.score, 2)}"


def _predicted(value: float | None, measured: float, digits: int) -> str:
    """A predicted value and its error against the measurement (signed %)."""
    if value is None:
        return "<td>—</td>"
    error = f' <span class="sub">({round((value / measured - 1) * 100):+d}%)</span>' if measured else ""
    return f"<td>{num(value, digits)}{error}</td>"


def _by_clients(points: tuple[MeasuredPoint, ...] | None) -> dict[int, MeasuredPoint]:
    return {p.concurrency: p for p in points or ()}


def _comparison_rows(trial: Trial) -> str:
    """One row per measured point: each quantity measured, predicted offline, and calibrated."""
    offline, calibrated = _by_clients(trial.predicted), _by_clients(trial.calibrated)
    rows = []
    for point in trial.points or ():
        cells = []
        for name, _, digits, _ in QUANTITIES:
            measured = getattr(point, name)
            cells.append(f"<td>{num(measured, digits)}</td>")
            for model in (offline, calibrated):
                other = model.get(point.concurrency)
                cells.append(_predicted(getattr(other, name) if other else None, measured, digits))
        rows.append(f"<tr><td>{h(trial.number)}</td><td>{h(trial.unit)}</td><td>{num(point.concurrency, 0)}</td>"
                    f"{''.join(cells)}</tr>")
    return "".join(rows)


def _comparison(online: OnlineSearch) -> str:
    """The table of measured points against the offline and calibrated predictions."""
    rows = "".join(_comparison_rows(t) for t in online.trials if t.points)
    if not rows:
        return ""
    groups = "".join(f'<th scope="colgroup" colspan="3">{h(title)} ({h(unit)})</th>' for _, title, _, unit in QUANTITIES)
    each = '<th scope="col">measured</th><th scope="col">offline</th><th scope="col">calibrated</th>' * len(QUANTITIES)
    return f"""<div class="table-wrap"><table id="trial-predictions"><caption>Measured points against the offline
prediction they replaced and the calibrated model (error against the measurement)</caption>
<thead><tr><th scope="col" rowspan="2">Trial</th><th scope="col" rowspan="2">Candidate</th>
<th scope="col" rowspan="2">Clients</th>{groups}</tr><tr>{each}</tr></thead><tbody>{rows}</tbody></table></div>"""


def _held_out(cal: Calibration) -> str:
    """The calibration's errors on points it did not fit and the harness time it held apart."""
    text = held_out_text(cal.held_out) or "nothing held out (too few points)"
    return text + (f"; genai-bench's {cal.harness_ms:.3g} ms a request held apart from the engine"
                   if cal.harness_ms else "")


def online_section(online: OnlineSearch) -> str:
    """The section (empty without trials)."""
    if not online.trials:
        return ""
    cal, budget, sweep = online.calibration, online.budget, online.sweep
    before, after = cal.before, cal.after
    facts = dl([
        ("Deployment target", h(online.target)),
        ("Measured", h(f"{num(online.trials_done, 0)} of at most {num(budget.max_trials, 0)} runs; "
                       f"{online.stopped or '—'}")),
        ("Reused", h(f"{num(online.trials_reused, 0)} run(s) measured by earlier DGDRs of the workload"
                     if online.trials_reused else "none")),
        ("Runs", h(f"{sweep.scenario or '—'} at one of {', '.join(map(str, sweep.concurrency or ['—']))} clients")),
        ("Offline plan's pick", h(online.offline_pick or "none (no candidate met the SLA offline)")),
        ("Best measured", h(online.best)),
        ("Calibration", h(f"on {cal.unit}: {kept_text(cal.scale, cal.sides)}; TTFT error "
                          f"{before.ttft_mdape_pct:.1f}% → {after.ttft_mdape_pct:.1f}%, TPOT "
                          f"{before.tpot_mdape_pct:.1f}% → {after.tpot_mdape_pct:.1f}% on the points fitted"
                          + (f"; refitted: {', '.join(cal.fitted)}" if cal.fitted else "")
                          + (f"; one standard error {uncertainty_text(cal.uncertainty)}" if cal.uncertainty else ""))),
        ("Calibration, held out", h(_held_out(cal))),
    ])
    rows = "".join(
        f"<tr><td>{h(t.number)}</td><td>{h(t.unit)}</td><td>{h(t.concurrency if t.concurrency else 'sweep')}</td>"
        f"<td>{h(t.state)}</td><td>{h(t.gpus)}</td>"
        f"<td>{h(_score(t))}</td><td class=\"wrap\">{_points(t.points or ())}</td>"
        f"<td class=\"wrap\">{h(f'reused from DGDR {t.reused_from}' if t.reused_from else t.error or '')}"
        f"<div class=\"sub\">{h(t.results_location or '')}</div></td></tr>"
        for t in online.trials)
    return f"""<section aria-labelledby="online-h"><h2 id="online-h">Online measurements</h2>{facts}
<div class="table-wrap"><table id="trials"><caption>Runs: candidates deployed and benchmarked with genai-bench</caption>
<thead><tr><th scope="col">Trial</th><th scope="col">Candidate</th><th scope="col">Clients</th><th scope="col">State</th>
<th scope="col">GPUs</th>
<th scope="col">Goodput within the SLA</th><th scope="col">Measured (means)</th><th scope="col">Notes</th></tr></thead>
<tbody>{rows}</tbody></table></div>{_comparison(online)}</section>"""
