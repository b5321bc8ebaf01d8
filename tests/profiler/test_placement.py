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


