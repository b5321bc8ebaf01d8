"""A GPU budget with no load stated may be filled with engines of two aggregated shapes: only when
that serves more than the best deployment of one shape, within the budget, each shape's engines
predicted by the model at their own share of the load; where a target scales, the manifests emit
the range from one unit to the budget's units."""

from __future__ import annotations

import itertools
import json

import pytest

from planner import plan
from planner.manifests.dynamo import GROVE_ANNOTATION, REPLICA_RANGE_ANNOTATION, render_dgd
from planner.manifests.kthena import CURRENT_GROUP, LEGACY_GROUP, render_kthena
from planner.manifests.targets import scaling_text
from planner.choice import margin
from planner.mix import Unit, best_mix
from planner.types import PlanRequest
from profiler.model.config import Parallel, ServingConfig
from profiler.model.estimate import estimate
from paths import CRD_DIRS, SHARED

CRD_DIR = SHARED / "crds"


def _request(**kw) -> PlanRequest:
    base = dict(name="mix", model="meta-llama/Llama-3.1-70B-Instruct", gpu="h200_sxm", ttft_ms=500, itl_ms=20,
                isl_tokens=3000, osl_tokens=500)
    return PlanRequest(**{**base, **kw})


def _tok_s(p) -> float:
    """Output tokens/s of the whole deployment."""
    return p.predicted.output_tok_s_per_gpu * p.total_gpus


