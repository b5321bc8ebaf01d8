"""Applying plans with the official ``kubernetes`` client to a fake API server that enforces the
real CRD schemas: every target, dry-run, version discovery, errors, and the ``slaplan apply`` CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from fake_kube import CRD_DIR, SKIP_REASON, FakeKube
from paths import ROOT

pytestmark = pytest.mark.skipif(not CRD_DIR.is_dir(), reason=SKIP_REASON)

EXAMPLE = ROOT / "examples" / "llama-70b-h200.dgdr.yaml"
TARGETS = ("dynamo", "ome", "kthena", "kubeai")


def _started(tmp_path: Path, **kwargs) -> tuple[FakeKube, Path]:
    fake = FakeKube(**kwargs)
    fake.start()
    return fake, fake.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture(scope="module")
def cluster_fake(tmp_path_factory):
    fake, kubeconfig = _started(tmp_path_factory.mktemp("kube"), forbidden_namespaces=("locked",))
    yield fake, kubeconfig
    fake.stop()


@pytest.fixture(scope="module")
def result():
    from planner import plan
    from planner.request import parse_documents

    return plan(parse_documents(EXAMPLE.read_text(), str(EXAMPLE))[0])


def _connect(kubeconfig: Path):
    from infra.kube import connect

    return connect(kubeconfig=str(kubeconfig))


@pytest.mark.parametrize("target", TARGETS)
def test_each_target_applies_then_is_unchanged(cluster_fake, result, target):
    from infra.kube_apply import apply_object
    from infra.kube_targets import discover
    from planner.manifests.targets import render_target
    from planner.results import ProfilingResults

    fake, kubeconfig = cluster_fake
    cluster = _connect(kubeconfig)
    options = discover(cluster)
    objs, _notes = render_target(ProfilingResults.of(result), result.request, target, **options.render_kwargs())
    obj = {**objs[0], "metadata": {**objs[0]["metadata"], "name": f"apply-{target}"}}
    first = apply_object(cluster, obj)
    assert first.action == "created", first
    stored = fake.get(obj["apiVersion"], obj["kind"], "default", obj["metadata"]["name"])
    assert stored["spec"] == obj["spec"]
    assert stored["metadata"]["managedFields"][0]["manager"] == "slaplan"
    again = apply_object(cluster, obj)
    assert again.action == "unchanged" and not again.changed


def test_dry_run_reports_changed_fields_and_stores_nothing(cluster_fake, result):
    from infra.kube_apply import apply_object
    from planner.manifests.targets import render_target
    from planner.results import ProfilingResults

    fake, kubeconfig = cluster_fake
    cluster = _connect(kubeconfig)
    dgd = render_target(ProfilingResults.of(result), result.request, "dynamo")[0][0]
    dgd["metadata"]["name"] = "dry"
    would = apply_object(cluster, dgd, dry_run=True)
    assert (would.action, would.dry_run) == ("created", True)
    assert fake.get(dgd["apiVersion"], dgd["kind"], "default", "dry") is None
    apply_object(cluster, dgd)
    dgd["spec"]["services"]["Frontend"]["replicas"] = 3
    change = apply_object(cluster, dgd, dry_run=True)
    assert change.action == "configured"
    assert change.changed == ("spec.services.Frontend.replicas",)
    assert "configured (dry run)" in change.line()
    assert fake.get(dgd["apiVersion"], dgd["kind"], "default", "dry")["spec"]["services"]["Frontend"]["replicas"] == 1


def test_an_invalid_manifest_is_refused_with_its_field(cluster_fake, result):
    from infra.kube import Rejected
    from infra.kube_apply import apply_object
    from planner.manifests.targets import render_target
    from planner.results import ProfilingResults

    _fake, kubeconfig = cluster_fake
    dgd = render_target(ProfilingResults.of(result), result.request, "dynamo")[0][0]
    dgd["spec"]["services"]["Frontend"]["replicas"] = "two"
    with pytest.raises(Rejected) as err:
        apply_object(_connect(kubeconfig), dgd)
    assert any(c.startswith("spec.services.Frontend.replicas") for c in err.value.causes), err.value.causes


def test_forbidden_and_missing_operator_are_clear(cluster_fake, result, tmp_path):
    from infra.kube import Forbidden, NotServed
    from infra.kube_apply import apply_object
    from planner.manifests.targets import render_target
    from planner.results import ProfilingResults

    _fake, kubeconfig = cluster_fake
    dgd = render_target(ProfilingResults.of(result), result.request, "dynamo")[0][0]
    dgd["metadata"]["namespace"] = "locked"
    with pytest.raises(Forbidden, match="forbidden"):
        apply_object(_connect(kubeconfig), dgd)
    legacy = render_target(ProfilingResults.of(result), result.request, "kthena", kthena_group="workload.volcano.sh")[0][0]
    with pytest.raises(NotServed, match="does not serve workload.volcano.sh/v1alpha1 ModelServing; install the operator"):
        apply_object(_connect(kubeconfig), legacy)


def test_discovery_picks_what_the_cluster_serves(result, tmp_path):
    from infra.kube_apply import apply_object
    from infra.kube_targets import discover
    from planner.manifests.targets import render_target
    from planner.results import ProfilingResults

    fake, kubeconfig = _started(tmp_path, served=[("nvidia.com", "v1beta1", "DynamoGraphDeployment"),
                                                  ("workload.serving.volcano.sh", "v1alpha1", "ModelServing")])
    try:
        options = discover(_connect(kubeconfig))
        assert options.dynamo == "nvidia.com/v1beta1"  # v1alpha1 preferred, but not served
        assert options.kthena == "workload.serving.volcano.sh/v1alpha1"
        assert options.ome is None and options.kubeai is None
        dgd = render_target(ProfilingResults.of(result), result.request, "dynamo", **options.render_kwargs())[0][0]
        assert dgd["apiVersion"] == "nvidia.com/v1beta1" and "components" in dgd["spec"]
        assert apply_object(_connect(kubeconfig), dgd).action == "created"
    finally:
        fake.stop()


# --------------------------------------------------------------------------- slaplan apply


@pytest.fixture(scope="module")
def plan_out(tmp_path_factory):
    from api.cli import main

    out = tmp_path_factory.mktemp("plan")
    assert main(["plan", str(EXAMPLE), "--out", str(out), "--target", "all", "--quiet"]) == 0
    return out


def test_cli_applies_what_plan_wrote(cluster_fake, plan_out, capsys):
    from api.cli import main

    _fake, kubeconfig = cluster_fake
    args = ["--kubeconfig", str(kubeconfig), "--namespace", "cli"]
    assert main(["apply", str(plan_out / "llama-70b-h200.plan.json"), "--target", "ome", "--dry-run", *args]) == 0
    assert "inferenceservice.ome.io/llama-70b-h200 created (dry run) in namespace cli" in capsys.readouterr().out
    assert main(["apply", str(plan_out), *args]) == 0
    assert "dynamographdeployment.nvidia.com/llama-70b-h200 created in namespace cli" in capsys.readouterr().out
    assert main(["apply", str(plan_out / "llama-70b-h200.dgd.yaml"), *args]) == 0
    assert "1 object(s): 1 unchanged" in capsys.readouterr().out
    assert main(["apply", str(plan_out / "llama-70b-h200.kubeai.yaml"), *args]) == 0
    # A DGDR is planned and rendered for what the cluster serves.
    assert main(["apply", str(EXAMPLE), "--target", "kthena", "--namespace", "cli2", "--kubeconfig", str(kubeconfig)]) == 0
    assert "modelserving.workload.serving.volcano.sh/llama-70b-h200 created" in capsys.readouterr().out


def test_cli_errors_are_clear(cluster_fake, plan_out, tmp_path, capsys):
    from api.cli import main

    _fake, kubeconfig = cluster_fake
    assert main(["apply", str(plan_out), "--kubeconfig", str(tmp_path / "missing")]) == 1
    assert "cluster configuration" in capsys.readouterr().err
    assert main(["apply", str(plan_out), "--kubeconfig", str(kubeconfig), "-n", "locked"]) == 1
    assert "forbidden" in capsys.readouterr().err
    assert main(["apply", str(tmp_path), "--kubeconfig", str(kubeconfig)]) == 1
    assert "no *.dgd.yaml" in capsys.readouterr().err
    fake, only_dynamo = _started(tmp_path, served=[("nvidia.com", "v1alpha1", "DynamoGraphDeployment")])
    try:
        assert main(["apply", str(plan_out), "--target", "kubeai", "--kubeconfig", str(only_dynamo)]) == 1
        assert "the cluster does not serve kubeai.org/v1 Model; install the operator" in capsys.readouterr().err
    finally:
        fake.stop()


@pytest.mark.parametrize("content,needle", [
    (b"\x89PNG\r\n\x1a\n\x00\xff", "not UTF-8 text"),
    ("kind: caf\u00e9\n".encode("latin-1"), "not UTF-8 text"),
    (b"", "holds no Kubernetes object"),
    (b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply"),
    (b"a: " + b"9" * 5000 + b"\n", "number out of range"),
    (b"kind: A\nkind: B\n", "at line 2, column 1: duplicate key 'kind' (first at line 1)"),
    (b"a: &x [1]\nb: *x\n", "at line 2, column 4: a YAML alias (*x)"),
])
def test_unusable_manifest_files_are_one_line_errors(cluster_fake, tmp_path, capsys, content, needle):
    from api.cli import main

    _fake, kubeconfig = cluster_fake
    path = tmp_path / "input.dgd.yaml"
    path.write_bytes(content)
    assert main(["apply", str(path), "--kubeconfig", str(kubeconfig)]) == 1
    err = capsys.readouterr().err
    assert f"error: {path}: " in err and needle in err


def test_what_plan_writes_holds_no_aliases_for_apply_to_refuse():
    """A value met twice in a rendered object is written out twice, never as an anchor and alias."""
    from api.objects import load_yaml_documents, manifests_yaml

    shared = {"app": "x"}
    text = manifests_yaml([{"metadata": {"labels": shared}, "spec": {"selector": shared}}])
    assert "&" not in text and "*" not in text
    assert load_yaml_documents(text) == [{"metadata": {"labels": {"app": "x"}}, "spec": {"selector": {"app": "x"}}}]


def test_a_kubeconfig_that_is_not_yaml_is_a_clear_error(plan_out, tmp_path, capsys):
    from api.cli import main

    broken = tmp_path / "kubeconfig"
    broken.write_text("clusters: [unclosed\n")
    assert main(["apply", str(plan_out), "--kubeconfig", str(broken)]) == 1
    assert "error: cannot load the cluster configuration" in capsys.readouterr().err


def test_cli_renders_a_dgdr_in_the_kthena_group_asked(cluster_fake, capsys):
    """``--kthena-group`` picks the group a DGDR is rendered in; a group the cluster does not serve is
    an error naming the option, and nothing is applied (the default, the served group: above)."""
    from api.cli import main

    fake, kubeconfig = cluster_fake
    base = ["apply", str(EXAMPLE), "--target", "kthena", "--kubeconfig", str(kubeconfig)]
    assert main([*base, "--kthena-group", "workload.serving.volcano.sh", "-n", "asked"]) == 0
    assert "modelserving.workload.serving.volcano.sh/llama-70b-h200 created in namespace asked" in capsys.readouterr().out
    assert fake.get("workload.serving.volcano.sh/v1alpha1", "ModelServing", "asked", "llama-70b-h200") is not None
    assert main([*base, "--kthena-group", "workload.volcano.sh", "-n", "unserved"]) == 1
    out, err = capsys.readouterr()
    assert ("--kthena-group workload.volcano.sh: the cluster serves Kthena's ModelServing as "
            "workload.serving.volcano.sh/v1alpha1 only") in err
    assert "0 object(s): nothing applied; 1 failed" in out
    with pytest.raises(SystemExit):
        main([*base, "--kthena-group", "volcano.sh"])
    assert "--kthena-group: must be one of workload.volcano.sh, workload.serving.volcano.sh" in capsys.readouterr().err
