"""Workers: a real Celery worker process on real Redis and PostgreSQL, task idempotency."""

from __future__ import annotations

import json
import os
import time
import uuid
from functools import partial

import pytest
from api_client import api_client

from api.app import create_app
from infra import migrate
from infra.db import session_scope
from infra.resources import ResourceCreate, create_resource, get_resource_by_uid
from infra.settings import load_settings
from planner import status as dgdr_states
from workers import lifecycle, tasks
from procs import start_worker, stop
from stored import stored_status
from paths import ROOT


# --------------------------------------------------------------------------- real services


@pytest.fixture
def service(pg_url, redis_url, tmp_path):
    """A migrated PostgreSQL database, the API app (in-process) and one `slaplan worker` process."""
    settings = load_settings({}, database_url=pg_url, broker_url=redis_url)
    migrate.upgrade(settings)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SLAPLAN_DATABASE_URL": pg_url,
        "SLAPLAN_BROKER_URL": redis_url,
    }
    worker = start_worker(tmp_path, env)
    app = create_app(settings)
    try:
        with api_client(app) as client:
            yield client, app, worker
    finally:
        stop(worker)
        app.state.engine.dispose()


def _wait_for(client, path: str, done, timeout_s: float = 90.0) -> dict:
    deadline = time.monotonic() + timeout_s
    obj = {}
    while time.monotonic() < deadline:
        obj = client.get(path).json()
        if done(obj):
            return obj
        time.sleep(0.25)
    raise AssertionError(f"timed out; last seen: {obj.get('status')}")


BENCH = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "BenchmarkJob",
    "metadata": {"name": "bench-worker"},
    "spec": {
        "endpoint": {"endpoint": {"url": "http://127.0.0.1:8000", "apiFormat": "openai", "modelName": "m"}},
        "task": "text-to-text",
        "maxTimePerIteration": 1,
        "maxRequestsPerIteration": 10,
        "outputLocation": {"storageUri": "pvc://results/bench"},
    },
}


@pytest.mark.slow
def test_real_worker_takes_a_benchmarkjob(service):
    client, _app, worker = service
    path = "/apis/ome.io/v1beta1/namespaces/default/benchmarkjobs"
    assert client.post(path, json=BENCH).status_code == 201
    obj = _wait_for(client, path + "/bench-worker",
                    lambda o: o.get("status", {}).get("state") in lifecycle.BENCH_TERMINAL, timeout_s=180)
    assert worker.poll() is None
    # Nothing serves the endpoint: the job is stored, queued, taken, run and fails saying why.
    status = obj["status"]
    assert status["state"] == "Failed" and status["startTime"] and status["completionTime"]
    assert status["failureMessage"].startswith(("endpoint down", "genai-bench is not installed")), status


DGDR = {
    "apiVersion": "nvidia.com/v1alpha1",
    "kind": "DynamoGraphDeploymentRequest",
    "metadata": {"name": "plan-worker"},
    "spec": {"modelName": "Qwen/Qwen3-32B", "backend": "vllm", "sla": {"ttft": 2000, "itl": 50}, "gpu": {"type": "h200_sxm"}},
}


@pytest.mark.slow
def test_real_worker_plans_a_dgdr_to_a_final_state_once(service):
    client, app, _worker = service
    path = "/apis/nvidia.com/v1alpha1/namespaces/default/dynamographdeploymentrequests"
    created = client.post(path, json=DGDR)
    assert created.status_code == 201, created.text
    obj = _wait_for(client, path + "/plan-worker", lambda o: o.get("status", {}).get("state") in dgdr_states.TERMINAL)
    status = obj["status"]
    assert status["state"] == "Ready", status
    assert status["observedGeneration"] == 1
    types = {c["type"] for c in status["conditions"]}
    assert {"Validation", "Profiling", "SpecGenerated"} <= types
    assert status["generatedDeployment"]["kind"] == "DynamoGraphDeployment"
    assert json.loads(status["profilingResults"])["chosen"]["totalGpus"] > 0
    # Redelivered: nothing is planned or written again.
    version = obj["metadata"]["resourceVersion"]
    assert tasks.process_dgdr(app.state.sessions, created.json()["metadata"]["uid"]) == "done"
    assert client.get(path + "/plan-worker").json()["metadata"]["resourceVersion"] == version


