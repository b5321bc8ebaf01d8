"""Failures with real parts: a `slaplan worker` process SIGKILLed in the middle of a DGDR, a Redis
broker restarted while work is queued and in flight, a broker that hangs while `slaplan serve`
takes creates, and the kombu code path that made workers exit on a Redis restart. PostgreSQL
is the machine's; Redis is a private redis-server each test starts on a free port in its own
folder. Nothing here re-enqueues by hand: the workers' and the API's dispatchers do."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from sqlalchemy import text

from infra import leases, migrate
from infra.db import make_engine, make_session_factory, session_scope
from infra.resources import get_resource_by_uid
from infra.settings import load_settings
from planner import status as dgdr_states
from workers import lifecycle
from workers.celery_app import make_celery, publish
from procs import SLAPLAN, free_port, start_redis, start_serve
from procs import stop as stop_proc
from paths import ROOT

pytestmark = pytest.mark.slow

LEASE_S = 3  # the workers' lease: a dead worker's request is queued again this long after its last heartbeat
# Bounds that tell the mechanisms apart on a busy machine, not the targets: a lost request comes
# back within a lease and a worker's start (the 10-minute sweep it replaces took 10+ min), and a
# create or health check with the broker hung answers at once (it used to wait 19-96 s).
# benchmarks/service_faults.py measures the targets themselves (30 s; no wait on the broker).
BACK_WITHIN_S = 90
NOT_WAITING_S = 10


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
    holder = {"proc": start_redis(folder, port)}
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
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SLAPLAN_DATABASE_URL": pg_url, "SLAPLAN_BROKER_URL": url,
           "SLAPLAN_LEASE_SECONDS": str(LEASE_S)}

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
               "start_worker": start_worker, "redis": private_redis, "env": env}
    finally:
        for proc in workers:
            _stop(proc)
        engine.dispose()


def _submit(stack, name: str, spec: dict) -> str:
    """Store a DGDR as the API does (committed, due for publishing); its uid."""
    from datetime import UTC, datetime

    from infra import outbox
    from infra.resources import ResourceCreate, create_resource

    with session_scope(stack["sessions"]) as session:
        stored = create_resource(session, ResourceCreate(
            group="nvidia.com", version="v1alpha1", kind="DynamoGraphDeploymentRequest",
            plural="dynamographdeploymentrequests", namespace="default", name=name, spec=spec,
            status=lifecycle.dgdr_pending(1, datetime.now(UTC)),
        ))
        outbox.mark_due(session, stored.uid, stored.created_at)
    return stored.uid


def _state(stack, uid: str):
    with session_scope(stack["sessions"]) as session:
        return get_resource_by_uid(session, uid)


def _owner(stack, uid: str) -> str | None:
    with stack["engine"].connect() as connection:
        return connection.execute(text("SELECT lease_owner FROM slaplan_resources WHERE uid = :uid"),
                                  {"uid": uid}).scalar()


def _wait(stack, uid: str, done, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    resource = None
    while time.monotonic() < deadline:
        resource = _state(stack, uid)
        if done(resource):
            return resource
        time.sleep(0.02)
    raise AssertionError(f"{what}: timed out; last status {resource.status if resource else None}")


def _final(resource) -> bool:
    return resource.status.get("state") in dgdr_states.TERMINAL


def _killed(process: subprocess.Popen) -> None:
    """SIGKILL ``process`` and reap it."""
    process.kill()
    process.wait(10)


def _back_and_planned_once(stack, uid: str) -> None:
    """A fresh worker has ``uid`` back in progress within ``BACK_WITHIN_S`` and plans it: one result."""
    stack["start_worker"]()
    _wait(stack, uid, lambda r: r.status.get("state") != "Pending", BACK_WITHIN_S, "back in progress")
    _one_result(_wait(stack, uid, _final, 120, "planned"))


def _one_result(resource) -> None:
    assert resource.status["state"] == "Ready", resource.status
    types = [c["type"] for c in resource.status["conditions"]]
    assert len(types) == len(set(types))


def test_worker_killed_mid_task_another_takes_it_over_once(stack):
    """The worker claims the DGDR (Profiling, lease held) and plans it; the test holds the row's
    lock so its result cannot be written, waits until the worker is blocked writing it, and
    SIGKILLs it. The lease runs out, a second worker's dispatcher queues the request again, and
    the second worker takes it and plans it: one result."""
    spec = yaml.safe_load((ROOT / "examples" / "deepseek-v3-h200.dgdr.yaml").read_text())["spec"]
    first = stack["start_worker"]()
    uid = _submit(stack, "killed-mid-task", spec)
    claimed = _wait(stack, uid, lambda r: r.status.get("state") != "Pending", 120, "first worker claims it")
    assert claimed.status["state"] == "Profiling", claimed.status
    first_owner = _owner(stack, uid)
    assert first_owner

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
        killed_at = time.monotonic()
        lock.rollback()

    stack["start_worker"]()
    deadline = killed_at + BACK_WITHIN_S
    while _owner(stack, uid) in (None, first_owner) and not _final(_state(stack, uid)):
        assert time.monotonic() < deadline, "not back in progress within the target"
        time.sleep(0.05)
    done = _wait(stack, uid, _final, 120, "second worker")
    _one_result(done)
    assert done.status["generatedDeployment"]["kind"] == "DynamoGraphDeployment"
    # a redelivery changes nothing
    publish(stack["celery"], [("slaplan.plan_dgdr", uid, "plan")])
    time.sleep(2)
    again = _state(stack, uid)
    assert again.resource_version == done.resource_version and again.status == done.status


# A dispatcher, as an API process runs one, whose publish stops before the broker (the test's hook):
# it prints the uid it is publishing and waits there to be killed.
STOPPED_PUBLISHING = """
import sys, threading
from infra.db import make_engine, make_session_factory
from infra.settings import load_settings
from workers import dispatcher
from workers.celery_app import make_celery

