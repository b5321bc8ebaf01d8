"""What no model of a row's inputs can get under: rows with identical inputs that measure apart.

Two readings of the same groups (rows whose estimate inputs are all equal, distinct measurements):
- *oracle*: each group's rows predicted by the group's own median measurement, the best a model
  that sees only the inputs could do on them (in sample, so a lower bound on those rows);
- *implied floor*: the median |log ratio| of the groups' pairs, read as the spread of two
  independent draws (√2 × one row's), gives the MdAPE a model exact on every row's expected
  value would still have if every row were measured that noisily (normal log-errors).
``benchmarks/accuracy.py`` prints both beside each held-out scheme.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import numpy as np

_MEDIAN_ABS_NORMAL = 0.6745  # median of |Z| for a standard normal Z


class Floor(NamedTuple):
    """One measured quantity's floor over the repeated groups."""

    rows: int  # rows in groups of two or more
    groups: int
    oracle_pct: float  # MdAPE (%) of each group's median on its own rows
    model_pct: float  # MdAPE (%) of the model's predictions on the same rows
    implied_pct: float  # MdAPE (%) a model exact on expected values would have at the pairs' spread


def floor(keys: list, measured: np.ndarray, predicted: np.ndarray) -> Floor:
    """``keys``: each row's inputs (hashable); ``measured``, ``predicted``: one quantity per row
    (rows already restricted to distinct measurements the model predicts)."""
    import numpy as np

    groups: dict = {}
    for j, key in enumerate(keys):
        groups.setdefault(key, []).append(j)
    repeated = [np.array(g) for g in groups.values() if len(g) > 1]
    if not repeated:
        return Floor(0, 0, math.nan, math.nan, math.nan)
    members = np.concatenate(repeated)
    oracle = np.concatenate([np.abs(np.median(measured[g]) - measured[g]) / measured[g] for g in repeated])
    model = np.abs(predicted[members] - measured[members]) / measured[members]
    pairs = [abs(math.log(measured[a] / measured[b])) for g in repeated for i, a in enumerate(g) for b in g[i + 1:]]
    one_row_sd = float(np.median(pairs)) / (_MEDIAN_ABS_NORMAL * math.sqrt(2.0))
    implied = math.expm1(_MEDIAN_ABS_NORMAL * one_row_sd)
    return Floor(int(members.size), len(repeated), 100 * float(np.median(oracle)), 100 * float(np.median(model)),
                 100 * implied)


def floor_lines(keys: list, measured: dict[str, np.ndarray], predicted: dict[str, np.ndarray]) -> list[str]:
    """The summary's lines: per quantity (e.g. "TTFT", "TPOT"), the floor of ``floor``."""
    out = []
    for name in measured:
        f = floor(keys, measured[name], predicted[name])
        if not f.rows:
            continue
        out.append(f"        {name} on {f.rows} rows in {f.groups} groups of identical inputs: each group's median "
                   f"{f.oracle_pct:.1f}%, the model {f.model_pct:.1f}%; the pairs' spread implies a floor of "
                   f"{f.implied_pct:.1f}% over every row")
    return out
