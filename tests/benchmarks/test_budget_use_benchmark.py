"""The budget-use benchmark's own arithmetic: the most clients a deployment serves within the SLA,
and AIConfigurator's deployment judged by slaplan's model."""

from benchmark_scripts import load


def test_most_clients_is_the_last_load_that_meets_the_sla():
    bench = load("budget_use")
    for threshold in (0, 1, 2, 3, 17, 64, 65, 1000, bench.MAX_CLIENTS):
        calls = []

        def meets(clients: int) -> bool:
            calls.append(clients)
            return clients <= threshold

        assert bench.most_clients(meets) == threshold
        assert len(calls) <= 2 * bench.MAX_CLIENTS.bit_length() + 2  # bisection, not a scan


def test_slaplan_serves_at_least_as_much_as_any_one_shape_it_could_have_chosen():
    """slaplan's plan serves, by its own model, no less than any aggregated deployment of one shape
    on the budget judged the way the benchmark judges AIConfigurator's."""
    bench = load("budget_use")
    case = bench.CASES[1]  # Llama-3.1-8B on 8 H100
    mine = bench.served_by_plan(bench.slaplan_plan(case))
    assert mine.gpus == case.budget
    for tp in (1, 2, 4, 8):
        other = bench.AicBest(bench.Served(f"{case.budget // tp}×tp{tp}", case.budget, 0.0, 0.0), "agg",
                              case.budget // tp, tp=tp)
        judged = bench.slaplan_judges(case, other)
        assert mine.tok_s >= judged.tok_s * (1 - 0.25 / 9), (tp, judged)  # within one refined step
