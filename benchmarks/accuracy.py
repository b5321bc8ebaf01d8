"""Accuracy of the offline performance model on the measured calibration data.

Prints coverage (rows predicted / rows given) and, for TTFT and TPOT, the median absolute
percentage error (MdAPE) and the median bias (median of log(pred/measured), shown as the %
it corresponds to; negative = predicted too low), overall and by mode, backend, GPU and model
family, for:
- grouped cross-validation holding out whole model families (one fit per family);
- grouped cross-validation holding out whole GPU types (one fit per GPU type);
- every disaggregated row held out as one group (one fit on the aggregated rows), its errors also
  split by recorded or inferred deployment and by backend, GPU, clients, ISL/OSL and source
  (``accuracy_breakdown.py``);
- in sample: the shipped parameters on the rows they were fitted on (for contrast only; this
  is not a measure of accuracy).
Targets: coverage ≥ 95% (issue 2); held-out MdAPE (issue 35) TTFT ≤ 22% and TPOT ≤ 9% with model
families or GPU types held out, TTFT ≤ 30% and TPOT ≤ 15% with the disaggregated rows held out.
The summary also splits rows whose deployment the data records from disaggregated rows whose
worker counts are missing (their deployment is inferred, and they are not used for fitting), and
gives each cross-validated MdAPE a 95% interval from resampling whole sweeps (every row of one
model family, GPU, backend and mode together, since a sweep's rows share their errors):
how far the number could move on other measurements of the same kind. It also scores the
held-out output tokens/s per GPU against the data's ``derived_output_tok_s_per_gpu``, on the
rows that have one (no target).

Last, the selection regret: what the held-out predictions cost a planner that picks by them.
A workload is one source's measurements of one model on one GPU type with one backend and
version, one input and one output length; its measured configurations (mode, parallelism,
workers, concurrency, …) are the candidates. For SLAs at quartiles of the workload's measured
TTFT and TPOT, the pick is the configuration with the highest predicted output tokens/s per GPU
among those predicted within the SLA, scored by the measurements (no target).

With ``--also CSV`` (e.g. ``benchmarks/data/amd_measured.csv``) more measured rows join the fit
of every fold; the tables above stay on ``--data``'s rows, and the added rows get a table of
their own by GPU type, mode and precision: held out by GPU type (each AMD type fitted on every
other GPU), with the CDNA3 GPUs (MI300X, MI325X) held out together, and with every AMD row held
out (fitted on NVIDIA rows alone, as before AMD rows were in the fit), and split by the statistic
their TTFT reports. A row whose ``statistic`` is ``median`` (a published median, see
``benchmarks/inferencex_data.py``) is scored on its median TTFT against the model's median
(``profiler.model.calibrate.reported_ttft_ms``), and its median fits only the share of the harness
term a median carries. ``--amd-only`` runs those AMD folds alone (below).

Every prediction is read twice: *as measured*, with the term each row's harness adds to its TTFT
(its client, tokenizer, HTTP path, polling; ``profiler/model/harness.py``), fitted in each fold
with the model, and *engine alone*, without it, as a plan predicts a deployment. The tables are
as measured; the summary gives both, and the harness terms fitted on every row (the shipped
``params.json``) are listed with their size. ``--source-prior`` sets how strongly each harness's
term is pulled toward its backend's typical one (``inf``: one term per backend).

With ``--external CSV`` (e.g. ``benchmarks/data/nvidia_measured.csv``) measured rows that are never
fitted get a table of their own, by model family × GPU type (and mode, where a GPU has both): the
shipped parameters' errors on them, and (unless ``--in-sample-only``) those of parameters fitted
with the code as it is on every row of ``--data`` and ``--also`` (one more fit), which is what
judges a change of the model's physics before the shipped parameters are refitted.
The rows of ``--also`` and ``--external`` that publish both a mean and a median TTFT get a table of
their TTFT's tail (mean less median, aggregated, at few clients) per run: what the per-request
harness term stands for on average, and how far apart runs of one harness lie.

With ``--recipes CSV`` (without ``--data``, ``benchmarks/data/recipe_deployments.csv`` by default; ``none``
for none) rows get what the recipes they were run with state (``recipe_deployments.py``): worker
counts and engine shapes where the data has none, the decode engines' running-sequence limit,
speculative decoding.

    python benchmarks/accuracy.py [--data CSV] [--also CSV] [--external CSV] [--recipes CSV] [--max-evals N]
                                  [--workers N] [--in-sample-only | --amd-only] [--source-prior S]
                                  [--schemes family gpu disagg]

``--amd-only`` cross-validates only the folds that hold out AMD rows (each AMD GPU type, the CDNA3
types together, every AMD row) and prints the added rows' table: their NVIDIA step sees the same
rows in every such fold, so it is fitted once, and the numbers are those of the full run.

Cross-validation refits the parameters once per held-out group (each fit starting from and
pulled toward the GEMM shape efficiencies fitted to the kernel measurements beside the data,
as ``slaplan calibrate`` does), the fits spread over ``--workers`` processes: a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from api.commands.calibrate import (add_workers_argument, given_data_path, error_rows,  # noqa: E402
                                    format_table, read_kernels, read_rows, run_cross_validation, with_recipes)

RECIPES = ROOT / "benchmarks" / "data" / "recipe_deployments.csv"  # what the rows' recipes state
BOOTSTRAP_DRAWS = 2000
# Cross-validation schemes: what each holds out (one fit per group).
SCHEMES = {"family": "whole model families held out", "gpu": "whole GPU types held out",
           "disagg": "the disaggregated rows held out as one group (fitted on the aggregated rows)"}
# Issue 35: held-out median absolute % error at most this, per scheme.
TARGETS = {"family": {"TTFT": 22.0, "TPOT": 9.0}, "gpu": {"TTFT": 22.0, "TPOT": 9.0},
           "disagg": {"TTFT": 30.0, "TPOT": 15.0}}
SLA_QUANTILES = (0.25, 0.5, 0.75)  # of a workload's measured TTFT, and of its TPOT: 3 × 3 SLAs per workload
MIN_CONFIGURATIONS = 3  # distinct measured configurations a workload needs for its picks to be scored
WORKLOAD = ("model", "gpu", "backend", "backend_version", "isl", "osl")  # the columns a workload shares


def add_recipes_argument(parser: argparse.ArgumentParser) -> None:
    """``--recipes CSV``: what measured rows' recipes state, read by ``with_recipes_of``."""
    parser.add_argument("--recipes", metavar="CSV",
                        help="what measured rows' recipes state (default without --data: "
                             "benchmarks/data/recipe_deployments.csv; 'none' for none)")


