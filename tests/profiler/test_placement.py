"""Clients a router places on full engines (profiler.model.queueing.unplaced_clients)."""

import numpy as np
import pytest

from profiler.model.queueing import unplaced_clients


@pytest.mark.parametrize("clients, engines, slots", [(7, 7, 1), (48, 6, 8), (10, 4, 2.5), (135, 15, 8), (60, 15, 4)])
def test_matches_random_placement_drawn(clients, engines, slots):
    draws = np.random.default_rng(0).multinomial(clients, [1 / engines] * engines, size=100_000)
    drawn = np.maximum(draws - slots, 0).sum(axis=1).mean()
    assert unplaced_clients(clients, engines, slots) == pytest.approx(drawn, rel=0.02)


def test_one_engine_or_room_in_any_engine_leaves_only_the_even_excess():
    assert unplaced_clients(2112, 1, 2048) == 64
    assert unplaced_clients(5, 4, 8) == 0
    assert unplaced_clients(np.array([2112.0, 5.0]), np.array([1.0, 4.0]), np.array([2048.0, 8.0])).tolist() == [64, 0]
    assert unplaced_clients(100, 4, np.inf) == 0


def test_never_less_than_the_clients_beyond_every_slot():
    out = unplaced_clients(np.array([9.0, 40.0]), 4, 2)
    assert np.all(out >= np.array([1.0, 32.0]))


def test_clients_equal_to_one_slot_engines_wait_for_the_engines_others_landed_on():
    """7 clients on 7 decode engines of one slot: at random, 2.4 of them find their engine full and
    wait for its sequence to finish, so the TTFT holds a good part of a whole decode; 7 clients on one
    engine of 7 slots waits for nothing (and evenly placed ones would not either)."""
    from profiler.model.config import Parallel, ServingConfig
    from profiler.model.estimate import estimate

    def ttft_ms(decode_workers: int, max_batch: int) -> tuple[float, float]:
        par = Parallel(tp=8, moe_ep=8)
        est = estimate(ServingConfig(model="deepseek-ai/DeepSeek-R1", gpu="b200", mode="disagg", prefill=par,
                                     decode=par, prefill_workers=1, decode_workers=decode_workers, isl_tokens=1024,
                                     osl_tokens=1024, concurrency=7, max_batch=max_batch))
        return est.ttft_ms, est.itl_ms

    spread, spread_itl = ttft_ms(7, 1)
    together, _ = ttft_ms(1, 7)
    whole_decode = 1023 * spread_itl
    assert spread > together + 0.2 * whole_decode
    assert spread < together + whole_decode


def test_aggregated_replicas_behind_a_balancing_router_are_not_charged_for_placement():
    """32 clients on 2 aggregated engines of 16 slots each: the router spreads them evenly, so the
    TTFT is that of engines with room to spare."""
    from profiler.model.config import Parallel, ServingConfig
    from profiler.model.estimate import estimate

    def ttft_ms(max_batch: int) -> float:
        return estimate(ServingConfig(model="meta-llama/Llama-3.1-70B-Instruct", gpu="h100_sxm", mode="agg",
                                      engine=Parallel(tp=4), replicas=2, isl_tokens=2000, osl_tokens=300,
                                      concurrency=32, max_batch=max_batch)).ttft_ms

    assert ttft_ms(16) == pytest.approx(ttft_ms(64), rel=1e-9)
