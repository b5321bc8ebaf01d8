"""Text of the tables the planning commands print: a number cell, and a time's parts."""

from __future__ import annotations

import math


def parts_text(parts) -> str:
    """``name ms + name ms ...`` of the parts (``TtftParts`` or ``ItlParts``) that round to more than nothing."""
    from profiler.model.config import PART_LABELS

    items = dict(parts).items()
    shown = [f"{PART_LABELS[name]} {ms:.1f}" for name, ms in items if math.isfinite(ms) and round(ms, 1) > 0]
    text = " + ".join(shown) + " ms" if shown else "0 ms"
    return " + ".join([text] + [f"{PART_LABELS[name]} unbounded" for name, ms in items if not math.isfinite(ms)])


def cell(x: float, digits: int, width: int) -> str:
    """A table cell: ``x`` right-aligned in ``width`` characters, or ``unbounded`` for a time that grows
    without bound (give ``width`` ≥ 10 so that it never touches the cell before it)."""
    return f"{x:>{width}.{digits}f}" if math.isfinite(x) else f"{'unbounded':>{width}}"
