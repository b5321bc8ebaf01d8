"""Where held-out errors sit: one scheme's predictions split by whether the deployment is recorded
or inferred, and within each by backend, GPU, clients, ISL/OSL and source (``benchmarks/accuracy.py``
prints it for the disaggregated rows held out as one group)."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# Upper ends of the client bins (closed-loop concurrency), the last one open.
CLIENT_BINS = (8, 64, 256, 1024)


def client_bin(concurrency: float) -> str:
    """The bin of ``CLIENT_BINS`` a concurrency falls in, as text ("1–8", …, "> 1024")."""
    low = 1
    for high in CLIENT_BINS:
        if concurrency <= high:
            return f"{low}–{high}"
        low = high + 1
    return f"> {CLIENT_BINS[-1]}"


def _order(value: str) -> tuple[float, str]:
    """Sort key of a label: by the number it starts with (client bins, lengths), else by its text."""
    match = re.match(r"[>\s]*(\d+)", value)
    return (float(match.group(1)) if match else math.inf, value)


def speculation(row: dict) -> str:
    """What a row (as read with its recipes) says of speculative decoding: "drafts N" tokens a step,
    "none", or "not stated" (e.g. plain and MTP sweeps of one deployment both measure its load)."""
    said = str(row.get("spec_tokens") or "").strip()
    if not said:
        return "not stated"
    return "none" if int(float(said)) == 0 else f"drafts {int(float(said))}"


def labels(rows: list[dict], positions) -> dict[str, np.ndarray]:
    """Each split's label of the rows at ``positions``: backend, GPU, clients (``client_bin``),
    ISL/OSL, source (the provenance's first field) and speculation (``speculation``)."""
    import numpy as np

    picked = [rows[i] for i in positions]
    return {
        "backend": np.array([str(r.get("backend") or "").strip() for r in picked]),
        "gpu": np.array([str(r.get("gpu") or "").strip() for r in picked]),
        "clients": np.array([client_bin(float(r.get("concurrency") or 0)) for r in picked]),
        "ISL/OSL": np.array([f"{r.get('isl')}/{r.get('osl')}" for r in picked]),
        "source": np.array([str(r.get("provenance") or "").split(" | ")[0] for r in picked]),
        "spec": np.array([speculation(r) for r in picked]),
    }


def breakdown_table(title: str, split: dict[str, np.ndarray], inferred: np.ndarray, scored: np.ndarray,
                    ttft: np.ndarray, tpot: np.ndarray, ttft_ms: np.ndarray, tpot_ms: np.ndarray) -> str:
    """TTFT and TPOT MdAPE with bias (``calibrate.median_errors``) of the ``scored`` rows, recorded
    and inferred deployments apart, then by each label of ``split`` (``labels``) within each.
    ``ttft``/``tpot``: predictions, ``ttft_ms``/``tpot_ms``: measurements (ms)."""
    from profiler.model.calibrate import median_errors

    head = f"{'deployment':<10} {'split':<8} {'value':<28} {'n':>5} {'TTFT':>6} {'bias':>5} {'TPOT':>6} {'bias':>5}"
    lines = [title, head, "-" * len(head)]

    def line(kind: str, name: str, value: str, mask) -> None:
        n, t_ape, t_bias = median_errors(ttft[mask], ttft_ms[mask])
        _, p_ape, p_bias = median_errors(tpot[mask], tpot_ms[mask])
        if n:
            lines.append(f"{kind:<10} {name:<8} {value[:28]:<28} {n:>5} {t_ape:>5.1f}% {t_bias:>+4.0f}% "
                         f"{p_ape:>5.1f}% {p_bias:>+4.0f}%")

    for kind, mask in (("all", scored), ("recorded", scored & ~inferred), ("inferred", scored & inferred)):
        line(kind, "", "", mask)
        if kind == "all":
            continue
        for name, values in split.items():
            for value in sorted(set(values[mask].tolist()), key=_order):
                line(kind, name, value, mask & (values == value))
    return "\n".join(lines)
