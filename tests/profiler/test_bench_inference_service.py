"""BenchmarkJobs that reference an OME InferenceService: resolved through the official
``kubernetes`` client on a fake API server that enforces the real CRDs; the service's status URL
points at an engine emulator, and real genai-bench measures it."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from fake_kube import CRD_DIR, SKIP_REASON, FakeKube
from infra.inference_services import advertised_url, resolve
from infra.kube import connect
from profiler.bench.spec import InferenceServiceReference
from profiler.bench.runner import Failure, runner_settings
from procs import start_emulator, stop
from stored import stored_status
from tests.profiler.test_bench_run import _store
from workers import tasks

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not CRD_DIR.is_dir(), reason=SKIP_REASON)]

ISVC = "ome.io/v1beta1"
READY = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
NOT_READY = {"type": "Ready", "status": "False", "reason": "ComponentNotReady",
             "message": "Target service not ready for ingress creation", "lastTransitionTime": "2026-01-01T00:00:00Z"}


@pytest.fixture(scope="module")
def kube(tmp_path_factory):
    fake = FakeKube()
    fake.start()
    kubeconfig = fake.write_kubeconfig(tmp_path_factory.mktemp("kube") / "kubeconfig")
    yield fake, kubeconfig
    fake.stop()


def _inference_service(kubeconfig: Path, name: str, namespace: str = "serving", status: dict | None = None,
                       fake: FakeKube | None = None) -> None:
    """Create an InferenceService with the official client (validated by the fake against the CRD);
    ``status`` is what OME's controller would then write."""
    obj = {"apiVersion": ISVC, "kind": "InferenceService", "metadata": {"name": name, "namespace": namespace},
           "spec": {"model": {"name": "llama-3-1-8b-instruct"}, "engine": {"minReplicas": 1, "maxReplicas": 1}}}
    connect(kubeconfig=str(kubeconfig)).apply(obj)
    if status is not None:
        fake.set_status(ISVC, "InferenceService", namespace, name, status)


def _job(sessions, name: str, namespace: str = "serving") -> str:
    spec = {"endpoint": {"inferenceService": {"name": name, "namespace": namespace}},
            "serviceMetadata": {"engine": "vLLM", "version": "0.10.0", "gpuType": "A100", "gpuCount": 1},
            "task": "text-to-text", "trafficScenarios": ["D(40,8)"], "numConcurrency": [1],
            "maxTimePerIteration": 1, "maxRequestsPerIteration": 4,
            "outputLocation": {"storageUri": "pvc://results/isvc"}}
    return _store(sessions, spec)


def _run(sessions, uid: str, kubeconfig: Path, tmp_path: Path, **settings) -> dict:
    defaults = dict(local_root=str(tmp_path / "root"), offline=True, probe_timeout_s=5, ready_timeout_s=0.5)
    outcome = tasks.process_benchmarkjob(sessions, uid, cluster=lambda: connect(kubeconfig=str(kubeconfig)),
                                         settings=runner_settings({}, **{**defaults, **settings}))
    status = stored_status(sessions, uid)
    assert outcome == ("completed" if status["state"] == "Completed" else "failed")
    return status


def test_a_ready_inference_service_is_benchmarked_at_its_status_url(kube, sessions, tmp_path):
    if not Path(runner_settings().genai_bench).is_file():
        pytest.skip("genai-bench's environment is missing: run scripts/setup.sh (it installs it)")
    fake, kubeconfig = kube
    proc, base = start_emulator()
    try:
        # OME's controller advertises the route's URL; a path on it is not part of the API base
        _inference_service(kubeconfig, "llm", status={"url": base + "/", "conditions": [READY]}, fake=fake)
        uid = _job(sessions, "llm")
        status = _run(sessions, uid, kubeconfig, tmp_path)
    finally:
        stop(proc)
    assert status["state"] == "Completed", status.get("failureMessage")
    [result] = status["results"]
    assert result["requests"] >= 4 and result["errors"] == 0 and result["ttftMs"]["mean"] > 0
    assert Path(status["resultsLocation"]).parent == tmp_path / "root" / "results" / "isvc"
    assert ("GET", "/apis/ome.io/v1beta1/namespaces/serving/inferenceservices/llm") in fake.requests
    assert f"endpoint: InferenceService serving/llm at {base}" in status["details"]