# --------------------------------------------------------------------------- task protocol


def _store_dgdr(sessions, name="r", spec=None) -> str:
    from datetime import UTC, datetime

    with session_scope(sessions) as session:
        r = create_resource(
            session,
            ResourceCreate(
                group="nvidia.com", version="v1alpha1", kind="DynamoGraphDeploymentRequest",
                plural="dynamographdeploymentrequests", namespace="default", name=name,
                spec=spec or DGDR["spec"], status=lifecycle.dgdr_pending(1, datetime.now(UTC)),
            ),
        )
        return r.uid


def test_a_deleted_request_is_skipped(sessions):
    assert tasks.process_dgdr(sessions, str(uuid.uuid4())) == "gone"
    assert tasks.process_benchmarkjob(sessions, str(uuid.uuid4())) == "gone"


def test_running_the_task_twice_plans_once(sessions):
    uid = _store_dgdr(sessions)
    first = tasks.process_dgdr(sessions, uid)
    assert first == "ready"
    with session_scope(sessions) as s:
        after_first = get_resource_by_uid(s, uid)
    assert tasks.process_dgdr(sessions, uid) == "done"
    with session_scope(sessions) as s:
        assert get_resource_by_uid(s, uid).resource_version == after_first.resource_version


def test_an_online_dgdr_through_the_plan_task_is_set_up_from_the_workers_settings(sessions, database_url,
                                                                                   monkeypatch):
    """The plan task, in its thread or in a planning child, gives an online DGDR (one whose spec
    turned online after it was queued) the online setup of its worker's settings, not of the
    environment: a worker told to deploy on a cluster it does not have says so, though the
    environment names no online target."""
    from workers.celery_app import make_celery
    from workers.plan_pool import _process_dgdr_here

    monkeypatch.delenv("SLAPLAN_ONLINE_TARGET", raising=False)
    settings = load_settings({}, database_url=database_url, online_target="kubernetes")
    app = make_celery(settings)
    for name, run in (("in-task", app.tasks[tasks.PLAN_TASK]), ("in-child", partial(_process_dgdr_here, settings))):
        uid = _store_dgdr(sessions, name=name, spec={**DGDR["spec"], "online": True})
        assert run(uid) == "failed"
        profiling = next(c for c in stored_status(sessions, uid)["conditions"] if c["type"] == "Profiling")
        assert "online_target is kubernetes but no cluster is configured" in profiling["message"]


def test_an_online_dgdr_fails_where_no_online_profiling_is_set_up(sessions):
    uid = _store_dgdr(sessions, spec={**DGDR["spec"], "online": True})
    assert tasks.process_dgdr(sessions, uid) == "failed"
    profiling = next(c for c in stored_status(sessions, uid)["conditions"] if c["type"] == "Profiling")
    assert "online profiling is not set up in this process" in profiling["message"]


def test_each_celery_app_runs_its_own_task_bodies(tmp_path):
    # Task bodies close over their app's settings and database. Celery shares tasks between
    # apps by default, so a second app in one process would run the first app's bodies (and
    # write to the first app's database); ours are registered unshared.
    import warnings

    from workers.celery_app import make_celery
    from workers.deploy import TRACK_TASK

    apps = [make_celery(load_settings({}, database_url=f"sqlite:///{tmp_path / name}")) for name in ("a.db", "b.db")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a DuplicateTaskNameWarning fails the test
        for app in apps:
            app.finalize()
    for name in (tasks.PLAN_TASK, tasks.ONLINE_TASK, tasks.BENCH_TASK, TRACK_TASK):
        first, second = (app.tasks[name] for app in apps)
        assert first.app is apps[0] and second.app is apps[1]
        assert first.run is not second.run
