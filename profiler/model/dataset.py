"""Rows of measured serving data (the calibration CSV's columns) as ServingConfigs.

Pure: takes rows already read (dicts of strings or numbers). Conventions of the data:
- ``concurrency`` is closed-loop client concurrency across the whole deployment;
- a MoE engine whose TP does not divide the attention heads (e.g. TP 48 for 128 heads) can
  only run attention data-parallel, so it is read as dp = tp, tp = 1; one whose TP exceeds
  the GPU's scale-up (NVLink) domain runs attention TP inside the domain and DP across it
  (``domain`` is the domain size, in GPUs);
- a ``moe_ep`` of 0 means no expert parallelism; one that does not divide the engine's GPUs
  (tp × attn_dp) is an error naming the column;
- some MoE rows spell an engine's GPU count as a product: ``tp × attn_dp`` recorded as
  ``moe_tp × moe_ep`` (both above 1) beyond one scale-up domain, or ``tp = attn_dp = n``
  with ``moe_ep = n²``. The data holds the very same measurements under the smaller
  spelling too (the ``moe_tp``-GPU engine with EP ``moe_ep``; the n-GPU attention-DP engine
  with EP n: e.g. MiniMax-M2.5 on H100 at ``tp 4, attn_dp 4, moe_ep 16`` and at ``tp 4,
  moe_ep 4``), so such rows are read as the smaller engine and marked inferred;
- an engine whose experts would be split by TP into shards that do not divide their width
  (e.g. DeepSeek's 2048-wide experts over 36 attention-DP ranks with ``moe_ep`` 1) cannot
  run that way; wide-EP kernels spread the experts over all its GPUs instead (redundant
  slots where they do not divide evenly), so such rows are read so and marked inferred (the
  data does not say how the experts were placed);
- optional ``spec_tokens`` and ``spec_acceptance`` columns describe speculative decoding
  (tokens drafted per step, chance each is accepted); absent, there is none;
- optional ``max_batch`` (running sequences per engine) and ``max_num_tokens`` (prompt
  tokens per step of each attention rank) columns set the engine's limits; empty or absent,
  the backend's defaults;
- ``num_gpus`` (optional) counts the whole deployment's GPUs: an aggregated row with k
  engines' worth runs k replicas sharing the concurrency; a disaggregated row's must equal
  its workers' GPUs. A count that no whole deployment of the row's engines has is an error
  naming ``num_gpus``. Rows spelling an engine as a product (above) record the product
  there, so it is not read for them;
- in disaggregated rows without worker counts (sources that spell a MoE engine's GPU count as its
  ``tp``, record no attention DP, and repeat the prefill's ``moe_ep`` for the decode engine), a
  decode engine of more than ``UNRECORDED_WIDEST_DECODE_TP`` GPUs is read as attention DP over
  its GPUs with its experts spread over all of them (wide EP), as every such engine whose
  measurement the data also holds with worker counts was deployed;
- likewise an aggregated MoE engine of more than ``UNRECORDED_WIDEST_DECODE_TP`` GPUs spelled as
  ``tp = moe_tp`` with neither attention DP nor EP, inside one scale-up domain, is a GPU count,
  not a TP width: it is read as attention DP with wide EP. The sweeps that spell engines so record 12- to 72-GPU engines
  alike, most at widths that cannot split the attention heads (and are read as attention DP
  above); at 64 GPUs pure TP would replicate DeepSeek-R1's MLA cache on every rank, a KV read
  about twice the measured 10 ms TPOT at 538 clients of 8k-token prompts;
- disaggregated rows without worker counts are read as deployed the way the data's recorded
  disaggregated deployments are (``UNRECORDED_GPUS``): each role holds about scale × C^power
  GPUs at C clients, in whole workers, at least one (recorded in the assumptions); with
  ``num_gpus`` given, the split of exactly that many GPUs whose decode:prefill ratio is
  nearest that of the two roles' GPUs at C.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from profiler.model.config import Parallel, ServingConfig
from profiler.model.errors import ModelError
from profiler.model.estimate import Prepared, prepare
from profiler.model.gpus import get_gpu
from profiler.model.model_catalog import resolve_model


class RoleGpus(NamedTuple):
    """GPUs one role (prefill or decode) of a disaggregated deployment holds at C closed-loop
    clients: ``scale`` × C^``power``."""

    scale: float
    power: float

    def at(self, clients: float) -> float:
        """GPUs (not whole workers) at ``clients`` clients."""
        return self.scale * clients**self.power


# Widest attention TP a decode engine of an unrecorded deployment is read with (GPUs).
UNRECORDED_WIDEST_DECODE_TP = 8
# Prompts of at least this many tokens (ISL) are long: their deployments hold more prefill GPUs.
LONG_PROMPT_TOKENS = 4096
# (prefill, decode) GPUs of a deployment whose worker counts are not recorded, for short and long
# prompts: least squares of log GPUs on log clients over the data's 177 recorded disaggregated
# deployments (their deployment columns only; ``benchmarks/disagg_sizing.py``). They keep about
# 20 decode GPUs at any load and add prefill GPUs slowly with clients, faster for long prompts.
UNRECORDED_GPUS = {False: (RoleGpus(3.73, 0.084), RoleGpus(20.68, 0.021)),
                   True: (RoleGpus(2.48, 0.287), RoleGpus(15.68, 0.041))}
# The columns every row needs (``row_config`` has no default for them); the others are optional.
REQUIRED_COLUMNS = ("model", "gpu", "isl", "osl", "concurrency")


def _num(row: dict, key: str) -> float | None:
    value = row.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError) as exc:
        raise ModelError(key, f"not a number: {value!r}") from exc
    if math.isinf(x):
        raise ModelError(key, f"must be finite, got {value!r}")
    return None if math.isnan(x) else x


def _int(row: dict, key: str, default: int | None = None, least: int = 0) -> int:
    """An integer column, at least ``least`` (``default`` when empty; missing is an error without one)."""
    x = _num(row, key)
    if x is None:
        if default is None:
            raise ModelError(key, "missing")
        return default
    if x != int(x) or x < least:
        raise ModelError(key, f"must be an integer ≥ {least}, got {row.get(key)!r}")
    return int(x)


def _limit(row: dict, key: str) -> int | None:
    """An optional positive integer column (None when empty or absent)."""
    return None if _num(row, key) is None else _int(row, key, least=1)


def _product_spelling(row: dict, prefix: str, moe: bool, domain: int) -> tuple[int, int, int] | None:
    """(tp, attention dp, ep) of the real engine when the row spells its GPU count as a product (see above)."""
    if not moe:
        return None
    tp, dp = _int(row, f"{prefix}tp", 1, least=1), _int(row, f"{prefix}attn_dp", 1) or 1
    moe_tp, ep = _int(row, f"{prefix}moe_tp", 1) or 1, _int(row, f"{prefix}moe_ep", 1) or 1
    if tp * dp > domain and moe_tp > 1 and ep > 1 and moe_tp * ep == tp * dp:
        return (moe_tp, 1, ep) if dp == 1 else (1, moe_tp, ep)
    if tp == dp > 1 and moe_tp == 1 and ep == tp * dp:
        return 1, tp, tp
    return None


def _wide_engine(row: dict, prefix: str, moe: bool) -> tuple[int, int, int] | None:
    """(tp, attention dp, ep) of an engine whose GPU count is spelled as its ``tp``, read as wide EP (see above)."""
    gpus = _int(row, f"{prefix}tp", 1, least=1)
    if not moe or (_int(row, f"{prefix}attn_dp", 1) or 1) > 1 or gpus <= UNRECORDED_WIDEST_DECODE_TP:
        return None
    return 1, gpus, gpus


def _wide_aggregated(row: dict, moe: bool, domain: int) -> tuple[int, int, int] | None:
    """``_wide_engine`` of an aggregated row spelling ``tp = moe_tp`` without EP inside one domain (see above)."""
    tp = _int(row, "tp", 1, least=1)
    if (_int(row, "moe_ep", 1) or 1) > 1 or (_int(row, "moe_tp", 1) or 1) != tp or tp > domain:
        return None
    return _wide_engine(row, "", moe)


def _parallel(row: dict, prefix: str, heads: int | None, moe: bool, domain: int,
              spelled: tuple[int, int, int] | None) -> Parallel:
    """The engine a role's columns describe; ``spelled``: (tp, attention dp, ep) as a spelling rule
    reads them (``_product_spelling``, ``_wide_engine``), None to read the columns."""
    if spelled:
        tp, dp, ep = spelled
    else:
        tp, dp = _int(row, f"{prefix}tp", 1, least=1), _int(row, f"{prefix}attn_dp", 1) or 1
        ep = (_int(row, f"{prefix}moe_ep", 1) or 1) if moe else 1
    if moe and heads and heads % tp and dp == 1:
        tp, dp = 1, tp
    if moe and dp == 1 and tp > domain:
        # Attention TP does not cross the scale-up domain: the rest is attention-DP.
        inner = max(d for d in range(1, domain + 1) if tp % d == 0 and (not heads or heads % d == 0))
        tp, dp = inner, tp // inner
    if not moe:
        dp = 1
    if moe and (tp * dp) % ep:
        raise ModelError(f"{prefix}moe_ep", f"{row.get(prefix + 'moe_ep')!r} does not divide the engine's "
                                            f"{tp * dp} GPUs (tp × attn_dp)")
    return Parallel(tp=tp, pp=_int(row, f"{prefix}pp", 1, least=1), dp=dp, moe_ep=ep)


def row_config(row: dict, heads: int | None = None, moe: bool = False, domain: int = 72,
               expert_width: int | None = None) -> tuple[ServingConfig, tuple[str, ...]]:
    """The ServingConfig a measured row describes, and the assumptions made reading it
    (``expert_width``: the routed experts' intermediate size, when known)."""
    notes: list[str] = []
    mode = str(row.get("mode") or "agg").strip().lower()
    if mode not in ("agg", "disagg"):
        raise ModelError("mode", f"must be agg or disagg, got {mode!r}")
    conc = _num(row, "concurrency")
    if conc is None:
        raise ModelError("concurrency", "missing")
    if conc <= 0:
        raise ModelError("concurrency", f"must be > 0, got {row.get('concurrency')!r}")
    common = dict(model=str(row.get("model") or ""), gpu=str(row.get("gpu") or ""),
                  backend=str(row.get("backend") or "vllm").strip().lower(),
                  precision=(str(row["precision"]).strip() or None) if row.get("precision") else None,
                  mode=mode, isl_tokens=_int(row, "isl", least=1), osl_tokens=_int(row, "osl", least=1), concurrency=conc,
                  spec_tokens=_int(row, "spec_tokens", 0), spec_acceptance=_num(row, "spec_acceptance"),
                  max_batch=_limit(row, "max_batch"), max_num_tokens=_limit(row, "max_num_tokens"))
    engines, products = {}, False
    unrecorded = mode == "disagg" and (_num(row, "p_workers") is None or _num(row, "d_workers") is None)
    for prefix in ("",) if mode == "agg" else ("p_", "d_"):
        spelled = _product_spelling(row, prefix, moe, domain)
        products = products or bool(spelled)
        widened = None if spelled else (_wide_aggregated(row, moe, domain) if mode == "agg" else
                                        _wide_engine(row, prefix, moe) if unrecorded and prefix == "d_" else None)
        if widened:
            notes.append(f"{prefix}tp {row.get(prefix + 'tp')} read as attention dp {widened[1]}, ep {widened[2]}")
            spelled = widened
        elif spelled:
            notes.append(f"{prefix}tp {row.get(prefix + 'tp')} × {prefix}attn_dp {row.get(prefix + 'attn_dp') or 1} "
                         f"read as a product: a {spelled[0] * spelled[1]}-GPU engine")
        par = _parallel(row, prefix, heads, moe, domain, spelled)
        if moe and expert_width and expert_width % par.expert_tp:
            wide = par.tp * par.dp
            notes.append(f"{prefix}experts split {par.expert_tp} ways by TP (width {expert_width}) cannot be: "
                         f"read as expert parallelism over the engine's {wide} GPUs")
            par = par.model_copy(update={"moe_ep": wide})
        engines[prefix] = par
    total = None if products else _int(row, "num_gpus", 0, least=1) or None
    if mode == "agg":
        engine = engines[""]
        if total is not None and total % engine.gpus:
            raise ModelError("num_gpus", f"{total} is not a whole number of {engine.gpus}-GPU engines "
                                         f"(tp × pp × attn_dp)")
        return ServingConfig(engine=engine, replicas=(total or engine.gpus) // engine.gpus, **common), tuple(notes)
    prefill, decode = engines["p_"], engines["d_"]
    if _num(row, "p_workers") is not None and _num(row, "d_workers") is not None:
        pw, dw = _int(row, "p_workers", least=1), _int(row, "d_workers", least=1)
        if total is not None and total != pw * prefill.gpus + dw * decode.gpus:
            raise ModelError("num_gpus", f"{total} GPUs, but {pw} prefill workers of {prefill.gpus} and "
                                         f"{dw} decode workers of {decode.gpus} GPUs are "
                                         f"{pw * prefill.gpus + dw * decode.gpus}")
    else:
        roles = UNRECORDED_GPUS[common["isl_tokens"] >= LONG_PROMPT_TOKENS]
        pw, dw = (_split(total, prefill.gpus, decode.gpus, roles[1].at(conc) / roles[0].at(conc))
                  if total is not None else (_workers(roles[0].at(conc), prefill), _workers(roles[1].at(conc), decode)))
        notes.append(f"worker counts missing: read as {pw} prefill + {dw} decode workers")
    return ServingConfig(prefill=prefill, decode=decode, prefill_workers=int(pw), decode_workers=int(dw),
                         **common), tuple(notes)


def _workers(gpus: float, engine: Parallel) -> int:
    """Whole ``engine`` workers nearest ``gpus`` GPUs, at least one."""
    return max(1, round(gpus / engine.gpus))


def _split(total: int, prefill_gpus: int, decode_gpus: int, ratio: float) -> tuple[int, int]:
    """(prefill, decode) workers on exactly ``total`` GPUs, decode:prefill GPUs nearest
    ``ratio`` (fewer prefill workers on a tie)."""
    splits = [(pw, (total - pw * prefill_gpus) // decode_gpus) for pw in range(1, total // prefill_gpus + 1)
              if total - pw * prefill_gpus >= decode_gpus and (total - pw * prefill_gpus) % decode_gpus == 0]
    if not splits:
        raise ModelError("num_gpus", f"{total} GPUs hold no whole number of {prefill_gpus}-GPU prefill and "
                                     f"{decode_gpus}-GPU decode workers (at least one of each)")
    off = lambda s: abs(math.log(s[1] * decode_gpus / (s[0] * prefill_gpus) / ratio))  # noqa: E731
    return min(splits, key=lambda s: (off(s), s[0]))


def row_prepared(row: dict) -> tuple[Prepared, tuple[str, ...]]:
    """A measured row resolved and prepared for ``evaluate``, with the assumptions made."""
    model, _ = resolve_model(str(row.get("model") or ""))
    gpu = get_gpu(str(row.get("gpu") or ""))
    config, notes = row_config(row, model.num_heads, model.is_moe, gpu.nvlink_domain, model.moe_intermediate_size)
    return prepare(config), notes
