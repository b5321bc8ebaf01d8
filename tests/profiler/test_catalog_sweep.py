"""Every catalog model on every GPU and backend: estimates are finite and physical, or refused
with a named field; never a crash, and load moves TTFT, ITL and throughput the right way."""

from __future__ import annotations

import math

import pytest

from profiler.model.config import Parallel, ServingConfig
from profiler.model.errors import ModelError
from profiler.model.estimate import estimate
from profiler.model.gpus import GPUS
from profiler.model.model_catalog import MODELS

CLIENTS = (1, 16, 256)


def _engines(model) -> list[Parallel]:
    """A small engine and a large one (attention-DP with EP for MoE models, TP otherwise)."""
    big = Parallel(tp=1, dp=8, moe_ep=8) if model.is_moe else Parallel(tp=8)
    return [Parallel(tp=2), big]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["vllm", "sglang", "trtllm"])
def test_every_catalog_model_on_every_gpu_is_estimated_or_refused_by_name(backend):
    unserved = []
    for model in MODELS:
        served = False
        for gpu in GPUS:
            for engine in _engines(model):
                last = None
                for clients in CLIENTS:
                    config = ServingConfig(model=model.hf_id, gpu=gpu.name, backend=backend, engine=engine,
                                           isl_tokens=2048, osl_tokens=256, concurrency=clients)
                    try:
                        est = estimate(config)
                    except ModelError as exc:
                        assert exc.field and exc.message, (config, exc)
                        break
                    served = True
                    values = (est.ttft_ms, est.ttft_p90_ms, est.ttft_p99_ms, est.itl_ms, est.output_tok_s_per_gpu,
                              est.requests_per_s)
                    assert all(math.isfinite(v) and v > 0 for v in values), (config, values)
                    assert est.ttft_p90_ms <= est.ttft_p99_ms * (1 + 1e-9), config
                    assert sum(dict(est.ttft_parts).values()) == pytest.approx(est.ttft_ms, rel=1e-9), config
                    if last is not None and not est.saturated:
                        assert est.itl_ms >= last.itl_ms * (1 - 1e-9), config
                        assert est.ttft_ms >= last.ttft_ms * (1 - 0.02), config
                        assert est.output_tok_s_per_gpu >= last.output_tok_s_per_gpu * (1 - 1e-9), config
                    last = est
        if not served:
            unserved.append(model.hf_id)
    assert not unserved, f"no GPU and engine here serves {unserved}"  # eight of the largest GPUs hold any of them


@pytest.mark.parametrize("gpu", ["h100_sxm", "b200_sxm", "gb200", "mi300x"])
def test_disaggregated_poisson_loads_across_the_catalog(gpu):
    """Rates up to and past what each 1P2D deployment serves: finite while it keeps up, the
    served rate never above the offered one, and past the limit flagged saturated."""
    for model in MODELS:
        engine = Parallel(tp=1, dp=8, moe_ep=8) if model.is_moe else Parallel(tp=8)
        last = None
        for rate in (0.1, 1.0, 10.0, 1000.0):
            config = ServingConfig(model=model.hf_id, gpu=gpu, backend="vllm", mode="disagg", prefill=engine,
                                   decode=engine, prefill_workers=1, decode_workers=2, isl_tokens=4096,
                                   osl_tokens=512, request_rate=rate)
            try:
                est = estimate(config)
            except ModelError as exc:
                assert exc.field and exc.message, (config, exc)
                break
            assert est.requests_per_s <= rate * (1 + 1e-6), config
            assert math.isfinite(est.itl_ms) and est.itl_ms > 0, config
            if not est.saturated:
                assert math.isfinite(est.ttft_ms) and est.requests_per_s == pytest.approx(rate, rel=1e-3), config
            if last is not None:
                assert est.requests_per_s >= last.requests_per_s * (1 - 1e-9), config
                assert est.saturated or not last.saturated, config
            last = est
        if last is not None:
            assert last.saturated, f"{model.hf_id} on {gpu}: 1,000 requests/s of 4k prompts served by 24 GPUs"
