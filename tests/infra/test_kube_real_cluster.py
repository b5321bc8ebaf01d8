"""Opt-in: the same apply path against a real cluster. Set ``SLAPLAN_TEST_KUBECONFIG`` to a
kubeconfig (optionally ``SLAPLAN_TEST_NAMESPACE``, default ``default``). Only server-side
dry runs are sent: nothing is created on the cluster."""

from __future__ import annotations

import os

import pytest
from paths import ROOT

KUBECONFIG = os.environ.get("SLAPLAN_TEST_KUBECONFIG")
NAMESPACE = os.environ.get("SLAPLAN_TEST_NAMESPACE", "default")
EXAMPLE = ROOT / "examples" / "llama-70b-h200.dgdr.yaml"

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not KUBECONFIG, reason="set SLAPLAN_TEST_KUBECONFIG to test against a real cluster")]


@pytest.mark.parametrize("target", ("dynamo", "ome", "kthena", "kubeai"))
def test_dry_run_apply_on_a_real_cluster(target):
    from infra.kube import connect
    from infra.kube_apply import apply_object
    from infra.kube_targets import discover
    from planner import plan
    from planner.manifests.targets import render_target
    from planner.results import ProfilingResults
    from planner.request import parse_documents

    cluster = connect(kubeconfig=KUBECONFIG)
    options = discover(cluster, targets=(target,))
    if getattr(options, target) is None:
        pytest.skip(f"the cluster does not serve the {target} operator's API")
    result = plan(parse_documents(EXAMPLE.read_text(), str(EXAMPLE))[0])
    objs, _notes = render_target(ProfilingResults.of(result), result.request, target, **options.render_kwargs())
    for obj in objs:
        obj["metadata"]["namespace"] = NAMESPACE
        outcome = apply_object(cluster, obj, dry_run=True)
        assert outcome.dry_run and outcome.action in ("created", "configured", "unchanged")
