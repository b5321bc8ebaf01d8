"""The replay of the online search on measured landscapes (benchmarks/online_replay.py): the
fewest runs any rule needs, and what a search's outcome counts, on a small landscape built here."""

from __future__ import annotations

import math

from benchmark_scripts import load

from planner.online import SweepPoint, closed_loop_tok_s

replay = load("online_replay")


def _landscape(predicted_scale: float = 1.0):
    """Three one-GPU configurations at 1, 4 and 16 clients: latencies and throughput grow with
    clients; ``c`` is fastest. Predictions are the measurements' TTFT times ``predicted_scale``."""
    w = replay.Workload(name="w", gpu="g", osl_tokens=100)
    for name, speed in (("a", 1.0), ("b", 1.5), ("c", 2.0)):
        w.gpus[name] = 1
        for clients in (1, 4, 16):
            point = SweepPoint(concurrency=clients, ttft_ms=100 * clients ** 0.5 / speed, itl_ms=10 + clients / speed,
                               output_tok_s=0)
            point = point.model_copy(update={"output_tok_s": closed_loop_tok_s(point, w.osl_tokens)})
            w.measured[(name, clients)] = point
            w.predicted[(name, clients)] = point.model_copy(update={"ttft_ms": point.ttft_ms * predicted_scale})
    return w


def test_contenders_are_the_runs_noise_cannot_tell_from_the_best():
    w = _landscape()
    assert replay.contenders(w, ttft_ms=1000, itl_ms=100, noise=0.0) == 1  # the best alone
    best = w.measured[("c", 16)]
    # a looser goodput tolerance takes in the next best runs as soon as they are within it
    runner_up = max(m.output_tok_s for k, m in w.measured.items() if k != ("c", 16))
    noise = 1 - runner_up / best.output_tok_s + 1e-9
    assert replay.contenders(w, ttft_ms=1000, itl_ms=100, noise=noise) == 2
    # an SLA the best misses by less than the noise keeps it a contender of the best within the SLA
    tight = replay.contenders(w, ttft_ms=best.ttft_ms / 1.01, itl_ms=100, noise=0.02)
    assert tight >= 2


def test_a_search_counts_its_runs_against_the_floor_and_where_they_went():
    w = _landscape()
    outcome = replay.search(w, 1000, 100, stop=0.05, min_units=2, budget=1.0, noise=0.05)
    assert outcome.best and outcome.regret == 0.0 and outcome.space == 9
    assert outcome.minimum <= outcome.runs and outcome.searching == 0  # a perfect model starts within the SLA
    assert outcome.confirming == outcome.runs - 1  # its first run is the best: the rest confirm it
    # a model that thinks every TTFT is 3× shorter spends runs over the SLA first
    tight = w.measured[("c", 4)].ttft_ms * 1.05
    off = replay.search(_landscape(predicted_scale=1 / 3), tight, 100, stop=0.05, min_units=2, budget=1.0)
    assert off.searching >= 1 and off.runs > off.searching


def test_outcomes_are_summed_by_workload_size():
    def outcome(space: int, runs: int) -> object:
        return replay.Outcome(runs=runs, space=space, best=True, regret=0.0, minimum=1, searching=0, confirming=0)

    sized = dict(replay.by_size([outcome(12, 3), outcome(18, 5), outcome(30, 6), outcome(80, 8)]))
    assert list(sized) == ["10–19", "20–39", "≥ 40"]
    assert sized["10–19"]["mean_runs"] == 4.0 and sized["10–19"]["runs_pct"] == 100 * 8 / 30
    assert sized["20–39"]["searches"] == sized["≥ 40"]["searches"] == 1 and sized["≥ 40"]["minimum_pct"] == 100 / 80


def test_outcomes_are_summed_by_workload_in_the_order_they_came():
    def outcome(workload: str, space: int, runs: int) -> object:
        return replay.Outcome(runs=runs, space=space, best=True, regret=0.0, minimum=1, searching=0, confirming=0,
                              workload=workload)

    parts = replay.by_workload([outcome("b", 12, 3), outcome("a", 20, 2), outcome("b", 12, 1)])
    assert [(name, space, t["searches"], t["runs"]) for name, space, t in parts] == [("b", 12, 2, 4), ("a", 20, 1, 2)]