def with_recipes_of(rows: list[dict], args: argparse.Namespace) -> list[dict]:
    """``rows`` with what their recipes state (``api.commands.calibrate.with_recipes``): those of
    ``args.recipes``, by default (without ``args.data``) ``RECIPES``; as read with ``none``. Raises
    OSError or ValueError as ``read_rows`` and ``with_recipes`` do."""
    recipes = args.recipes or (None if args.data else str(RECIPES))
    if not recipes or recipes == "none":
        return rows
    return with_recipes(rows, read_rows(Path(recipes)))


def rows_short(errors, target: float) -> tuple[int, int]:
    """(errors within ``target`` %, how many more would have to be within it for their median
    to be): the median of n errors is at most the target once ⌊n/2⌋ + 1 of them are (for even
    n this can be one row more than needed). 0 when the median already is."""
    import numpy as np

    errors = np.asarray(errors, dtype=float)
    within = int((errors <= target).sum())
    return within, max(errors.size // 2 + 1 - within, 0)


def sweep_interval(errors, sweeps, seed: int = 0, draws: int = BOOTSTRAP_DRAWS) -> tuple[float, float]:
    """95% interval (%) of the median of ``errors`` (%) when whole sweeps are resampled with
    replacement; ``sweeps`` labels each error's sweep. Seeded, so a rerun prints the same."""
    import numpy as np

    ids, which = np.unique(sweeps, return_inverse=True)
    members = [errors[which == k] for k in range(len(ids))]
    rng = np.random.default_rng(seed)
    medians = [np.median(np.concatenate([members[k] for k in rng.integers(len(ids), size=len(ids))]))
               for _ in range(draws)]
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(low), float(high)


# The inputs the estimate contract reads (issue 2): rows equal in all of them describe one configuration.
INPUTS = ("model", "gpu", "backend", "precision", "mode", "isl", "osl", "concurrency", "tp", "pp", "attn_dp", "moe_tp",
          "moe_ep", "p_workers", "p_tp", "p_pp", "p_attn_dp", "p_moe_ep", "p_bs", "d_workers", "d_tp", "d_pp",
          "d_attn_dp", "d_moe_ep", "d_bs", "num_gpus", "max_batch", "max_num_tokens", "spec_tokens")


def inputs_key(row: dict) -> tuple[str, ...]:
    """The estimate's inputs of a row (``INPUTS``), numbers written alike however the data spells them."""
    from profiler.model.calibrate import rounded

    return tuple(rounded(row.get(k), 12) for k in INPUTS)


def measured_twice(rows: list[dict], positions, ttft_ms, tpot_ms) -> list[tuple[float, float, bool]]:
    """Every pair of distinct measurements (at ``positions`` of ``rows``, TTFT and TPOT in ms) whose
    rows have the same inputs: (|TTFT ratio − 1|, |TPOT ratio − 1|, same backend version), ratios of
    the larger to the smaller. How far two measurements of one configuration fall apart is what
    no model of the configuration can get under."""
    def version(j: int) -> str:
        return str(rows[positions[j]].get("backend_version") or "").strip()

    groups: dict[tuple, list[int]] = {}
    for j, i in enumerate(positions):
        groups.setdefault(inputs_key(rows[i]), []).append(j)
    pairs = []
    for members in groups.values():
        for a, j in enumerate(members):
            for k in members[a + 1:]:
                pairs.append((max(ttft_ms[j], ttft_ms[k]) / min(ttft_ms[j], ttft_ms[k]) - 1,
                              max(tpot_ms[j], tpot_ms[k]) / min(tpot_ms[j], tpot_ms[k]) - 1, version(j) == version(k)))
    return pairs


def workload_key(row: dict) -> str:
    """The workload a row measures, for the selection regret: its source and origin (the
    provenance's first field), model, GPU, backend and version, input and output length."""
    from profiler.model.calibrate import rounded

    origin = str(row.get("provenance") or "").split(" | ")[0]
    return "|".join((str(row.get("source") or ""), origin, *(rounded(row.get(k), 12) for k in WORKLOAD)))


class Pick(NamedTuple):
    """A planner's pick under one SLA, scored by the measurements."""

    index: int | None  # the configuration picked; None: none is predicted within the SLA
    # 1 − the pick's measured output tokens/s per GPU ÷ the best measured within the SLA
    # (NaN: no pick, or the pick is measured over the SLA)
    regret: float
    best: bool  # the pick is (one of) the best measured within the SLA
    missed: bool  # the pick's measured TTFT or TPOT is over the SLA


def pick_within_sla(predicted: np.ndarray, measured: np.ndarray, ttft_ms: float, tpot_ms: float) -> Pick | None:
    """Pick among one workload's configurations by ``predicted`` and score the pick by ``measured``
    (both arrays of shape (3, configurations): TTFT ms, TPOT ms, output tokens/s per GPU) for the
    SLA mean TTFT ≤ ``ttft_ms`` and mean TPOT ≤ ``tpot_ms``. The pick: the highest predicted
    throughput among the configurations predicted within the SLA. None when no configuration is
    measured within it (nothing to score a pick against)."""
    import numpy as np

    within = (measured[0] <= ttft_ms) & (measured[1] <= tpot_ms)
    if not within.any():
        return None
    promised = np.flatnonzero((predicted[0] <= ttft_ms) & (predicted[1] <= tpot_ms))
    if promised.size == 0:
        return Pick(index=None, regret=math.nan, best=False, missed=False)
    index = int(promised[np.argmax(predicted[2][promised])])
    if not within[index]:
        return Pick(index=index, regret=math.nan, best=False, missed=True)
    best = float(measured[2][within].max())
    return Pick(index=index, regret=1.0 - float(measured[2][index]) / best, best=bool(measured[2][index] >= best),
                missed=False)


class Regret(NamedTuple):
    """Picks of ``pick_within_sla`` over workloads and their SLAs, summed up."""

    workloads: int  # workloads with at least ``MIN_CONFIGURATIONS`` configurations measured and predicted
    slas: int  # (workload, SLA) cases with at least one configuration measured within the SLA
    mean_regret_pct: float  # mean regret (%) of the picks measured within their SLA; NaN when there is none
    best: int  # picks that are the best measured within their SLA
    missed: int  # picks measured over their SLA
    no_pick: int  # cases where no configuration is predicted within the SLA


def selection_regret(workloads: np.ndarray, configurations: np.ndarray, predicted: np.ndarray, measured: np.ndarray,
                     quantiles: tuple[float, ...] = SLA_QUANTILES, least: int = MIN_CONFIGURATIONS) -> Regret:
    """Selection regret of ``predicted`` over rows labelled by workload (``workloads``) and, within
    one, by configuration (``configurations``: rows with the same label are one configuration, its
    values the mean of theirs). ``predicted`` and ``measured``: arrays (3, rows) of TTFT ms, TPOT ms
    and output tokens/s per GPU; rows with any of them not finite and positive are left out. Each
    workload with at least ``least`` configurations is scored at every pair of its measured TTFT
    quantile and TPOT quantile at ``quantiles`` (``pick_within_sla``)."""
    import numpy as np

    predicted, measured = np.asarray(predicted, dtype=float), np.asarray(measured, dtype=float)
    workloads, configurations = np.asarray(workloads), np.asarray(configurations)
    both = np.concatenate([predicted, measured])
    usable = (np.isfinite(both) & (both > 0)).all(axis=0)
    picks, scored = [], 0
    for workload in np.unique(workloads[usable]):
        rows = usable & (workloads == workload)
        _, which = np.unique(configurations[rows], return_inverse=True)
        if which.max() + 1 < least:
            continue
        scored += 1
        count = np.bincount(which)
        pred, meas = (np.array([np.bincount(which, weights=values) / count for values in array[:, rows]])
                      for array in (predicted, measured))
        for q_ttft, q_tpot in itertools.product(quantiles, repeat=2):
            sla = float(np.quantile(meas[0], q_ttft)), float(np.quantile(meas[1], q_tpot))  # TTFT, TPOT ms
            pick = pick_within_sla(pred, meas, *sla)
            if pick is not None:
                picks.append(pick)
    regrets = [p.regret for p in picks if p.index is not None and not p.missed]
    return Regret(workloads=scored, slas=len(picks),
                  mean_regret_pct=100 * float(np.mean(regrets)) if regrets else math.nan,
                  best=sum(p.best for p in picks), missed=sum(p.missed for p in picks),
                  no_pick=sum(p.index is None for p in picks))


def regret_table(preds: dict[str, np.ndarray], measured: np.ndarray, workloads: np.ndarray,
                 configurations: np.ndarray, disagg: np.ndarray) -> str:
    """``selection_regret`` of each cross-validation scheme's held-out predictions (``preds``, as
    ``cross_validate`` returns them) against ``measured`` (3, rows: TTFT ms, TPOT ms, output
    tokens/s per GPU), over every configuration and over the disaggregated ones (``disagg``) alone,
    as a text table."""
    import numpy as np

    quartiles = "/".join(f"{100 * q:.0f}" for q in SLA_QUANTILES)
    head = (f"{'held out':<8} {'configurations':<15} {'workloads':>9} {'SLAs':>5} {'mean regret':>11} "
            f"{'best pick':>9} {'over SLA':>8} {'no pick':>7}")
    lines = [f"SELECTION REGRET: pick the highest predicted output tok/s per GPU predicted within the SLA, "
             f"score by measurement (SLAs: TTFT and TPOT at the {quartiles}th percentiles of each workload's "
             f"measurements; workloads with ≥ {MIN_CONFIGURATIONS} configurations)", head, "-" * len(head)]
    subsets = {"all": np.ones(len(workloads), dtype=bool), "disaggregated": disagg}
    for scheme in preds:
        # The disaggregated rows held out predict those rows alone.
        for subset in ("disaggregated",) if scheme == "disagg" else subsets:
            mask = subsets[subset]
            r = selection_regret(workloads[mask], configurations[mask], preds[scheme][:, mask], measured[:, mask])
            share = 100 * r.best / r.slas if r.slas else math.nan
            lines.append(f"{scheme:<8} {subset:<15} {r.workloads:>9} {r.slas:>5} {r.mean_regret_pct:>10.1f}% "
                         f"{share:>8.0f}% {r.missed:>8} {r.no_pick:>7}")
    return "\n".join(lines)


# Held-out predictions of the rows of --also: scheme -> what it holds out.
ADDED_SCHEMES = {"shipped": "shipped parameters (in sample when the rows are in the fit)",
                 "gpu": "each GPU type held out (fitted on every other GPU type)",
                 "cdna3": "MI300X and MI325X held out together (fitted on MI355X and NVIDIA)",
                 "amd": "every AMD row held out (fitted on NVIDIA rows only)",
                 "family": "whole model families held out"}


def only(mask: np.ndarray, *predictions: np.ndarray) -> list[np.ndarray]:
    """``predictions`` with NaN outside ``mask`` (rows scored nowhere else)."""
    import numpy as np

    return [np.where(mask, p, np.nan) for p in predictions]


def groups_table(data, preds: dict[str, np.ndarray], groups: list[tuple[str, np.ndarray]],
                 title: list[str]) -> str:
    """TTFT and TPOT MdAPE with bias, and how many rows each is over (a row with only a TPOT counts
    for TPOT only), of each scheme of ``preds`` (scheme -> array (2, rows) of TTFT and TPOT ms) on
    each of ``groups`` (label, mask of ``data``'s rows), under the lines of ``title``; a group the
    scheme predicts no row of is left out."""
    from profiler.model.calibrate import median_errors

    width = max([18, *(len(label) for label, _ in groups)])
    head = (f"{'predictions':<9} {'rows':<{width}} {'TTFT n':>6} {'MdAPE':>6} {'bias':>5} "
            f"{'TPOT n':>6} {'MdAPE':>6} {'bias':>5}")
    lines = [*title, head, "-" * len(head)]
    for scheme, (ttft, tpot) in preds.items():
        for label, mask in groups:
            n_t, t_ape, t_bias = median_errors(ttft[mask], data.ttft_ms[mask])
            n_p, p_ape, p_bias = median_errors(tpot[mask], data.tpot_ms[mask])
            if not n_t and not n_p:  # rows this scheme does not predict (held out by another)
                continue
            lines.append(f"{scheme:<9} {label:<{width}} {n_t:>6} {t_ape:>5.1f}% {t_bias:>+4.0f}% {n_p:>6} "
                         f"{p_ape:>5.1f}% {p_bias:>+4.0f}%")
    return "\n".join(lines)


def by_statistic(data, label: str, mask: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """``mask``'s rows of ``data`` split by the statistic their TTFT reports (``<label> TTFT means``,
    ``<label> TTFT medians``), where it has rows of both; else none."""
    import numpy as np

    if data.median is None or len(set(data.median[mask].tolist())) < 2:
        return []
    return [(f"{label} TTFT {name}s", mask & (data.median == median)) for name, median in (("mean", False),
                                                                                          ("median", True))]


def added_table(data, preds: dict[str, np.ndarray], added: np.ndarray, precision: np.ndarray) -> str:
    """Errors (``groups_table``) on the rows of ``--also`` (``added``) per scheme of ``preds``, by GPU
    type, by GPU type and mode, and by GPU type and ``precision`` (each of ``data``'s rows' weight
    precision), alone and with mode, where a GPU type has rows of more than one; and by the statistic
    their TTFT reports (mean, median) where they report both."""
    scored = added & ~data.repeats
    gpus, modes = data.labels["gpu"], data.labels["mode"]
    groups = [("all", scored)] + [(g, scored & (gpus == g)) for g in sorted(set(gpus[scored].tolist()))]
    groups += by_statistic(data, "all", scored)
    for g in sorted(set(gpus[scored].tolist())):
        mine = scored & (gpus == g)
        groups += by_statistic(data, g, mine)
        both_modes = len(set(modes[mine].tolist())) > 1
        groups += [(f"{g} {m}", mine & (modes == m)) for m in ("agg", "disagg") if both_modes]
        if len(set(precision[mine].tolist())) > 1:
            for p in sorted(set(precision[mine].tolist())):
                groups.append((f"{g} {p}", mine & (precision == p)))
                groups += [(f"{g} {p} {m}", mine & (precision == p) & (modes == m)) for m in ("agg", "disagg")
                           if both_modes and (mine & (precision == p) & (modes == m)).any()]
    title = ["ADDED ROWS (--also), by what their predictions held out:",
             *(f"  {scheme}: {ADDED_SCHEMES[scheme]}" for scheme in preds)]
    return groups_table(data, preds, groups, title)


# Predictions of the rows of --external: scheme -> the parameters they come from.
EXTERNAL_SCHEMES = {"shipped": "the shipped parameters (profiler/model/data/params.json)",
                    "refit": "parameters fitted with this code on every row of --data and --also (none of these)"}


def external_table(external, preds: dict[str, np.ndarray]) -> str:
    """Errors (``groups_table``) on the rows of ``--external`` (``external``: prepared rows, never
    fitted) per scheme of ``preds``, overall, by model family × GPU type, and by family × GPU × mode
    where a GPU has both modes."""
    scored = ~external.repeats
    families, gpus, modes = (external.labels[k] for k in ("family", "gpu", "mode"))
    pairs = sorted(set(zip(families[scored].tolist(), gpus[scored].tolist())))
    groups = [("all", scored), *by_statistic(external, "all", scored)]
    for fam, gpu in pairs:
        mask = scored & (families == fam) & (gpus == gpu)
        groups.append((f"{fam.split('/')[-1]} {gpu}", mask))
        groups += by_statistic(external, f"{fam.split('/')[-1]} {gpu}", mask)
        if len(set(modes[mask].tolist())) > 1:
            groups += [(f"{fam.split('/')[-1]} {gpu} {m}", mask & (modes == m)) for m in ("agg", "disagg")]
    title = ["EXTERNAL CHECK (--external: rows never fitted), by the parameters predicting them:",
             *(f"  {scheme}: {EXTERNAL_SCHEMES[scheme]}" for scheme in preds)]
    return groups_table(external, preds, groups, title)


TAIL_MAX_CLIENTS = 16  # the loads a TTFT tail is compared at (beyond them queueing spreads TTFTs too)


def tail_table(rows: list[dict]) -> str:
    """Mean less median TTFT (ms) of the aggregated rows that publish both, at up to
    ``TAIL_MAX_CLIENTS`` clients, by GPU, backend, precision, container image and month, ranges
    over clients per prompt length: what a run adds to its slowest requests beyond the engine's
    typical first token (the tail its harness term stands for on average)."""
    ranges: dict[tuple[str, ...], dict[str, list[float]]] = {}
    for row in rows:
        try:
            mean, median, clients = float(row["ttft_ms"]), float(row["median_ttft_ms"]), float(row["concurrency"])
        except (KeyError, TypeError, ValueError):
            continue
        if row.get("mode") != "agg" or clients > TAIL_MAX_CLIENTS or not (mean > 0 and median > 0):
            continue
        image = str(row.get("provenance", "")).rpartition("image=")[2].strip() or "?"
        key = (row["gpu"], row["backend"], row["precision"], image, str(row.get("date", ""))[:7])
        ranges.setdefault(key, {}).setdefault(str(row["isl"]), []).append(mean - median)
    head = f"{'gpu':<9} {'backend':<7} {'prec':<5} {'month':<8} {'image':<45} mean − median TTFT, ms, by ISL"
    lines = [f"TTFT TAIL of rows publishing mean and median (aggregated, ≤ {TAIL_MAX_CLIENTS} clients)", head,
             "-" * len(head)]
    for (gpu, backend, precision, image, month), by_isl in sorted(ranges.items()):
        spans = "  ".join(f"{isl}: {min(v):.0f} to {max(v):.0f}"
                          for isl, v in sorted(by_isl.items(), key=lambda kv: int(kv[0])))
        lines.append(f"{gpu:<9} {backend:<7} {precision:<5} {month:<8} {image[:45]:<45} {spans}")
    return "\n".join(lines)


def harness_table(data, params: dict[str, float]) -> str:
    """The per-request TTFT costs of ``params`` (ms): each backend's engine cost (a plan's) and
    typical harness term, and each (harness, backend) term, with the distinct measurements of
    ``data`` it applies to."""
    import numpy as np

    from profiler.model.harness import factor_name, terms

    sizes = terms(params)
    counts: dict[tuple[str, str], int] = {}
    for h, b in zip(data.harness[~data.repeats].tolist(), data.labels["backend"][~data.repeats].tolist()):
        counts[h, b] = counts.get((h, b), 0) + 1
    lines = ["PER-REQUEST TTFT COSTS (ms): the engine's own (measured; what a plan predicts) and what each "
             "harness adds to it (fitted; as measured only)",
             f"{'backend':<8} {'engine':>7} {'typical harness':>15}"]
    for backend in sorted({b for _, b in counts}):
        lines.append(f"{backend:<8} {params[f'ttft_ms_{backend}']:>7.1f} {sizes.get(backend, np.nan):>15.1f}")
    lines.append(f"{'harness':<32} {'backend':<8} {'rows':>5} {'term':>7}")
    for (h, b), n in sorted(counts.items()):
        fitted = factor_name(h, b) in params
        term = sizes.get(f"{h}:{b}", sizes.get(b, np.nan))
        lines.append(f"{h or '(none named)':<32} {b:<8} {n:>5} {term:>7.1f}" + ("" if fitted else "  (typical)"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="calibration CSV (default: ../shared/data next to the repository)")
    parser.add_argument("--max-evals", type=int, default=200, help="model evaluations per CV fit (default 200)")
    parser.add_argument("--also", action="append", default=[], metavar="CSV",
                        help="more measured rows fitted with --data's and reported on their own (repeatable)")
    parser.add_argument("--external", action="append", default=[], metavar="CSV",
                        help="measured rows never fitted, scored on their own: an external check (repeatable)")
    parser.add_argument("--in-sample-only", action="store_true", help="skip cross-validation (seconds, not minutes)")
    parser.add_argument("--amd-only", action="store_true",
                        help="cross-validate only the folds holding out AMD rows of --also (each AMD GPU type, "
                             "CDNA3, every AMD row): their NVIDIA fit done once, the same numbers in a fraction "
                             "of the time")
    parser.add_argument("--source-prior", type=float, default=None, metavar="S",
                        help="prior strength pulling each harness's TTFT term toward its backend's typical one "
                             "(default: the shipped fit's; inf: one term per backend)")
    parser.add_argument("--schemes", nargs="+", choices=tuple(SCHEMES), default=list(SCHEMES), metavar="SCHEME",
                        help=f"held-out groupings to cross-validate, of {', '.join(SCHEMES)} (default: all; "
                             "one fit per group, so 'disagg' alone takes one fit)")
    add_recipes_argument(parser)
    add_workers_argument(parser)
    args = parser.parse_args(argv)
    schemes = {scheme: title for scheme, title in SCHEMES.items() if scheme in args.schemes}

    import numpy as np

    from profiler.model.calibrate import (ENGINE_ALONE, fit_by_vendor, kernel_prior, measured_column, measured_mask,
                                          median_errors, predict_as_measured, prepare_rows)
    from profiler.model.harness import shipped_terms
    from profiler.model.params import shipped_params

    if (path := given_data_path(args.data)) is None:
        return 1
    rows = read_rows(path)
    main_rows = len(rows)
    for extra in args.also:
        rows += read_rows(Path(extra))
    rows = with_recipes_of(rows, args)
    data = prepare_rows(rows)
    added = data.index >= main_rows  # rows of --also, reported on their own
    predicted = len(data.index)
    measured = int(((data.ttft_ms > 0) & (data.tpot_ms > 0)).sum())
    print(f"data: {path.name}, {len(rows)} rows")
    print(f"coverage: {predicted}/{len(rows)} rows predicted = {100 * predicted / len(rows):.1f}% (target ≥ 95%)")
    reasons: dict[str, int] = {}
    for message in data.errors.values():
        key = message.split(" needs ")[0] if " needs " in message else message
        reasons[key] = reasons.get(key, 0) + 1
    for message, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"  not predicted ({n}): {message[:140]}")
    print(f"rows with both measurements among those predicted: {measured}; "
          f"{int(data.repeats.sum())} of them repeat another row's measurement and are scored once")
    distinct = measured_mask(data) & ~data.repeats
    pairs = measured_twice(rows, data.index[distinct], data.ttft_ms[distinct], data.tpot_ms[distinct])
    if pairs:
        apart = np.array(pairs, dtype=float)
        target = TARGETS["family"]
        for label, pick in (("", slice(None)), (" with the same backend version", apart[:, 2] == 1)):
            t, p = apart[pick, 0] * 100, apart[pick, 1] * 100
            print(f"measured more than once{label}: {t.size} pairs of distinct measurements with the same inputs; "
                  f"TTFT apart by a median {np.median(t):.1f}% ({100 * np.mean(t > target['TTFT']):.0f}% of pairs "
                  f"more than {target['TTFT']:.0f}%), TPOT {np.median(p):.1f}% ({100 * np.mean(p > target['TPOT']):.0f}% "
                  f"more than {target['TPOT']:.0f}%)")
    print()

    shipped = shipped_params() | shipped_terms()
    out = predict_as_measured(data, shipped)
    print(format_table(error_rows(data, *only(~added, out["ttft_ms"], out["itl_ms"])),
                       "IN SAMPLE, as measured (shipped parameters and harness terms on the rows they were fitted "
                       "on; NOT an accuracy measure)"))
    print("\n" + harness_table(data, shipped))
    precision = np.array([str(rows[i].get("precision")) for i in data.index])
    if added.any():
        print("\n" + added_table(data, {"shipped": np.stack([out["ttft_ms"], out["itl_ms"]])}, added, precision))
    external_rows = [row for extra in args.external for row in read_rows(Path(extra))]
    external = prepare_rows(external_rows) if args.external else None
    if added.any() or external_rows:
        print("\n" + tail_table(rows[main_rows:] + external_rows))
    if external is not None:
        ext_shipped = predict_as_measured(external, shipped)
        print("\n" + external_table(external, {"shipped": np.stack([ext_shipped["ttft_ms"], ext_shipped["itl_ms"]])}))
    if args.in_sample_only:
        return 0

    start = time.perf_counter()
    kernel_rows, kernels = read_kernels(path, None)
    print(f"\nGEMM shape prior: {'fitted to ' + kernels['data'] if kernels else 'physical defaults (no kernel data)'}")
    prior = kernel_prior(kernel_rows)
    if external is not None:
        refitted = fit_by_vendor(data, prior, max_evals=args.max_evals,
                                 **({} if args.source_prior is None else {"source_prior": args.source_prior}))
        refit = predict_as_measured(external, refitted)
        print("\n" + external_table(external, {scheme: np.stack([p["ttft_ms"], p["itl_ms"]])
                                                for scheme, p in (("shipped", ext_shipped), ("refit", refit))}))
    if args.amd_only:
        if not (data.batch.decode["cdna"] > 0).any():
            print("error: --amd-only needs AMD rows (e.g. --also benchmarks/data/amd_measured.csv)", file=sys.stderr)
            return 1
        every = run_cross_validation(data, prior, args.workers, max_evals=args.max_evals,
                                     source_prior=args.source_prior, amd_only=True)
        print("\n" + added_table(data, {scheme: every[scheme][:2] for scheme in ADDED_SCHEMES if scheme in every},
                                 added, precision))
        print(f"\ncross-validation of the AMD folds took {(time.perf_counter() - start) / 60:.1f} min")
        return 0
    disagg = data.labels["mode"] == "disagg"
    held_out = {"disagg": disagg} if "disagg" in schemes else {}
    amd = data.batch.decode["cdna"] > 0
    if amd.any():
        held_out |= {"cdna3": data.batch.decode["cdna"] == 3, "amd": amd}
    every = run_cross_validation(data, prior, args.workers, max_evals=args.max_evals, held_out=held_out,
                                 source_prior=args.source_prior,
                                 schemes=tuple(s for s in ("family", "gpu") if s in schemes))
    if added.any():
        print("\n" + added_table(data, {scheme: every[scheme][:2] for scheme in ADDED_SCHEMES if scheme in every},
                                 added, precision))
    preds = {scheme: np.stack(only(~added, *every[scheme])) for scheme in schemes}
    minutes = (time.perf_counter() - start) / 60
    labels = data.labels
    sweeps = np.array(["|".join(key) for key in zip(labels["family"], labels["gpu"], labels["backend"], labels["mode"])])
    throughput = np.where(data.repeats | added, np.nan,
                          measured_column(rows, data.index, "derived_output_tok_s_per_gpu")[0])
    from noise_floor import floor_lines  # beside this script

    summary = []
    for scheme, title in schemes.items():
        ttft, tpot, tok_s = preds[scheme]
        table = error_rows(data, ttft, tpot)
        print("\n" + format_table(table, f"GROUPED CROSS-VALIDATION: {title}"))
        _, _, n, t_ape, t_bias, p_ape, p_bias = table[0]
        summary.append(f"{scheme:<7} n={n}  TTFT MdAPE {t_ape:.1f}% (bias {np.expm1(t_bias) * 100:+.0f}%)  "
                       f"TPOT MdAPE {p_ape:.1f}% (bias {np.expm1(p_bias) * 100:+.0f}%)")
        scored = (np.isfinite(ttft) & np.isfinite(tpot) & (ttft > 0) & (tpot > 0)
                  & (data.ttft_ms > 0) & (data.tpot_ms > 0) & ~data.repeats)
        errors = {name: np.abs(pred - meas)[scored] / meas[scored] * 100
                  for name, pred, meas in (("TTFT", ttft, data.ttft_ms), ("TPOT", tpot, data.tpot_ms))}
        intervals = [sweep_interval(errors[name], sweeps[scored]) for name in ("TTFT", "TPOT")]
        for name, err in errors.items():
            within, short = rows_short(err, TARGETS[scheme][name])
            summary.append(f"        {name}: {within} of {err.size} rows within {TARGETS[scheme][name]:.0f}%"
                           + (f", {short} short of the target" if short else ", target met"))
        summary.append(f"        95% interval, whole sweeps resampled ({len(set(sweeps[scored]))} sweeps): "
                       f"TTFT {intervals[0][0]:.1f}–{intervals[0][1]:.1f}%  TPOT {intervals[1][0]:.1f}–{intervals[1][1]:.1f}%")
        engine = [np.where(added, np.nan, x) for x in every[scheme + ENGINE_ALONE][:2]]
        (_, e_ttft, e_ttft_bias), (_, e_tpot, e_tpot_bias) = (median_errors(x, m) for x, m in zip(
            engine, (np.where(data.repeats, np.nan, data.ttft_ms), np.where(data.repeats, np.nan, data.tpot_ms))))
        summary.append(f"        engine alone (no harness term): TTFT MdAPE {e_ttft:.1f}% (bias {e_ttft_bias:+.0f}%)  "
                       f"TPOT MdAPE {e_tpot:.1f}% (bias {e_tpot_bias:+.0f}%)")
        keys = [inputs_key(rows[i]) for i in data.index[scored]]
        summary += floor_lines(keys, {"TTFT": data.ttft_ms[scored], "TPOT": data.tpot_ms[scored]},
                               {"TTFT": ttft[scored], "TPOT": tpot[scored]})
        n_tok, tok_ape, tok_bias = median_errors(tok_s, throughput)
        summary.append(f"        output tok/s per GPU (n={n_tok}, rows with measured throughput): "
                       f"MdAPE {tok_ape:.1f}% (bias {tok_bias:+.0f}%)")
        predicted = ~np.isnan(ttft)
        for label, rows_mask in (("recorded deployment", predicted & ~data.inferred & ~data.repeats),
                                 ("inferred deployment", predicted & data.inferred & ~data.repeats)):
            t_err = np.abs(ttft - data.ttft_ms)[rows_mask] / data.ttft_ms[rows_mask] * 100
            p_err = np.abs(tpot - data.tpot_ms)[rows_mask] / data.tpot_ms[rows_mask] * 100
            summary.append(f"        {label:<20} n={int(rows_mask.sum())}  TTFT MdAPE {np.nanmedian(t_err):.1f}%  "
                           f"TPOT MdAPE {np.nanmedian(p_err):.1f}%")
    targets = "; ".join(f"{scheme} TTFT ≤ {TARGETS[scheme]['TTFT']:.0f}%, TPOT ≤ {TARGETS[scheme]['TPOT']:.0f}%"
                        for scheme in schemes)
    prior_text = "default" if args.source_prior is None else f"{args.source_prior:g}"
    print(f"\nsummary, as measured unless said (targets: {targets}; harness prior {prior_text}; "
          f"cross-validation took {minutes:.1f} min)")
    print("\n".join(summary))
    workloads = np.array([workload_key(rows[i]) for i in data.index])
    configurations = np.array(["|".join(inputs_key(rows[i])) for i in data.index])
    print("\n" + regret_table(preds, np.stack([data.ttft_ms, data.tpot_ms, throughput]), workloads, configurations,
                              disagg))
    from accuracy_breakdown import breakdown_table, labels as split_labels  # beside this script

    if "disagg" not in preds:
        return 0
    print("\n" + breakdown_table("DISAGGREGATED ROWS HELD OUT AS ONE GROUP, by deployment (recorded: worker counts "
                                  "in the data) and split", split_labels(rows, data.index), data.inferred,
                                  disagg & ~data.repeats, *preds["disagg"][:2], data.ttft_ms, data.tpot_ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
