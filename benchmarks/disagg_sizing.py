"""How the data's recorded disaggregated deployments are sized: the fit behind
``profiler.model.dataset.UNRECORDED_GPUS``.

Not a measurement of slaplan: it reads only deployment columns (workers and engine shapes, as
``dataset.row_config`` reads them) and concurrency, never a measured time. For every
disaggregated row with both worker counts and its prompts short or long
(``dataset.LONG_PROMPT_TOKENS``), it fits log GPUs = log scale + power × log clients by least
squares, once for the prefill GPUs and once for the decode GPUs, and prints the coefficients
with how closely they reproduce the rows' GPU counts (median factor). Rows without worker
counts are then read as a deployment of that many GPUs per role.

It reads the data as recorded, without what the rows' recipes state (``--recipes`` of
``benchmarks/accuracy.py``): it reproduces the shipped ``UNRECORDED_GPUS``, fitted on the
deployments the data itself records, and the rows recipes complete are the ones that constant
sizes when read without recipes. Fitting it on them too changes the model (a refit of the
shipped parameters), not this benchmark.

    python benchmarks/disagg_sizing.py [--data CSV]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class Deployment(NamedTuple):
    """One recorded disaggregated deployment at one load."""

    clients: float  # closed-loop concurrency
    long: bool  # prompts of at least ``dataset.LONG_PROMPT_TOKENS`` tokens
    prefill_gpus: int
    decode_gpus: int


def recorded_deployments(rows: list[dict]) -> list[Deployment]:
    """The disaggregated rows of ``rows`` that record both worker counts, read as the model reads
    them; rows it cannot read are skipped."""
    from profiler.model.dataset import LONG_PROMPT_TOKENS, row_config
    from profiler.model.errors import ModelError
    from profiler.model.gpus import get_gpu
    from profiler.model.model_catalog import resolve_model

    out = []
    for row in rows:
        if str(row.get("mode") or "").strip().lower() != "disagg":
            continue
        if not str(row.get("p_workers") or "").strip() or not str(row.get("d_workers") or "").strip():
            continue
        try:
            model, _ = resolve_model(str(row.get("model") or ""))
            gpu = get_gpu(str(row.get("gpu") or ""))
            config, _ = row_config(row, model.num_heads, model.is_moe, gpu.nvlink_domain, model.moe_intermediate_size)
        except (ModelError, ValueError):
            continue
        out.append(Deployment(config.concurrency, config.isl_tokens >= LONG_PROMPT_TOKENS,
                              config.prefill_workers * config.prefill.gpus, config.decode_workers * config.decode.gpus))
    return out


class PowerFit(NamedTuple):
    """GPUs ≈ ``scale`` × clients^``power``, reproducing the fitted counts to a median ``factor``."""

    scale: float
    power: float
    factor: float
    rows: int


def power_fit(clients: list[float], gpus: list[int]) -> PowerFit:
    """Least squares of log ``gpus`` on log ``clients`` (at least two distinct loads)."""
    import numpy as np

    x, y = np.log(np.asarray(clients, dtype=float)), np.log(np.asarray(gpus, dtype=float))
    if np.unique(x).size < 2:
        raise ValueError("power_fit needs at least two distinct client counts")
    power, log_scale = np.polyfit(x, y, 1)
    factor = math.exp(float(np.median(np.abs(y - (log_scale + power * x)))))
    return PowerFit(math.exp(float(log_scale)), float(power), factor, int(x.size))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="calibration CSV (default: ../shared/data next to the repository)")
    args = parser.parse_args(argv)

    from api.commands.calibrate import given_data_path, read_rows

    if (path := given_data_path(args.data)) is None:
        return 1
    deployments = [d for d in recorded_deployments(read_rows(path)) if d.clients > 0]
    print(f"{len(deployments)} recorded disaggregated deployments in {path.name}")
    print(f"{'prompts':<7} {'role':<8} {'rows':>5} {'scale':>7} {'power':>7} {'median factor':>13}")
    for long in (False, True):
        picked = [d for d in deployments if d.long == long]
        for role in ("prefill", "decode"):
            fit = power_fit([d.clients for d in picked], [getattr(d, f"{role}_gpus") for d in picked])
            print(f"{'long' if long else 'short':<7} {role:<8} {fit.rows:>5} {fit.scale:>7.2f} {fit.power:>7.3f} "
                  f"{fit.factor:>13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