def test_a_missing_inference_service_fails_naming_it(kube, sessions, tmp_path):
    _fake, kubeconfig = kube
    status = _run(sessions, _job(sessions, "nowhere"), kubeconfig, tmp_path, genai_bench=sys.executable)
    assert status["state"] == "Failed"
    assert "InferenceService serving/nowhere not found" in status["failureMessage"]


def test_a_service_that_stays_unready_fails_with_its_reason(kube, sessions, tmp_path):
    fake, kubeconfig = kube
    _inference_service(kubeconfig, "loading", status={"conditions": [NOT_READY]}, fake=fake)
    status = _run(sessions, _job(sessions, "loading"), kubeconfig, tmp_path, genai_bench=sys.executable)
    assert status["state"] == "Failed"
    message = status["failureMessage"]
    assert "InferenceService serving/loading is not ready after 0.5 s" in message and "ComponentNotReady" in message


def test_resolution_waits_until_the_service_is_ready(kube):
    fake, kubeconfig = kube
    _inference_service(kubeconfig, "warming", status={"url": "http://10.0.0.1:8080/v1", "conditions": [NOT_READY]},
                       fake=fake)
    became_ready = threading.Timer(1.0, lambda: fake.set_status(ISVC, "InferenceService", "serving", "warming",
                                                                {"conditions": [READY]}))
    became_ready.start()
    said: list[str] = []
    started = time.monotonic()
    try:
        url = resolve(connect(kubeconfig=str(kubeconfig)), InferenceServiceReference(name="warming", namespace="serving"),
                      timeout_s=30, poll_s=0.2, progress=said.append)
    finally:
        became_ready.cancel()
    assert url == "http://10.0.0.1:8080" and time.monotonic() - started >= 1.0
    assert said and "waiting for InferenceService serving/warming: not ready (ComponentNotReady" in said[0]


def test_a_cluster_without_ome_fails_at_once(tmp_path, sessions):
    fake = FakeKube(served=[("nvidia.com", "v1alpha1", "DynamoGraphDeployment")])
    fake.start()
    try:
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        status = _run(sessions, _job(sessions, "llm"), kubeconfig, tmp_path, genai_bench=sys.executable,
                      ready_timeout_s=60)
    finally:
        fake.stop()
    assert status["state"] == "Failed"
    assert "InferenceService serving/llm" in status["failureMessage"] and "install the operator" in status["failureMessage"]


def test_an_unreachable_api_server_is_retried_until_the_deadline(tmp_path):
    fake = FakeKube()
    fake.start()
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    fake.stop()  # nothing listens there any more
    cluster = connect(kubeconfig=str(kubeconfig))
    now, sleeps = [0.0], []

    def sleep(seconds):
        sleeps.append(seconds)
        now[0] += seconds

    with pytest.raises(Failure, match="serving/llm is not ready after 10 s: the cluster did not answer"):
        resolve(cluster, InferenceServiceReference(name="llm", namespace="serving"), timeout_s=10, poll_s=3,
                clock=lambda: now[0], sleep=sleep)
    assert sleeps == [3, 3, 3, 1]  # asked at 0, 3, 6, 9 and 10 s


def test_advertised_url():
    assert advertised_url({"status": {"url": "https://llm.serving.example.com/openai/v1"}}) == "https://llm.serving.example.com"
    assert advertised_url({"status": {"address": {"url": "http://llm.serving.svc.cluster.local"}}}) == \
        "http://llm.serving.svc.cluster.local"
    assert advertised_url({"status": {"url": "llm.example.com:8080"}}) == "http://llm.example.com:8080"
    assert advertised_url({"status": {"url": ""}}) is None and advertised_url({}) is None