def publishing(app, tasks):
    print(*(uid for _task, uid, _queue in tasks), flush=True)
    threading.Event().wait()

dispatcher.publish = publishing
settings = load_settings()
dispatcher.Dispatcher(make_celery(settings), make_session_factory(make_engine(settings))).run_once()
"""


def test_a_dispatcher_killed_between_taking_and_publishing_a_request(stack, tmp_path):
    """An API process's dispatcher takes a stored DGDR (committed) and is SIGKILLed before its
    message reaches the broker. A worker started afterwards (its dispatcher the only one left)
    has it back in progress once the dead dispatcher's claim runs out, and plans it: one result."""
    spec = yaml.safe_load((ROOT / "examples" / "llama-70b-h200.dgdr.yaml").read_text())["spec"]
    uid = _submit(stack, "publish-in-flight", spec)
    dying = subprocess.Popen([sys.executable, "-c", STOPPED_PUBLISHING], cwd=tmp_path, env=stack["env"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    try:
        assert dying.stdout.readline().strip() == uid  # taken and committed; the publish stops here
        assert _state(stack, uid).status["state"] == "Pending"
    finally:
        _killed(dying)
    _back_and_planned_once(stack, uid)


# A `slaplan worker` whose task stops before it takes its request's lease (the test's hook): the
# message was delivered, nothing holds the request yet. It prints the uid and waits to be killed.
STOPPED_BEFORE_THE_LEASE = """
import sys, threading
from contextlib import contextmanager
from api.cli import main
from workers import heartbeat

@contextmanager
def stopped(sessions, uid, ttl, **_):
    print(uid, file=sys.__stdout__, flush=True)  # the worker redirects sys.stdout to its log
    threading.Event().wait()
    yield None

heartbeat.leased = stopped
sys.exit(main(sys.argv[1:]))
"""


def test_a_worker_killed_between_delivery_and_the_lease(stack, tmp_path):
    """A worker is handed a DGDR's message and SIGKILLed before its task takes the lease (its
    unacknowledged message waits for Redis's visibility timeout, an hour; the outbox would
    publish it again after ten minutes). It noted the delivery, so a second worker has the
    request back in progress within a lease, and plans it: one result."""
    spec = yaml.safe_load((ROOT / "examples" / "llama-70b-h200.dgdr.yaml").read_text())["spec"]
    uid = _submit(stack, "delivered-not-leased", spec)
    dying = subprocess.Popen(
        [sys.executable, "-c", STOPPED_BEFORE_THE_LEASE, "worker", "--queues", "plan", "--pool", "solo",
         "--loglevel", "WARNING", "--hostname", f"dying-{uuid.uuid4().hex[:6]}@%h"],
        cwd=tmp_path, env=stack["env"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=(tmp_path / "dying.log").open("w"), text=True)
    try:
        assert f"{uid}\n" in iter(dying.stdout.readline, "")  # delivered (the banner comes first)
        assert _state(stack, uid).status["state"] == "Pending"
        assert _owner(stack, uid).startswith(leases.RECEIPT)  # the worker noted the delivery
    finally:
        _killed(dying)
    _back_and_planned_once(stack, uid)


def test_a_worker_frozen_waiting_for_work_is_handed_a_message_and_dies(stack):
    """A worker waits for work in Redis (BRPOP) and freezes (SIGSTOP; a lost machine is the same):
    Redis still pops the next message and writes it to the frozen worker's socket, where nobody
    reads it; the message is in neither the queue nor the unacknowledged set. The worker is
    killed. The request, published but in no queue and held by no one, is published again and
    a second worker plans it: one result."""
    import redis

    from workers.dispatcher import Dispatcher

    spec = yaml.safe_load((ROOT / "examples" / "llama-70b-h200.dgdr.yaml").read_text())["spec"]
    broker = redis.Redis.from_url(stack["redis"][0])
    frozen = stack["start_worker"]()
    warm_up = _submit(stack, "warm-up", spec)
    _wait(stack, warm_up, _final, 120, "the worker is up and idle")
    publish = Dispatcher(stack["celery"], stack["sessions"]).run_once  # the API's dispatcher
    try:
        for attempt in range(10):  # a BRPOP lasts 1 s: the freeze and the publish must fall in one
            _until(lambda: any("b" in c["flags"] for c in broker.client_list()), "the worker blocked in BRPOP")
            frozen.send_signal(signal.SIGSTOP)
            uid = _submit(stack, f"handed-to-a-frozen-worker-{attempt}", spec)
            assert publish() == 1
            deadline = time.monotonic() + 3
            while broker.llen("plan") and time.monotonic() < deadline:
                time.sleep(0.02)
            if not broker.llen("plan"):
                break  # popped into the frozen worker's socket
            frozen.send_signal(signal.SIGCONT)  # its BRPOP had timed out: it plans this one; again
            _wait(stack, uid, _final, 120, "planned by the thawed worker")
        else:
            raise AssertionError("Redis never handed a message to the frozen worker")
        assert _owner(stack, uid) is None and _state(stack, uid).status["state"] == "Pending"
    finally:
        _killed(frozen)
    _back_and_planned_once(stack, uid)


def _lock_waiters(connection, fragment: str) -> int:
    """How many other backends of this database wait on a lock in a statement containing ``fragment``."""
    connection.execute(text("SELECT pg_stat_clear_snapshot()"))  # a transaction sees one snapshot otherwise
    return connection.execute(text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
        "AND pid <> pg_backend_pid() AND query LIKE :fragment"
    ), {"fragment": f"%{fragment}%"}).scalar()


def _until(condition, what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not seen"
        time.sleep(0.05)


def test_a_worker_asked_to_stop_hands_its_request_back_and_exits(stack):
    """SIGTERM to a worker in the middle of a DGDR (held writing its result, as above): it does not
    finish the task (Celery's warm shutdown would), hands the lease back with the request due at
    once, and exits 0; the next worker plans it: one result."""
    spec = yaml.safe_load((ROOT / "examples" / "deepseek-v3-h200.dgdr.yaml").read_text())["spec"]
    first = stack["start_worker"]()
    uid = _submit(stack, "stopped-mid-task", spec)
    assert _wait(stack, uid, lambda r: r.status.get("state") != "Pending", 120, "claimed").status["state"] == "Profiling"
    assert _owner(stack, uid)
    with stack["engine"].connect() as lock:
        lock.execute(text("SELECT 1 FROM slaplan_resources WHERE uid = :uid FOR UPDATE"), {"uid": uid})
        _until(lambda: _lock_waiters(lock, "SET resource_version"), "the worker writing its result")
        first.send_signal(signal.SIGTERM)
        _until(lambda: not _lock_waiters(lock, "SET resource_version"), "the write abandoned")
        lock.rollback()
    assert first.wait(60) == 0
    with stack["engine"].connect() as db:
        owner, due, now = db.execute(text(
            "SELECT lease_owner, publish_due_at, now() FROM slaplan_resources WHERE uid = :uid"), {"uid": uid}).one()
    assert owner is None and due is not None and due <= now
    assert _state(stack, uid).status["state"] == "Profiling"  # abandoned, not finished

    stack["start_worker"]()
    _one_result(_wait(stack, uid, _final, 120, "the next worker"))


def test_redis_restarted_twice_with_work_queued_and_in_flight(stack):
    """Two workers; Redis (without persistence: its queue is lost) is restarted twice while
    requests are queued and being planned. The workers stay up, their dispatchers publish what
    the restarts lost, and every request ends Ready once."""
    url, port, folder, holder = stack["redis"]
    spec = yaml.safe_load((ROOT / "examples" / "llama-70b-h200.dgdr.yaml").read_text())["spec"]
    workers = [stack["start_worker"](), stack["start_worker"]()]
    uids = [_submit(stack, f"queued-{i}", spec) for i in range(10)]
    for restart in range(2):
        _wait(stack, uids[0], lambda r: r.status.get("state") != "Pending", 120, "work started")
        _stop(holder["proc"])
        time.sleep(1)
        holder["proc"] = start_redis(folder, port)
    for uid in uids:
        _one_result(_wait(stack, uid, _final, 180, "after the restarts"))
    assert [w.poll() for w in workers] == [None, None]


def test_serve_takes_creates_while_the_broker_hangs(stack, tmp_path):
    """Redis stopped (SIGSTOP: connections open, nothing answers) under `slaplan serve`: creates
    are stored at once, /healthz answers, /readyz names the broker. Once Redis answers again a
    worker plans every request."""
    import httpx

    url, port, folder, holder = stack["redis"]
    env = {k: v for k, v in stack["env"].items() if k.startswith("SLAPLAN_")}
    base, procs = start_serve(tmp_path, env)
    body = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeploymentRequest",
            "spec": yaml.safe_load((ROOT / "examples" / "llama-70b-h200.dgdr.yaml").read_text())["spec"]}
    path = f"{base}/apis/nvidia.com/v1alpha1/namespaces/default/dynamographdeploymentrequests"
    try:
        holder["proc"].send_signal(signal.SIGSTOP)
        try:
            uids = []
            for i in range(5):
                started = time.monotonic()
                created = httpx.post(path, json={**body, "metadata": {"name": f"outage-{i}"}}, timeout=30)
                assert created.status_code == 201, created.text
                assert time.monotonic() - started < NOT_WAITING_S, "a create waited on the broker"
                uids.append(created.json()["metadata"]["uid"])
                started = time.monotonic()
                assert httpx.get(f"{base}/healthz", timeout=30).text == "ok"
                assert time.monotonic() - started < NOT_WAITING_S, "/healthz waited on the broker"
            deadline = time.monotonic() + 30
            while (ready := httpx.get(f"{base}/readyz", timeout=30)).status_code == 200:
                assert time.monotonic() < deadline, "readiness never noticed the broker"
                time.sleep(0.2)
            assert ready.status_code == 503 and "broker unreachable" in ready.json()["message"], ready.text
        finally:
            holder["proc"].send_signal(signal.SIGCONT)
        stack["start_worker"]()
        for uid in uids:
            _one_result(_wait(stack, uid, _final, 120, "after the outage"))
        assert httpx.get(f"{base}/readyz", timeout=30).status_code == 200
    finally:
        for proc in procs:
            stop_proc(proc)


def test_closing_a_channel_whose_connection_was_collected_keeps_the_worker_alive(private_redis):
    """The path that made workers exit on a Redis restart: a message delivered and not acknowledged,
    the connection collected (kombu detaches its transport: ``client = None``), then the channel
    closed, which restores unacknowledged messages through ``client.hostname``. Unguarded it raises
    AttributeError (Celery's "Unrecoverable error"); guarded it does not, and Redis still returns
    the message once its visibility timeout passes."""
    from kombu import Connection, Queue
    from kombu.transport import redis as transport

    from workers.kombu_guard import guard_restore_unacked

    url = private_redis[0]
    guard_restore_unacked()
    guarded = transport.QoS.restore_unacked

    def deliver_then_collect(connection):
        queue = Queue("guard-test", routing_key="guard-test")
        with connection.Producer() as producer:
            producer.publish({"n": 1}, routing_key="guard-test", declare=[queue])
        channel = connection.channel()
        got = []
        consumer = channel.Consumer([queue], callbacks=[lambda body, message: got.append(message)])
        consumer.consume()
        connection.drain_events(timeout=5)
        assert got and not got[0].acknowledged
        connection.transport.client = None  # what Connection.collect() leaves behind
        return channel

    with Connection(url, transport_options={"visibility_timeout": 1}) as connection:
        channel = deliver_then_collect(connection)
        transport.QoS.restore_unacked = guarded.__wrapped__
        try:
            with pytest.raises(AttributeError, match="hostname"):
                channel.close()
        finally:
            transport.QoS.restore_unacked = guarded

    with Connection(url, transport_options={"visibility_timeout": 1}) as connection:
        channel = deliver_then_collect(connection)
        channel.close()  # guarded: nothing raised
    time.sleep(1.5)
    with Connection(url, transport_options={"visibility_timeout": 1}) as connection:
        with connection.channel() as fresh:
            fresh.qos.restore_visible(num=100, interval=1)
            assert fresh.client.llen("guard-test") >= 1  # handed back to the queue


def _api_processes(pid: int) -> list[int]:
    """The API processes `slaplan serve` ``pid`` started (Linux /proc: its children started by
    multiprocessing's spawn, not its resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                spawned = b"spawn_main" in (entry / "cmdline").read_bytes()
            except (OSError, IndexError):
                continue
            if parent == pid and spawned:
                found.append(int(entry.name))
    return found


def _names(base: str, path: str) -> list[str]:
    """The names of every object a paged list of ``path`` returns (pages of 5)."""
    import httpx

    names, params = [], {"limit": "5"}
    while True:
        page = httpx.get(base + path, params=params, timeout=30).json()
        names += [item["metadata"]["name"] for item in page["items"]]
        if not page["metadata"].get("continue"):
            return names
        params = {"limit": "5", "continue": page["metadata"]["continue"]}


def test_several_api_processes_share_one_database_and_survive_a_kill(stack, tmp_path):
    """`slaplan serve --processes 2`: creates answered by either process are all planned once, a
    watch opened before them sees every one, paged lists see them all; an API process SIGKILLed is
    started again and the creates after it are planned too."""
    import threading

    import httpx

    env = {k: v for k, v in stack["env"].items() if k.startswith("SLAPLAN_")}
    base, procs = start_serve(tmp_path, env, args=("--processes", "2"), ready_s=BACK_WITHIN_S)
    body = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeploymentRequest",
            "spec": yaml.safe_load((ROOT / "examples" / "llama-70b-h200.dgdr.yaml").read_text())["spec"]}
    path = "/apis/nvidia.com/v1alpha1/namespaces/default/dynamographdeploymentrequests"
    seen: list[str] = []
    resumed: list[str] = []  # the resourceVersions a broken watch was resumed from

    def watch(version: str) -> None:
        """As a client's reflector watches: a watch whose API process dies is opened again from the
        last resourceVersion it saw (on whichever process takes the connection)."""
        deadline = time.monotonic() + 150
        while len(seen) < 24 and time.monotonic() < deadline:
            try:
                with httpx.stream("GET", base + path, params={"watch": "true", "resourceVersion": version,
                                                              "timeoutSeconds": "120"}, timeout=150) as events:
                    for line in events.iter_lines():
                        event = json.loads(line)
                        version = event["object"]["metadata"].get("resourceVersion", version)
                        if event["type"] == "ADDED":
                            seen.append(event["object"]["metadata"]["name"])
                        if len(seen) == 24:
                            return
            except httpx.TransportError:
                resumed.append(version)

    def create(names: list[str]) -> list[str]:  # a new connection each: the processes share the accepts
        uids = []
        for name in names:
            created = httpx.post(base + path, json={**body, "metadata": {"name": name}}, timeout=30)
            assert created.status_code == 201, created.text
            uids.append(created.json()["metadata"]["uid"])
        return uids

    try:
        api_processes = _api_processes(procs[0].pid)
        assert len(api_processes) == 2, api_processes
        start = httpx.get(base + path, timeout=30).json()["metadata"]["resourceVersion"]
        watcher = threading.Thread(target=watch, args=(start,), daemon=True)
        watcher.start()
        stack["start_worker"]()
        uids = create([f"multi-{i:02d}" for i in range(12)])
        killed = api_processes[0]
        os.kill(killed, signal.SIGKILL)
        deadline = time.monotonic() + BACK_WITHIN_S
        while killed in _api_processes(procs[0].pid) or len(_api_processes(procs[0].pid)) < 2:
            assert time.monotonic() < deadline, "the killed API process was not started again"
            time.sleep(0.1)
        while httpx.get(f"{base}/readyz", timeout=30).status_code != 200:
            time.sleep(0.1)
        uids += create([f"multi-{i:02d}" for i in range(12, 24)])
        for uid in uids:
            _one_result(_wait(stack, uid, _final, BACK_WITHIN_S, "planned"))
        watcher.join(BACK_WITHIN_S)
        # every create seen once, whether or not the watch's own process was the one killed
        assert sorted(seen) == [f"multi-{i:02d}" for i in range(24)], (seen, resumed)
        assert _names(base, path) == [f"multi-{i:02d}" for i in range(24)]
    finally:
        for proc in procs:
            stop_proc(proc)
