"""The DGDR page's section for an online search: how it ended, the calibration, and every
trial with what genai-bench measured (``profilingResults.online``, conformed: any part may be absent)."""

from __future__ import annotations

from typing import Any

from api.dashboard.html import dl, h, num


def _points(points: list[dict[str, Any]]) -> str:
    return "<br>".join(f"{num(p.get('concurrency'), 0)} clients: TTFT {num(p.get('ttftMs'), 0, 'ms')}, "
                       f"ITL {num(p.get('itlMs'), 1, 'ms')}, {num(p.get('outputTokPerSec'), 0)} tok/s" for p in points)


def _score(trial: dict[str, Any]) -> str:
    if "score" not in trial:
        return ""
    if trial.get("meetsSla"):
        return f"{num(trial['score'], 0)} tok/s/GPU"
    return f"misses the SLA ×{num(-trial['score'], 2)}"


def online_section(online: dict[str, Any]) -> str:
    """The section (empty without trials)."""
    trials = online.get("trials") or []
    if not trials:
        return ""
    cal = online.get("calibration") or {}
    before, after = cal.get("before") or {}, cal.get("after") or {}
    budget, sweep = online.get("budget") or {}, online.get("sweep") or {}
    facts = dl([
        ("Deployment target", h(online.get("target"))),
        ("Measured", h(f"{num(online.get('trialsDone'), 0)} of at most {num(budget.get('maxTrials'), 0)} candidates; "
                       f"{online.get('stopped') or '—'}")),
        ("Sweep", h(f"{sweep.get('scenario') or '—'} at {', '.join(map(str, sweep.get('concurrency') or ['—']))} clients")),
        ("Best measured", h(online.get("best"))),
        ("Calibration", h(f"on {cal.get('unit')}: times ×{cal.get('scale', 0):.3g}; TTFT error "
                          f"{before.get('ttft_mdape_pct', 0):.1f}% → {after.get('ttft_mdape_pct', 0):.1f}%, TPOT "
                          f"{before.get('tpot_mdape_pct', 0):.1f}% → {after.get('tpot_mdape_pct', 0):.1f}%") if cal else ""),
    ])
    rows = "".join(
        f"<tr><td>{h(t.get('number'))}</td><td>{h(t.get('unit'))}</td><td>{h(t.get('state'))}</td><td>{h(t.get('gpus'))}</td>"
        f"<td>{h(_score(t))}</td><td class=\"wrap\">{_points(t.get('points') or [])}</td>"
        f"<td class=\"wrap\">{h(t.get('error', ''))}<div class=\"sub\">{h(t.get('resultsLocation', ''))}</div></td></tr>"
        for t in trials)
    return f"""<section aria-labelledby="online-h"><h2 id="online-h">Online measurements</h2>{facts}
<div class="table-wrap"><table id="trials"><caption>Candidates deployed and benchmarked with genai-bench</caption>
<thead><tr><th scope="col">Trial</th><th scope="col">Candidate</th><th scope="col">State</th><th scope="col">GPUs</th>
<th scope="col">Goodput within the SLA</th><th scope="col">Measured (means)</th><th scope="col">Notes</th></tr></thead>
<tbody>{rows}</tbody></table></div></section>"""