def test_error_spread_parts_the_model_error_between_units_and_within_one():
    w = _landscape(predicted_scale=2.0)  # every TTFT off by the same factor: no spread at all
    zero = {"ttft_ms": 0.0, "itl_ms": 0.0}
    assert replay.error_spread([w]) == {"between": zero, "within": zero, "transfer": zero, "loads": zero}
    for clients in (1, 4, 16):  # one unit off by another factor at every load: spread between units only
        w.predicted[("c", clients)] = w.predicted[("c", clients)].model_copy(
            update={"ttft_ms": w.predicted[("c", clients)].ttft_ms * 3})
    spread = replay.error_spread([w])
    assert spread["between"]["ttft_ms"] > 0 and spread["within"]["ttft_ms"] == spread["loads"]["ttft_ms"] == 0.0
    # rescaled by another unit, c's runs are off by ln 3 and the others' by it against c: 4 of 6 pairs
    assert abs(spread["transfer"]["ttft_ms"] - math.log(3) * math.sqrt(4 / 6)) < 1e-12
    # one load of a unit off: spread within it too
    w.predicted[("a", 16)] = w.predicted[("a", 16)].model_copy(update={"itl_ms": w.predicted[("a", 16)].itl_ms * 2})
    spread = replay.error_spread([w])
    assert spread["within"]["itl_ms"] > 0
    # against another load of its unit, a's 16-client run is off by ln 2 (and they by it against it): 4 of
    # 18 ordered pairs, over √2 as the rule's within × √(1 + 1/1) for a unit rescaled by one run
    assert abs(spread["loads"]["itl_ms"] - math.log(2) * math.sqrt(4 / 18) / math.sqrt(2)) < 1e-12
    # around its own unit's median (which it moved) a run is closer than to another run of the unit
    assert spread["loads"]["itl_ms"] > spread["within"]["itl_ms"] / math.sqrt(2)

def test_the_prior_takes_the_spread_within_a_unit_as_the_rule_uses_it():
    parts = {part: {"ttft_ms": sd, "itl_ms": sd / 4} for part, sd in
             (("between", 0.4), ("within", 0.3), ("transfer", 0.5), ("loads", 0.35))}
    prior = replay.prior_spread(parts)
    assert prior.between == parts["between"] and prior.within == parts["loads"]


def test_an_added_unit_error_moves_every_load_of_a_unit_by_one_factor():
    w = _landscape()
    (moved,) = replay.with_unit_error([w], scale=1.0, seed=3)
    assert moved.measured == w.measured and set(moved.predicted) == set(w.predicted)
    for unit in w.gpus:
        ratios = {round(moved.predicted[(unit, c)].itl_ms / w.predicted[(unit, c)].itl_ms, 12) for c in (1, 4, 16)}
        assert len(ratios) == 1 and ratios != {1.0}
    assert replay.with_unit_error([w], scale=1.0, seed=3)[0].predicted == moved.predicted  # seeded
    assert replay.with_unit_error([w], scale=0.0, seed=3)[0].predicted == w.predicted


def test_a_search_starting_from_earlier_runs_counts_only_the_runs_it_measures():
    w = _landscape()
    first = replay.search(w, 1000, 100, stop=0.05, min_units=2, budget=1.0)
    again = replay.search(w, 1000, 100, stop=0.05, min_units=2, budget=1.0, known=first.known)
    # the same SLA again: what the first search measured already answers it
    assert first.runs >= 1 and again.runs == 0 and again.known == first.known
    assert (again.best, again.regret, again.searching) == (first.best, first.regret, 0)
    # a tighter SLA measures on from there; the known runs are not counted again
    tight = w.measured[("c", 4)].ttft_ms * 1.05
    on = replay.search(w, tight, 100, stop=0.05, min_units=2, budget=1.0, known=first.known)
    assert on.known[:len(first.known)] == first.known and on.runs == len(on.known) - len(first.known)


def test_reuse_measures_each_run_of_a_workload_once_across_its_slas():
    w = _landscape()
    alone = replay.replay([w], stop=0.05, min_units=2, budget=1.0)
    shared = replay.replay([w], stop=0.05, min_units=2, budget=1.0, reuse=True)
    assert len(alone) == len(shared) and sum(o.runs for o in shared) < sum(o.runs for o in alone)
    distinct, sweep = replay.distinct_runs([w], shared)
    assert sweep == 9 and distinct == sum(o.runs for o in shared) == len(shared[-1].known)
    # without reuse, the runs searches share are measured again but counted once as distinct runs
    assert replay.distinct_runs([w], alone)[0] <= sum(o.runs for o in alone)