def test_best_mix_is_the_best_pair_of_counts_within_the_budget():
    units = [Unit("a", 8, 1200.0), Unit("b", 4, 500.0), Unit("c", 2, 230.0), Unit("d", 1, 90.0)]
    for budget in range(1, 21):
        single = max(u.tok_s * (budget // u.gpus) for u in units)
        found = best_mix(units, budget, single)
        every = [n_a * a.tok_s + n_b * b.tok_s for a, b in itertools.combinations(units, 2)
                 for n_a in range(1, budget + 1) for n_b in range(1, budget + 1)
                 if n_a * a.gpus + n_b * b.gpus <= budget]
        best = max(every, default=0.0)
        if found is None:
            assert best <= single  # nothing beats one shape
            continue
        (a, n_a), (b, n_b) = found
        assert a is not b and n_a >= 1 and n_b >= 1 and n_a * a.gpus + n_b * b.gpus <= budget
        assert n_a * a.tok_s + n_b * b.tok_s == pytest.approx(best) and best > single


@pytest.mark.parametrize("model,gpu,budgets", [("meta-llama/Llama-3.1-70B-Instruct", "h200_sxm", (8, 12, 16, 20, 28)),
                                               ("Qwen/Qwen3-32B", "h200_sxm", (3, 6, 8, 10))])
def test_a_mix_is_chosen_only_when_it_serves_more_than_one_shape(model, gpu, budgets):
    mixes = 0
    for budget in budgets:
        result = plan(_request(model=model, gpu=gpu, total_gpus=budget))
        chosen = result.chosen
        singles = [p for p in result.candidates if p.feasible and not p.parts]
        best_single = max(map(_tok_s, singles))
        assert chosen.total_gpus <= budget
        if chosen.parts:
            mixes += 1
            assert _tok_s(chosen) > best_single
            assert len(chosen.parts) == 2 and all(p.mode == "agg" and p.feasible for p in chosen.parts)
            assert len({p.engines[0].tag for p in chosen.parts}) == 2
            assert chosen.engines == tuple(e for p in chosen.parts for e in p.engines)
            # capacity is the sum of the shares' (no borrowing), each within the SLA on its own
            assert _tok_s(chosen) == pytest.approx(sum(map(_tok_s, chosen.parts)))
            assert chosen.predicted.requests_per_s == pytest.approx(sum(p.predicted.requests_per_s
                                                                        for p in chosen.parts))
            assert all(p.predicted.ttft_ms <= 500 and p.predicted.itl_ms <= 20 for p in chosen.parts)
            assert result.margin.least_pct == pytest.approx(min(min(m.ttft_pct, m.itl_pct) for m in
                                                                (margin(p, result.request) for p in chosen.parts)))
        else:
            assert _tok_s(chosen) == pytest.approx(best_single)
    assert mixes > 0  # the budgets include one that a single shape leaves partly idle


def test_each_share_is_the_models_own_prediction():
    chosen = plan(_request(total_gpus=12)).chosen
    assert chosen.parts
    for part in chosen.parts:
        e = part.engines[0]
        again = estimate(ServingConfig(
            model=part.model, gpu=part.gpu, backend=part.backend, precision=part.precision, kv_dtype=part.kv_dtype,
            engine=Parallel(tp=e.tp, pp=e.pp, dp=e.dp, moe_ep=e.ep), replicas=e.replicas, max_batch=e.max_batch,
            isl_tokens=3000, osl_tokens=500, concurrency=part.predicted.concurrency))
        assert again.output_tok_s_per_gpu == pytest.approx(part.predicted.output_tok_s_per_gpu, rel=0.01)
        assert again.ttft_ms == pytest.approx(part.predicted.ttft_ms, rel=0.01)


@pytest.mark.parametrize("load", [{"concurrency": 24}, {"request_rate": 2.0}], ids=["clients", "poisson"])
def test_a_stated_load_takes_the_fewest_gpus_in_one_shape(load):
    with_budget = plan(_request(total_gpus=12, **load))
    without = plan(_request(**load))
    assert not with_budget.chosen.parts
    assert with_budget.chosen.total_gpus == without.chosen.total_gpus == min(
        p.total_gpus for p in without.candidates if p.feasible)


def test_engines_of_one_size_fill_the_budget_without_a_mix():
    result = plan(_request(total_gpus=12, min_gpus_per_engine=4, max_gpus_per_engine=4))
    assert not result.chosen.parts and result.chosen.total_gpus == 12


@pytest.mark.skipif(not CRD_DIR.is_dir(), reason="../shared/crds (real CRD schemas) is not beside the repository")
def test_a_filled_budget_emits_its_replica_range_where_a_target_scales():
    from infra.crds import validate

    req = _request(total_gpus=16)
    chosen = plan(req).chosen
    scaled = [e for e in chosen.engines if e.min_replicas is not None and e.min_replicas < e.replicas]
    assert scaled and all(e.min_replicas == 1 for e in scaled)  # one unit when idle, the budget's units at most
    beta = render_dgd(chosen, req, api_version="v1beta1")
    workers = [c for c in beta["spec"]["components"] if c["type"] != "frontend"]
    assert all(("scalingAdapter" in c) == (c["replicas"] > 1) for c in workers)
    ranges = json.loads(beta["metadata"]["annotations"][REPLICA_RANGE_ANNOTATION])
    assert sorted(ranges.values()) == sorted([e.min_replicas, e.replicas] for e in scaled)
    alpha = render_dgd(chosen, req, api_version="v1alpha1")  # served by releases without the adapter too
    assert not any("scalingAdapter" in svc for svc in alpha["spec"]["services"].values())
    assert REPLICA_RANGE_ANNOTATION not in alpha["metadata"]["annotations"]
    # v1alpha1-only operators make an HPA of a single-node worker's autoscaling, outside Grove
    hpas = {name: svc["autoscaling"] for name, svc in alpha["spec"]["services"].items() if "autoscaling" in svc}
    assert sorted([a["minReplicas"], a["maxReplicas"]] for a in hpas.values()) == sorted(
        [e.min_replicas, e.replicas] for e in scaled if e.nodes == 1)
    assert all(a["enabled"] and a["metrics"][0]["type"] == "Pods" for a in hpas.values())
    assert alpha["metadata"]["annotations"].get(GROVE_ANNOTATION) == ("false" if hpas else None)
    assert validate(beta, CRD_DIR) == [] and validate(alpha, CRD_DIR) == []
    serving, policy = render_kthena(chosen, req, api_group=CURRENT_GROUP)
    roles = policy["spec"]["disaggregatedTarget"]["roles"]
    planned = {r["name"]: r["replicas"] for r in serving["spec"]["template"]["roles"]}
    assert {name: (r["minReplicas"], r["maxReplicas"]) for name, r in roles.items()} == {
        name: (1, planned[name]) for name in roles} and len(roles) == len(scaled)
    assert policy["spec"]["disaggregatedTarget"]["targetRef"]["name"] == serving["metadata"]["name"]
    assert validate(serving, CRD_DIRS) == [] and validate(policy, CRD_DIRS) == []
    assert len(render_kthena(chosen, req, api_group=LEGACY_GROUP)) == 1  # the seed's group cannot scale
    text = scaling_text(chosen, dynamo_version="v1beta1", kthena_group=CURRENT_GROUP)
    assert "dynamo v1beta1 (" in text and "kubeai (" in text and "kthena workload.serving.volcano.sh (" in text
    assert text.endswith("fixed at the planned count for ome")
    assert "dynamo v1alpha1 (" in scaling_text(chosen)
    assert "fixed at the planned count for ome, kthena workload.volcano.sh" in scaling_text(chosen)


def test_a_stated_load_emits_no_range():
    chosen = plan(_request(total_gpus=16, concurrency=24)).chosen
    assert scaling_text(chosen) is None
    assert not any("scalingAdapter" in c for c in render_dgd(chosen, _request(), api_version="v1beta1")["spec"]["components"])
