"""`slaplan serve` with nothing configured: one process, SQLite in the working directory, an
embedded worker; state survives a restart."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from kubernetes import client as k8s
from procs import SLAPLAN, free_port, stop, wait_ready

ROOT = Path(__file__).resolve().parents[1]



def _start(workdir: Path, port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLAPLAN_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen(
        [*SLAPLAN, "serve", "--port", str(port), "--log-level", "warning"],
        cwd=workdir, env=env, stdin=subprocess.DEVNULL,
        stdout=(workdir / "serve.log").open("a"), stderr=subprocess.STDOUT,
    )
    wait_ready(proc, f"http://127.0.0.1:{port}/readyz", workdir / "serve.log")
    return proc


BENCH = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "BenchmarkJob",
    "metadata": {"name": "served", "labels": {"suite": "serve"}},
    "spec": {
        "endpoint": {"inferenceService": {"name": "llm", "namespace": "serving"}},
        "task": "text-to-text",
        "maxTimePerIteration": 1,
        "maxRequestsPerIteration": 10,
        "outputLocation": {"storageUri": "s3://bucket/results"},
    },
}


def test_serve_embedded_and_restart(tmp_path):
    port = free_port()
    proc = _start(tmp_path, port)
    try:
        api = k8s.CustomObjectsApi(k8s.ApiClient(k8s.Configuration(host=f"http://127.0.0.1:{port}")))
        created = api.create_namespaced_custom_object("ome.io", "v1beta1", "default", "benchmarkjobs", BENCH)
        deadline = time.monotonic() + 30
        obj = created
        while obj.get("status", {}).get("state") not in ("Completed", "Failed") and time.monotonic() < deadline:
            time.sleep(0.1)
            obj = api.get_namespaced_custom_object("ome.io", "v1beta1", "default", "benchmarkjobs", "served")
        # the embedded worker took it and, with no cluster to resolve the InferenceService, failed it
        assert "no Kubernetes cluster is configured" in obj["status"].get("failureMessage", ""), obj["status"]
    finally:
        stop(proc)
    assert (tmp_path / "slaplan.db").exists()  # SQLite in the working directory

    proc = _start(tmp_path, port)
    try:
        api = k8s.CustomObjectsApi(k8s.ApiClient(k8s.Configuration(host=f"http://127.0.0.1:{port}")))
        again = api.list_namespaced_custom_object("ome.io", "v1beta1", "default", "benchmarkjobs", label_selector="suite=serve")
        assert [i["metadata"]["uid"] for i in again["items"]] == [created["metadata"]["uid"]]
    finally:
        stop(proc)
