"""Queueing delays of prefill servers, element-wise on floats or numpy arrays.

Prefill is modelled as an M/D/c queue: Poisson arrivals at rate ``rate`` (1/s), ``servers``
identical servers, deterministic service ``service_s``. The mean wait uses the
Allen–Cunneen approximation: the M/M/c wait (Erlang C) times (1 + cs²)/2 with cs² = 0,
which is exact for c = 1 (M/D/1: ρD / (2(1 − ρ))). The waiting time given that a request
waits is taken as exponential, which gives the tail quantiles.

scipy.special is imported by the first Erlang C computed: closed loops never ask for one, and
a command that plans only them does not pay for the import (a third of a second at start-up).
"""

from __future__ import annotations

import numpy as np


def erlang_c(servers, load):
    """Probability that an arrival waits, for ``servers`` servers and offered ``load`` = rate × service.

    Erlang B is the Poisson ratio pmf(c; a) / cdf(c; a), computed in closed form (no loop
    over servers), and Erlang C = B / (1 − ρ(1 − B)).
    """
    from scipy.special import gammaln, pdtr

    servers = np.asarray(servers, dtype=float)
    load = np.maximum(np.asarray(load, dtype=float), 1e-300)
    log_pmf = servers * np.log(load) - load - gammaln(servers + 1.0)
    blocking = np.minimum(np.exp(log_pmf) / np.maximum(pdtr(servers, load), 1e-300), 1.0)
    rho = np.minimum(load / servers, 1.0)
    return blocking / np.maximum(1.0 - rho * (1.0 - blocking), 1e-12)


def mdc_wait(rate, service_s, servers, poisson=True):
    """(mean wait s, probability of waiting, utilization) of an M/D/c queue; wait is inf when ρ ≥ 1.

    ``poisson`` says where the arrivals are Poisson (a bool, or a mask that broadcasts with the
    rest); when they are nowhere (closed loops only, whose wait is modelled otherwise), the wait
    and its probability are 0 and no Erlang C is computed."""
    load = rate * service_s
    rho = load / servers
    if not np.any(poisson):
        return np.zeros(np.shape(rho)), np.zeros(np.shape(rho)), rho
    p_wait = np.where(rho < 1.0, erlang_c(servers, np.minimum(load, servers * (1 - 1e-9))), 1.0)
    mean = np.where(rho < 1.0, 0.5 * p_wait * service_s / (servers * np.maximum(1.0 - rho, 1e-12)), np.inf)
    return mean, p_wait, rho


def wait_quantile(mean_wait, p_wait, q):
    """q-quantile of the waiting time (s): zero unless more than 1 − q of arrivals wait.

    The wait is zero with probability 1 − ``p_wait`` and exponential beyond, so it can be below
    the mean: with ``p_wait`` < 1 − q every q-quantile is zero while the mean is not (for q = 0.9,
    the quantile is at least the mean from ``p_wait`` ≈ 0.112, where ln(p_wait / 0.1) = p_wait).
    """
    p = np.maximum(p_wait, 1e-12)
    bounded = np.isfinite(mean_wait)
    tail = (np.where(bounded, mean_wait, 0.0) / p) * np.log(np.maximum(p / (1.0 - q), 1.0))
    return np.where(bounded, tail, np.inf)


def unplaced_clients(clients, engines, slots):
    """Clients of a closed loop that find their engine's slots full, on average, when a router
    places each of ``clients`` requests on one of ``engines`` engines at random (each holds
    ``slots`` running sequences): engines × E[(N − slots)⁺], N ~ Binomial(clients, 1/engines).

    One engine, or slots no engine can fill (clients ≤ slots), leave nothing to chance: the
    excess is max(clients − engines × slots, 0) and no binomial is computed. With m = ⌊slots⌋,
    E[(N − m)⁺] = clients·p·P(N' ≥ m) − m·P(N > m) with N' ~ Binomial(clients − 1, p), less
    (slots − m)·P(N > m) for a fractional limit.
    """
    shape = np.broadcast_shapes(*(np.shape(v) for v in (clients, engines, slots)))
    clients, engines, slots = (np.broadcast_to(np.asarray(v, dtype=float), shape).ravel() for v in (clients, engines, slots))
    even = np.maximum(clients - engines * slots, 0.0)
    chance = (engines > 1) & (clients > slots) & np.isfinite(slots)
    if not np.any(chance):
        return even.reshape(shape)
    from scipy.special import bdtrc

    n, e, s = np.rint(clients[chance]).astype(np.int64), engines[chance], slots[chance]  # bdtrc counts in integers
    p, m = 1.0 / e, np.floor(s)
    beyond = bdtrc(m, n, p)  # P(N > m)
    reaching = np.where(m >= 1, bdtrc(np.maximum(m - 1.0, 0.0), np.maximum(n - 1, 0), p), 1.0)  # P(N' ≥ m)
    excess = n * p * reaching - m * beyond - (s - m) * beyond
    out = even.copy()
    out[chance] = np.maximum(e * excess, even[chance])
    return out.reshape(shape)
