"""The outbox and leases, driven by a clock the test owns: what a dispatcher publishes, when it
publishes again, and that a lease which runs out puts the request back in the queue. The broker
is a recorder (the dispatcher's view of it is patched); real brokers: test_worker_failures.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from infra import leases, migrate, outbox
from infra.db import make_engine, make_session_factory, session_scope
from infra.resources import ResourceCreate, create_resource, update_status
from infra.settings import load_settings
from workers import dispatcher as dispatch
from workers import lifecycle
from workers.deploy import TRACK_TASK
from workers.receipts import Receipts
from workers.tasks import BENCH_TASK, ONLINE_TASK, PLAN_TASK

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
TTL = timedelta(seconds=15)


class Broker:
    """Records what is published; ``down`` makes it refuse; ``run_id`` names the process;
    ``popped``: the uids whose messages left the queue (all that were sent are queued otherwise)."""

    def __init__(self):
        self.conf = SimpleNamespace(broker_url="redis://broker.invalid:6379/0")
        self.sent: list[tuple[str, str, str]] = []
        self.popped: set[str] = set()
        self.down = False
        self.run_id = "first"

    def queued(self) -> set[str]:
        return {uid for _task, uid, _queue in self.sent} - self.popped

    def send_task(self, task: str, args: list[str], queue: str) -> None:
        if self.down:
            raise ConnectionError("refused")
        self.sent.append((task, args[0], queue))


@pytest.fixture
def world(tmp_path, monkeypatch):
    settings = load_settings({}, database_url=f"sqlite:///{tmp_path / 'd.db'}")
    migrate.upgrade(settings)
    engine = make_engine(settings)
    yield _world(make_session_factory(engine), monkeypatch)
    engine.dispose()


@pytest.fixture
def pg_world(pg_sessions, monkeypatch):
    return _world(pg_sessions, monkeypatch)


def _world(sessions, monkeypatch) -> SimpleNamespace:
    """A recording broker, a clock at ``T0`` and dispatchers on ``sessions`` reading it."""
    broker = Broker()

    def identity(app, timeout_s):
        if app.down:
            raise ConnectionError("refused")
        return app.run_id

    def publish(app, tasks):
        for task, uid, queue in tasks:
            app.send_task(task, [uid], queue)

    monkeypatch.setattr(dispatch, "broker_identity", identity)
    monkeypatch.setattr(dispatch, "publish", publish)
    monkeypatch.setattr(dispatch, "queued_uids", lambda app, timeout_s: app.queued())
    clock = {"now": T0}
    return SimpleNamespace(sessions=sessions, broker=broker, clock=clock,
                           dispatcher=lambda: dispatch.Dispatcher(broker, sessions, clock=lambda: clock["now"]))


def _store(world, name: str, *, group="nvidia.com", plural="dynamographdeploymentrequests", spec=None,
           status=None) -> str:
    with session_scope(world.sessions) as session:
        stored = create_resource(session, ResourceCreate(
            group=group, version="v1", kind="K", plural=plural, namespace="default", name=name, spec=spec or {},
            status=status if status is not None else lifecycle.dgdr_pending(1, T0)))
        outbox.mark_due(session, stored.uid, world.clock["now"])
        return stored.uid


def _row(world, uid: str):
    from infra.tables import ResourceRow

    with session_scope(world.sessions) as session:
        row = session.query(ResourceRow).filter_by(uid=uid).one()
        return SimpleNamespace(due=row.publish_due_at, owner=row.lease_owner, expires=row.lease_expires_at)


ON_BOTH = pytest.mark.parametrize("database", ["world", "pg_world"])  # claims are matched by time: both stores


@ON_BOTH
def test_a_stored_request_is_published_once_then_again_only_if_nobody_took_it(database, request):
    world = request.getfixturevalue(database)
    uid = _store(world, "a")
    d = world.dispatcher()
    assert d.run_once() == 1 and world.broker.sent == [(PLAN_TASK, uid, "plan")]
    assert d.broker_problem is None
    assert d.run_once() == 0
    world.clock["now"] = T0 + dispatch.CLAIM_FOR * 2  # the claim settled as published: not due until later
    assert d.run_once() == 0
    world.clock["now"] = T0 + dispatch.REPUBLISH_AFTER + timedelta(seconds=1)
    assert d.run_once() == 1 and len(world.broker.sent) == 2


def test_a_taken_request_is_not_published_while_its_lease_is_renewed(world):
    uid = _store(world, "leased")
    d = world.dispatcher()
    d.run_once()
    with session_scope(world.sessions) as session:
        assert leases.take(session, uid, "w1", T0, TTL)
        assert not leases.take(session, uid, "w2", T0 + timedelta(seconds=1), TTL)  # held: a duplicate skips
    for second in (10, 20, 30):  # heartbeats every 10 s keep it
        world.clock["now"] = T0 + timedelta(seconds=second)
        with session_scope(world.sessions) as session:
            assert leases.renew(session, uid, "w1", world.clock["now"], TTL)
        assert d.run_once() == 0
    # the worker dies: 15 s after its last heartbeat the request is published again
    world.clock["now"] = T0 + timedelta(seconds=44)
    assert d.run_once() == 0
    world.clock["now"] = T0 + timedelta(seconds=46)
    assert d.run_once() == 1 and world.broker.sent[-1] == (PLAN_TASK, uid, "plan")
    with session_scope(world.sessions) as session:
        assert not leases.renew(session, uid, "w1", world.clock["now"], TTL)  # the dead worker's lease is gone
        assert leases.take(session, uid, "w2", world.clock["now"], TTL)


def _delivered(task: str, uid: str) -> SimpleNamespace:
    """What Celery's ``task_received`` hands the receipts: the delivered message's request."""
    return SimpleNamespace(task_name=task, args=[uid])


def test_a_delivered_request_is_held_until_its_task_takes_the_lease(world):
    """A worker notes the delivery (a receipt, renewed); its task takes the lease over; nothing is
    published meanwhile, and the receipt is no longer renewed once the task holds the request."""
    uid = _store(world, "delivered")
    d = world.dispatcher()
    d.run_once()
    receipts = Receipts(world.sessions, TTL, clock=lambda: world.clock["now"])
    receipts.received(request=_delivered(PLAN_TASK, uid))
    assert _row(world, uid).owner == receipts.owner and _row(world, uid).due is None
    with session_scope(world.sessions) as session:
        assert not leases.take(session, uid, leases.RECEIPT + "other", T0, TTL)  # a duplicate's receipt
    for second in (10, 20, 30):  # a message waiting for its turn in a live worker
        world.clock["now"] = T0 + timedelta(seconds=second)
        receipts.renew()
        assert d.run_once() == 0
    with session_scope(world.sessions) as session:
        assert leases.take(session, uid, "task", world.clock["now"], TTL)  # the task takes it over
        assert not leases.take(session, uid, leases.RECEIPT + "other", world.clock["now"], TTL)
    world.clock["now"] = T0 + timedelta(seconds=40)
    receipts.renew()
    assert _row(world, uid).owner == "task"
    assert _row(world, uid).expires.replace(tzinfo=UTC) == T0 + timedelta(seconds=45)  # SQLite drops the zone


def test_a_dead_workers_receipts_run_out_and_their_requests_are_published_again(world):
    uid = _store(world, "orphaned")
    d = world.dispatcher()
    d.run_once()
    Receipts(world.sessions, TTL, clock=lambda: world.clock["now"]).received(request=_delivered(PLAN_TASK, uid))
    world.clock["now"] = T0 + TTL - timedelta(seconds=1)
    assert d.run_once() == 0
    world.clock["now"] = T0 + TTL + timedelta(seconds=1)  # killed at delivery: no renewal
    assert d.run_once() == 1 and world.broker.sent[-1] == (PLAN_TASK, uid, "plan")


def test_receipts_dropped_with_a_connection_run_out_and_a_stopping_worker_hands_its_back(world):
    dropped, handed_back, tracked = _store(world, "dropped"), _store(world, "handed-back"), _store(world, "tracked")
    d = world.dispatcher()
    d.run_once()
    receipts = Receipts(world.sessions, TTL, clock=lambda: world.clock["now"])
    receipts.received(request=_delivered(PLAN_TASK, dropped))
    receipts.received(request=_delivered(TRACK_TASK, tracked))  # takes no lease: no receipt
    assert _row(world, tracked).owner is None
    receipts.reconnected()
    receipts.received(request=_delivered(BENCH_TASK, handed_back))
    world.clock["now"] = T0 + timedelta(seconds=10)
    receipts.renew()
    receipts.stop()
    assert d.run_once() == 1 and world.broker.sent[-1] == (PLAN_TASK, handed_back, "plan")
    world.clock["now"] = T0 + TTL + timedelta(seconds=1)
    assert d.run_once() == 1 and world.broker.sent[-1] == (PLAN_TASK, dropped, "plan")


def test_a_message_handed_to_a_worker_that_never_read_it_is_published_again(world):
    """Redis popped the message into a frozen worker's socket: in no queue, noted by no worker.
    A message popped by a worker that noted it (a receipt), or still queued, is left alone."""
    lost, received, queued = _store(world, "lost"), _store(world, "received"), _store(world, "queued")
    d = world.dispatcher()
    assert d.run_once() == 3
    world.broker.popped |= {lost, received}
    receipts = Receipts(world.sessions, TTL, clock=lambda: world.clock["now"])
    receipts.received(request=_delivered(PLAN_TASK, received))
    world.clock["now"] = T0 + dispatch.DELIVERY_GRACE - timedelta(seconds=1)  # a note may still be on its way
    assert d.run_once() == 0
    receipts.renew()
    world.clock["now"] = T0 + dispatch.DELIVERY_GRACE + dispatch.LOST_CHECK_EVERY
    assert d.run_once() == 1 and world.broker.sent[-1] == (PLAN_TASK, lost, "plan")


@ON_BOTH
def test_requests_waiting_in_the_queue_are_not_published_again(database, request):
    """500 requests queued behind busy workers: looked at every few seconds for ten minutes, none
    is published again until ``REPUBLISH_AFTER``."""
    world = request.getfixturevalue(database)
    for i in range(500):
        _store(world, f"waiting-{i}")
    d = world.dispatcher()
    assert d.run_once() == 500
    for second in range(5, int(dispatch.REPUBLISH_AFTER.total_seconds()), 5):
        world.clock["now"] = T0 + timedelta(seconds=second)
        assert d.run_once() == 0
    world.clock["now"] = T0 + dispatch.REPUBLISH_AFTER
    assert d.run_once() == 500


def test_nothing_is_lost_while_the_broker_is_down_and_a_restart_publishes_again(world):
    d = world.dispatcher()
    first = _store(world, "before")
    d.run_once()
    world.broker.down = True
    during = _store(world, "during")
    assert d.run_once() == 0
    assert d.broker_problem.startswith("broker unreachable")
    assert _row(world, during).due is not None
    # back, but a new process (a Redis restart without persistence): its queue is empty
    world.broker.down, world.broker.run_id = False, "second"
    world.clock["now"] = T0 + timedelta(seconds=2)
    assert d.run_once() == 2
    assert sorted(uid for _t, uid, _q in world.broker.sent) == sorted([first, first, during])
    assert d.broker_problem is None


def test_a_publish_that_fails_leaves_the_request_due(world):
    d = world.dispatcher()
    d.run_once()  # the broker seen once
    uid = _store(world, "x")
    world.broker.send_task = lambda *a, **k: (_ for _ in ()).throw(ConnectionError("reset"))
    assert d.run_once() == 0 and d.broker_problem
    assert _row(world, uid).due is not None


def test_routes_by_kind_and_state_and_finished_work_is_not_published(world):
    d = world.dispatcher()
    plan = _store(world, "plan")
    online = _store(world, "online", spec={"online": True})
    bench = _store(world, "bench", group="ome.io", plural="benchmarkjobs", status={"state": "Running"})
    deployed = _store(world, "deployed", status={"state": "Deploying", "deployment": {"created": False}})
    ready = _store(world, "ready", status={"state": "Ready"})
    d.run_once()
    assert sorted(world.broker.sent) == sorted([
        (PLAN_TASK, plan, "plan"), (ONLINE_TASK, online, "bench"), (BENCH_TASK, bench, "bench"),
        (TRACK_TASK, deployed, "plan"),
    ])
    assert _row(world, ready).due is None


def test_two_dispatchers_publish_each_request_once(world):
    uids = [_store(world, f"r{i}") for i in range(dispatch.BATCH + 5)]
    first, second = world.dispatcher(), world.dispatcher()
    first.run_once(), second.run_once()
    sent = [uid for _t, uid, _q in world.broker.sent]
    assert sorted(sent) == sorted(uids)


def test_a_finished_lease_keeps_a_publish_time_set_meanwhile(world):
    uid = _store(world, "changed")
    with session_scope(world.sessions) as session:
        assert leases.take(session, uid, "w", T0, TTL)
        outbox.mark_due(session, uid, T0 + timedelta(seconds=1))  # the spec changed while it ran
        leases.release(session, uid, "w", T0 + timedelta(minutes=5))
    assert _row(world, uid).due is not None and _row(world, uid).owner is None
    world.clock["now"] = T0 + timedelta(seconds=2)
    assert world.dispatcher().run_once() == 1


def test_a_status_write_does_not_disturb_the_lease(world):
    uid = _store(world, "status")
    with session_scope(world.sessions) as session:
        assert leases.take(session, uid, "w", T0, TTL)
        update_status(session, {"state": "Profiling"}, uid=uid)
    assert _row(world, uid).owner == "w"


def test_every_dgdr_state_is_either_finished_or_left_to_a_worker():
    from planner import status

    assert status.TERMINAL | status.UNFINISHED == {*status.STATES, ""}
    assert not status.TERMINAL & status.UNFINISHED


def test_creates_that_wake_it_during_a_round_are_published_by_one_more_round(world, monkeypatch):
    """A burst of creates costs one more round, not a round each: the wakes coalesce."""
    import threading

    monkeypatch.setattr(dispatch, "DISPATCH_EVERY_S", 3600.0)  # no timed rounds: only wakes start one
    rounds: list[int] = []
    first_round, release, second_round = threading.Event(), threading.Event(), threading.Event()
    dispatcher = world.dispatcher()

    def counted_round() -> int:
        rounds.append(len(rounds) + 1)
        if len(rounds) == 1:
            first_round.set()
            release.wait()
        else:
            second_round.set()
        return 0

    monkeypatch.setattr(dispatcher, "run_once", counted_round)
    dispatcher.start()
    first_round.wait()
    for _ in range(50):  # creates stored while the first round runs
        dispatcher.wake()
    release.set()
    second_round.wait()
    dispatcher.stop()
    assert rounds == [1, 2]


def test_a_round_with_nothing_to_do_never_waits_for_another_writer(world, tmp_path):
    """SQLite has one writer at a time: a round that only finds the broker unchanged, no lease
    run out and nothing due reads, and so runs while another connection holds the write lock."""
    import sqlite3

    _store(world, "planned")
    dispatcher = world.dispatcher()
    assert dispatcher.run_once() == 1  # notes the broker, publishes the request
    writer = sqlite3.connect(tmp_path / "d.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # the write lock, held by a create or a plan being saved
    try:
        assert dispatcher.run_once() == 0
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    world.clock["now"] += TTL * 100  # a lease could have run out, the request is due again: writes
    assert dispatcher.run_once() == 1


class Killed(BaseException):
    """The process ends here (SIGKILL): nothing after this line of the round runs."""


@ON_BOTH
def test_requests_a_dispatcher_took_and_died_before_publishing_are_published_by_another(database, request,
                                                                                        monkeypatch):
    """A dispatcher takes due requests (a commit) and is killed before it publishes them: another
    dispatcher does not publish them while the claim could still be live, and publishes them in
    its first round 20 s later (the issue's 30 s to back in progress, less a worker's pickup)."""
    world = request.getfixturevalue(database)
    uids = [_store(world, f"in-flight-{i}") for i in range(3)]
    publish = dispatch.publish

    def killed_while_publishing(*_args) -> None:
        raise Killed

    monkeypatch.setattr(dispatch, "publish", killed_while_publishing)
    with pytest.raises(Killed):
        world.dispatcher().run_once()
    monkeypatch.setattr(dispatch, "publish", publish)
    survivor = world.dispatcher()
    assert survivor.run_once() == 0 and world.broker.sent == []
    world.clock["now"] = T0 + timedelta(seconds=20)
    assert survivor.run_once() == 3
    assert sorted(uid for _t, uid, _q in world.broker.sent) == sorted(uids)


@ON_BOTH
def test_a_published_request_a_worker_took_at_once_is_not_published_again(database, request, monkeypatch):
    """The worker takes the request (its lease clears the publish time) before the dispatcher's
    round ends: the round does not mark it due again."""
    world = request.getfixturevalue(database)
    uid = _store(world, "fast")
    d = world.dispatcher()

    def taken_at_once(app, tasks: list[tuple[str, str, str]]) -> None:
        for task, uid, queue in tasks:
            with session_scope(world.sessions) as session:
                assert leases.take(session, uid, "w", T0, TTL)
                leases.release(session, uid, "w", None)  # planned and finished
            world.broker.sent.append((task, uid, queue))

    monkeypatch.setattr(dispatch, "publish", taken_at_once)
    assert d.run_once() == 1
    assert _row(world, uid).due is None
    world.clock["now"] = T0 + dispatch.REPUBLISH_AFTER + timedelta(seconds=1)
    assert d.run_once() == 0


def test_woken_rounds_between_upkeeps_only_publish(world, monkeypatch):
    """Rounds a stream of creates wakes within ``DISPATCH_EVERY_S`` of the last upkeep publish what
    is due without looking at the broker or the leases again; a broker seen down is not published
    to until the next look finds it up."""
    looks: list[datetime] = []
    identity = dispatch.broker_identity

    def looked(app, timeout_s):
        looks.append(world.clock["now"])
        return identity(app, timeout_s)

    monkeypatch.setattr(dispatch, "broker_identity", looked)
    d = world.dispatcher()
    first = _store(world, "first")
    assert d.run_once() == 1 and looks == [T0]
    world.clock["now"] = T0 + timedelta(seconds=dispatch.DISPATCH_EVERY_S / 2)
    second = _store(world, "second")
    assert d.run_once() == 1 and looks == [T0]  # published, no second look
    world.clock["now"] = T0 + timedelta(seconds=dispatch.DISPATCH_EVERY_S)
    world.broker.down = True
    assert d.run_once() == 0 and d.broker_problem.startswith("broker unreachable")
    third = _store(world, "third")
    world.broker.down = False  # back, but not looked at yet: the woken round publishes nothing
    world.clock["now"] = T0 + timedelta(seconds=dispatch.DISPATCH_EVERY_S * 1.5)
    assert d.run_once() == 0 and _row(world, third).due is not None
    world.clock["now"] = T0 + timedelta(seconds=dispatch.DISPATCH_EVERY_S * 2)
    assert d.run_once() == 1 and d.broker_problem is None
    assert [uid for _t, uid, _q in world.broker.sent] == [first, second, third]
