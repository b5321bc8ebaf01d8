"""Hand-drawn SVG charts: points (optionally joined), reference lines and a shaded region.

Each point is a ``<circle class="pt">`` carrying its values in ``data-x``/``data-y`` and a
``<title>`` tooltip; the SVG has a title and description for screen readers, and every chart
on a page sits next to a table holding the same numbers.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from api.dashboard.html import h

LEFT, RIGHT, TOP, BOTTOM = 64, 20, 16, 46


class Series(NamedTuple):
    name: str
    points: list[tuple[float, float, str]]  # (x, y, tooltip)
    tone: str = "a"  # CSS class suffix: a, b, c, chosen, faint
    joined: bool = False
    radius: float = 4.5


class Rule(NamedTuple):
    """A reference line at ``value`` on the ``axis`` ("x" or "y")."""

    axis: str
    value: float
    label: str


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering [lo, hi] (steps of 1, 2 or 5 × 10^k)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(lo / step) * step
    ticks, x = [], first
    while x <= hi + step * 1e-9:
        ticks.append(round(x, 10))
        x += step
    return ticks


def _fmt(x: float) -> str:
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 10 or x == int(x):
        return f"{x:.0f}"
    return f"{x:.2g}" if abs(x) < 1 else f"{x:.1f}"


def _bounds(values: list[float], *, zero: bool) -> tuple[float, float]:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return 0.0, 1.0
    lo, hi = min(finite), max(finite)
    if zero:
        lo = min(0.0, lo)
    if hi == lo:
        hi = lo + (abs(lo) or 1.0)
    pad = (hi - lo) * 0.06
    return (lo if zero and lo == 0 else lo - pad), hi + pad


def chart(
    *,
    chart_id: str,
    title: str,
    description: str,
    x_label: str,
    y_label: str,
    series: list[Series],
    rules: tuple[Rule, ...] = (),
    shade_x_from: float | None = None,
    shade_label: str = "",
    size: tuple[int, int] = (760, 360),
    log_x: bool = False,
) -> str:
    """An SVG chart of ``size`` (viewBox units; it scales to its box). ``shade_x_from`` shades
    everything right of that x (e.g. the SLA region). ``log_x`` puts x on a log scale with a
    tick at every distinct x (for concurrency levels such as 1, 4, 16, 64)."""
    width, height = size
    if log_x:
        series = [s._replace(points=[p for p in s.points if p[0] > 0]) for s in series]
    xs = [p[0] for s in series for p in s.points] + [r.value for r in rules if r.axis == "x"]
    ys = [p[1] for s in series for p in s.points] + [r.value for r in rules if r.axis == "y"]
    if shade_x_from is not None and math.isfinite(shade_x_from):
        xs.append(shade_x_from)
    y0, y1 = _bounds(ys, zero=True)
    if log_x:
        distinct = sorted({x for x in xs if x > 0 and math.isfinite(x)}) or [1.0]
        x0, x1 = math.log10(distinct[0]) - 0.08, math.log10(distinct[-1]) + 0.08
        step = max(1, math.ceil(len(distinct) / 10))
        x_ticks = distinct[::step]
    else:
        x0, x1 = _bounds(xs, zero=True)
        x_ticks = [t for t in nice_ticks(x0, x1) if x0 <= t <= x1]
    y_ticks = [t for t in nice_ticks(y0, y1) if y0 <= t <= y1]
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - BOTTOM

    def px(x: float) -> float:
        if log_x:
            x = math.log10(x)
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - (y - y0) / (y1 - y0) * plot_h

    out: list[str] = [
        f'<svg class="chart" id="{h(chart_id)}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-labelledby="{h(chart_id)}-t {h(chart_id)}-d" preserveAspectRatio="xMidYMid meet">',
        f'<title id="{h(chart_id)}-t">{h(title)}</title><desc id="{h(chart_id)}-d">{h(description)}</desc>',
    ]
    if shade_x_from is not None and math.isfinite(shade_x_from) and not log_x and shade_x_from < x1:
        left = px(max(shade_x_from, x0))
        out.append(
            f'<rect class="region" x="{left:.1f}" y="{TOP}" width="{LEFT + plot_w - left:.1f}" height="{plot_h}">'
            f"<title>{h(shade_label)}</title></rect>"
        )
        if shade_label:
            out.append(f'<text class="region-label" x="{left + 6:.1f}" y="{TOP + plot_h - 8}">{h(shade_label)}</text>')
    for t in y_ticks:
        y = py(t)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}"/>')
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    for t in x_ticks:
        x = px(t)
        out.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{TOP + plot_h}"/>')
        out.append(f'<text class="tick" x="{x:.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{_fmt(t)}</text>')
    out.append(f'<rect class="frame" x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}"/>')
    out.append(f'<text class="axis" x="{LEFT + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle">{h(x_label)}</text>')
    out.append(
        f'<text class="axis" transform="translate(14 {TOP + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle">{h(y_label)}</text>'
    )
    for r in rules:
        if r.axis == "y":
            y = py(r.value)
            out.append(f'<line class="rule" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}"><title>{h(r.label)}</title></line>')
            out.append(f'<text class="rule-label" x="{LEFT + plot_w - 4}" y="{y - 5:.1f}" text-anchor="end">{h(r.label)}</text>')
        else:
            x = px(r.value)
            out.append(f'<line class="rule" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{TOP + plot_h}"><title>{h(r.label)}</title></line>')
    for s in series:
        pts = sorted((p for p in s.points if math.isfinite(p[0]) and math.isfinite(p[1])), key=lambda p: p[0])
        if s.joined and len(pts) > 1:
            path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y, _ in pts)
            out.append(f'<polyline class="line line-{h(s.tone)}" points="{path}"/>')
        for x, y, tip in pts if s.radius > 0 else ():
            out.append(
                f'<circle class="pt pt-{h(s.tone)}" cx="{px(x):.1f}" cy="{py(y):.1f}" r="{s.radius}" '
                f'data-series="{h(s.name)}" data-x="{x:.6g}" data-y="{y:.6g}"><title>{h(tip)}</title></circle>'
            )
    out.append("</svg>")
    return "".join(out)


def legend(items: list[tuple[str, str]]) -> str:
    """An HTML legend of (tone, label) pairs shown under a chart."""
    cells = "".join(f'<li><span class="swatch swatch-{h(tone)}" aria-hidden="true"></span>{h(label)}</li>' for tone, label in items)
    return f'<ul class="legend">{cells}</ul>'


def figure(svg: str, caption: str, legend_items: list[tuple[str, str]] | None = None) -> str:
    extra = legend(legend_items) if legend_items else ""
    return f'<figure class="chart-box">{svg}{extra}<figcaption>{h(caption)}</figcaption></figure>'
