"""The DGDR page's section for an online search: how it ended, the calibration, and every
trial with what genai-bench measured (``profilingResults.online``)."""

from __future__ import annotations

from typing import Any

from api.dashboard.html import dl, h, num


def _points(points: list[dict[str, Any]]) -> str:
    return "<br>".join(f"{p['concurrency']} clients: TTFT {num(p['ttftMs'], 0, 'ms')}, ITL {num(p['itlMs'], 1, 'ms')}, "
                       f"{num(p['outputTokPerSec'], 0)} tok/s" for p in points)


def _score(trial: dict[str, Any]) -> str:
    if "score" not in trial:
        return ""
    if trial["meetsSla"]:
        return f"{num(trial['score'], 0)} tok/s/GPU"
    return f"misses the SLA ×{num(-trial['score'], 2)}"


def online_section(online: dict[str, Any]) -> str:
    """The section (empty without trials)."""
    trials = online.get("trials") or []
    if not trials:
        return ""
    cal = online.get("calibration") or {}
    before, after = cal.get("before") or {}, cal.get("after") or {}
    facts = dl([
        ("Deployment target", h(online.get("target"))),
        ("Measured", h(f"{online.get('trialsDone')} of at most {online['budget']['maxTrials']} candidates; "
                       f"{online.get('stopped')}")),
        ("Sweep", h(f"{online['sweep']['scenario']} at {', '.join(map(str, online['sweep']['concurrency']))} clients")),
        ("Best measured", h(online.get("best"))),
        ("Calibration", h(f"on {cal.get('unit')}: times ×{cal.get('scale', 0):.3g}; TTFT error "
                          f"{before.get('ttft_mdape_pct', 0):.1f}% → {after.get('ttft_mdape_pct', 0):.1f}%, TPOT "
                          f"{before.get('tpot_mdape_pct', 0):.1f}% → {after.get('tpot_mdape_pct', 0):.1f}%") if cal else ""),
    ])
    rows = "".join(
        f"<tr><td>{t['number']}</td><td>{h(t.get('unit'))}</td><td>{h(t['state'])}</td><td>{h(t.get('gpus'))}</td>"
        f"<td>{h(_score(t))}</td><td class=\"wrap\">{_points(t.get('points') or [])}</td>"
        f"<td class=\"wrap\">{h(t.get('error', ''))}<div class=\"sub\">{h(t.get('resultsLocation', ''))}</div></td></tr>"
        for t in trials)
    return f"""<section aria-labelledby="online-h"><h2 id="online-h">Online measurements</h2>{facts}
<div class="table-wrap"><table id="trials"><caption>Candidates deployed and benchmarked with genai-bench</caption>
<thead><tr><th scope="col">Trial</th><th scope="col">Candidate</th><th scope="col">State</th><th scope="col">GPUs</th>
<th scope="col">Goodput within the SLA</th><th scope="col">Measured (means)</th><th scope="col">Notes</th></tr></thead>
<tbody>{rows}</tbody></table></div></section>"""
