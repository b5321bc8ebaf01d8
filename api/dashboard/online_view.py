"""The DGDR page's section for an online search: how it ended, the calibration, and every
trial with what genai-bench measured (``profilingResults.online``, ``planner.online_results``)."""

from __future__ import annotations

from api.dashboard.html import dl, h, num
from planner.online_results import MeasuredPoint, OnlineSearch, Trial


def _points(points: tuple[MeasuredPoint, ...]) -> str:
    return "<br>".join(f"{num(p.concurrency, 0)} clients: TTFT {num(p.ttft_ms, 0, 'ms')}, "
                       f"ITL {num(p.itl_ms, 1, 'ms')}, {num(p.output_tok_s, 0)} tok/s" for p in points)


def _score(trial: Trial) -> str:
    if trial.score is None:
        return ""
    if trial.meets_sla:
        return f"{num(trial.score, 0)} tok/s/GPU"
    return f"misses the SLA ×{num(-trial.score, 2)}"


def online_section(online: OnlineSearch) -> str:
    """The section (empty without trials)."""
    if not online.trials:
        return ""
    cal, budget, sweep = online.calibration, online.budget, online.sweep
    before, after = cal.before, cal.after
    facts = dl([
        ("Deployment target", h(online.target)),
        ("Measured", h(f"{num(online.trials_done, 0)} of at most {num(budget.max_trials, 0)} candidates; "
                       f"{online.stopped or '—'}")),
        ("Sweep", h(f"{sweep.scenario or '—'} at {', '.join(map(str, sweep.concurrency or ['—']))} clients")),
        ("Best measured", h(online.best)),
        ("Calibration", h(f"on {cal.unit}: times ×{cal.scale:.3g}; TTFT error "
                          f"{before.ttft_mdape_pct:.1f}% → {after.ttft_mdape_pct:.1f}%, TPOT "
                          f"{before.tpot_mdape_pct:.1f}% → {after.tpot_mdape_pct:.1f}%")),
    ])
    rows = "".join(
        f"<tr><td>{h(t.number)}</td><td>{h(t.unit)}</td><td>{h(t.state)}</td><td>{h(t.gpus)}</td>"
        f"<td>{h(_score(t))}</td><td class=\"wrap\">{_points(t.points or ())}</td>"
        f"<td class=\"wrap\">{h(t.error or '')}<div class=\"sub\">{h(t.results_location or '')}</div></td></tr>"
        for t in online.trials)
    return f"""<section aria-labelledby="online-h"><h2 id="online-h">Online measurements</h2>{facts}
<div class="table-wrap"><table id="trials"><caption>Candidates deployed and benchmarked with genai-bench</caption>
<thead><tr><th scope="col">Trial</th><th scope="col">Candidate</th><th scope="col">State</th><th scope="col">GPUs</th>
<th scope="col">Goodput within the SLA</th><th scope="col">Measured (means)</th><th scope="col">Notes</th></tr></thead>
<tbody>{rows}</tbody></table></div></section>"""
