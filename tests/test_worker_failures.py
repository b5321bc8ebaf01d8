"""Failures with real parts: a `slaplan worker` process SIGKILLed in the middle of a DGDR, and a
Redis broker restarted while requests are queued. PostgreSQL is the machine's; Redis is a
private redis-server each test starts on a free port in its own folder."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml
from sqlalchemy import text

from infra import migrate
from infra.db import make_engine, make_session_factory, session_scope
from infra.resources import get_resource_by_uid
from infra.settings import load_settings
from workers import lifecycle
from workers.celery_app import enqueue, make_celery
from workers.recovery import requeue_unfinished
from procs import SLAPLAN, free_port

ROOT = Path(__file__).resolve().parents[1]



def _start_redis(folder: Path, port: int) -> subprocess.Popen:
    import redis

    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
         "--save", "", "--appendonly", "no"],
        stdin=subprocess.DEVNULL, stdout=(folder / "redis.log").open("a"), stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            redis.Redis(port=port, socket_connect_timeout=0.5).ping()
            return proc
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("redis-server did not start")


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture
def private_redis(tmp_path, pg_url):
    """(url, port, folder, process holder) of a redis-server only this test uses."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    folder = tmp_path / "redis"
    holder = {"proc": _start_redis(folder, port)}
    try:
        yield f"redis://127.0.0.1:{port}/0", port, folder, holder
    finally:
        _stop(holder["proc"])


@pytest.fixture
def stack(pg_url, private_redis, tmp_path):
    """Migrated PostgreSQL, a Celery app to enqueue on, and a way to start `slaplan worker` processes."""
    url, port, folder, redis_holder = private_redis
    settings = load_settings({}, database_url=pg_url, broker_url=url)
    migrate.upgrade(settings)
    engine = make_engine(settings)
    sessions = make_session_factory(engine)
    celery = make_celery(settings)
    workers: list[subprocess.Popen] = []
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SLAPLAN_DATABASE_URL": pg_url, "SLAPLAN_BROKER_URL": url}

    def start_worker() -> subprocess.Popen:
        log = (tmp_path / f"worker-{len(workers)}.log").open("w")
        proc = subprocess.Popen(
            [*SLAPLAN, "worker", "--queues", "plan", "--pool", "solo", "--loglevel", "WARNING",
             "--hostname", f"fail-{uuid.uuid4().hex[:6]}@%h"],
            cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )
        workers.append(proc)
        return proc

    try:
        yield {"settings": settings, "engine": engine, "sessions": sessions, "celery": celery,
               "start_worker": start_worker, "redis": private_redis}
    finally:
        for proc in workers:
            _stop(proc)
        engine.dispose()


def _submit(stack, name: str, spec: dict) -> str:
    """Store a DGDR as the API does (committed, then enqueued); its uid."""
    from datetime import UTC, datetime

    from infra.resources import ResourceCreate, create_resource

    with session_scope(stack["sessions"]) as session:
        uid = create_resource(session, ResourceCreate(
            group="nvidia.com", version="v1alpha1", kind="DynamoGraphDeploymentRequest",
            plural="dynamographdeploymentrequests", namespace="default", name=name, spec=spec,
            status=lifecycle.dgdr_pending(1, datetime.now(UTC)),
        )).uid
    return uid


def _state(stack, uid: str):
    with session_scope(stack["sessions"]) as session:
        return get_resource_by_uid(session, uid)


def _wait(stack, uid: str, done, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    resource = None
    while time.monotonic() < deadline:
        resource = _state(stack, uid)
        if done(resource):
            return resource
        time.sleep(0.02)
    raise AssertionError(f"{what}: timed out; last status {resource.status if resource else None}")


def _send(stack):
    return lambda task, uid, queue: enqueue(stack["celery"], task, uid, queue)


def test_worker_killed_mid_task_another_finishes_it_once(stack):
    """The worker claims the DGDR (Profiling) and plans it; the test holds the row's lock so its
    result cannot be written, waits until the worker is blocked writing it, and SIGKILLs it.
    The recovery sweep re-enqueues the request, a new worker plans it, and there is one result."""
    spec = yaml.safe_load((ROOT / "examples" / "deepseek-v3-h200.dgdr.yaml").read_text())["spec"]
    first = stack["start_worker"]()
    uid = _submit(stack, "killed-mid-task", spec)
    enqueue(stack["celery"], "slaplan.plan_dgdr", uid, "plan")
    claimed = _wait(stack, uid, lambda r: r.status.get("state") != "Pending", 120, "first worker claims it")
    assert claimed.status["state"] == "Profiling", claimed.status

    with stack["engine"].connect() as lock:
        lock.execute(text("SELECT 1 FROM slaplan_resources WHERE uid = :uid FOR UPDATE"), {"uid": uid})
        # planning takes about a second; the claim came first, so the result is not written yet
        assert _state(stack, uid).status["state"] == "Profiling"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            waiting = lock.execute(text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            )).scalar()
            if waiting:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the worker never tried to write its result")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        lock.rollback()

    time.sleep(0.5)  # the killed worker's database session ends; nothing was committed
    assert _state(stack, uid).status["state"] == "Profiling"
    assert _state(stack, uid).resource_version == claimed.resource_version

    stack["start_worker"]()
    assert requeue_unfinished(stack["sessions"], _send(stack)) == 1  # what the sweep does for a stale request
    done = _wait(stack, uid, lambda r: r.status.get("state") in lifecycle.DGDR_TERMINAL, 120, "second worker")
    assert done.status["state"] == "Ready", done.status
    assert done.status["generatedDeployment"]["kind"] == "DynamoGraphDeployment"
    types = [c["type"] for c in done.status["conditions"]]
    assert len(types) == len(set(types))
    # exactly one result: claim + result after the first claim; a redelivery changes nothing
    enqueue(stack["celery"], "slaplan.plan_dgdr", uid, "plan")
    time.sleep(2)
    again = _state(stack, uid)
    assert again.resource_version == done.resource_version and again.status == done.status


def test_redis_restarted_with_requests_queued_all_reach_a_final_state(stack):
    """Requests queued in Redis when it restarts (without persistence: the queue is lost) are
    enqueued again by the recovery sweep and all end Ready or Failed."""
    url, port, folder, holder = stack["redis"]
    spec = yaml.safe_load((ROOT / "examples" / "llama-70b-h200.dgdr.yaml").read_text())["spec"]
    uids = [_submit(stack, f"queued-{i}", spec) for i in range(6)]
    for uid in uids:
        enqueue(stack["celery"], "slaplan.plan_dgdr", uid, "plan")
    _stop(holder["proc"])  # no worker has run yet: every message was in Redis
    holder["proc"] = _start_redis(folder, port)
    worker = stack["start_worker"]()
    # the sweep runs until every request is final, as `slaplan serve`'s recovery loop does
    deadline = time.monotonic() + 120
    final = {}
    while time.monotonic() < deadline and len(final) < len(uids):
        requeue_unfinished(stack["sessions"], _send(stack))
        for _ in range(40):
            final = {u: r.status["state"] for u in uids
                     if (r := _state(stack, u)).status.get("state") in lifecycle.DGDR_TERMINAL}
            if len(final) == len(uids):
                break
            time.sleep(0.25)
    assert len(final) == len(uids), f"not final: {set(uids) - set(final)}"
    assert set(final.values()) == {"Ready"}
    assert worker.poll() is None
