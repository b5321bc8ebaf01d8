"""The embedded worker's planning children do not outlive a parent killed outright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from paths import ROOT

pytestmark = pytest.mark.slow


PARENT = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
from workers.plan_pool import start_plan_pool

if __name__ == "__main__":
    pool = start_plan_pool(2)
    list(pool.map(time.sleep, [0.5, 0.5]))  # two tasks at once: both children start
    print(" ".join(str(pid) for pid in pool._processes), flush=True)
    time.sleep(600)
"""


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_children_end_when_the_parent_is_killed(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(script), str(ROOT)], stdout=subprocess.PIPE, text=True)
    try:
        children = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(children) == 2 and all(_running(pid) for pid in children)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 20
        while any(_running(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_running(pid) for pid in children), f"children {children} outlived their parent"
    finally:
        if parent.poll() is None:
            parent.kill()


ONLINE_SPEC = {"modelName": "meta-llama/Llama-3.1-8B-Instruct", "backend": "vllm", "online": True,
               "sla": {"isl": 200, "osl": 30, "ttft": 300, "itl": 20}, "gpu": {"type": "a100_sxm"}}


def _wait_until(check, what: str, limit_s: float = 120.0):
    """``check()``'s first true value, polled; fails naming ``what`` after ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while not (value := check()):
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.1)
    return value


def _row(sessions, uid: str):
    from infra.db import session_scope
    from infra.tables import ResourceRow

    with session_scope(sessions) as session:
        return session.query(ResourceRow).filter_by(uid=uid).one()


def test_a_stop_mid_plan_hands_the_lease_back(sessions, database_url, caplog):
    """The pool stopped while a child plans a DGDR: no error, the child's lease is handed back and
    the request is due again now. The child waits for an engine that never serves (an online DGDR
    whose engine command only sleeps), so it is mid-plan, holding the lease, when the pool stops."""
    import logging
    import threading
    from datetime import UTC, datetime, timedelta

    from infra import outbox
    from infra.db import session_scope
    from infra.resources import ResourceCreate, create_resource
    from infra.settings import load_settings
    from procs import command_line, descendants, running
    from workers import lifecycle
    from workers.plan_pool import STOPPED, PlanPool

    settings = load_settings({}, database_url=database_url, online_engine_command="sleep 600 {port}")
    with session_scope(sessions) as session:
        uid = create_resource(session, ResourceCreate(
            group="nvidia.com", version="v1alpha1", kind="DynamoGraphDeploymentRequest",
            plural="dynamographdeploymentrequests", namespace="default", name="stopped", spec=ONLINE_SPEC,
            status=lifecycle.dgdr_pending(1, datetime.now(UTC)))).uid
    pool = PlanPool(settings)
    pool.start(1)
    outcomes: list[str] = []
    caplog.set_level(logging.INFO, logger="workers")
    planning = threading.Thread(target=lambda: outcomes.append(pool.process_dgdr(uid)))
    planning.start()
    try:
        engine = _wait_until(lambda: {p for p in descendants(os.getpid()) if command_line(p).startswith("sleep 600")},
                             "the child start an engine")
        held = _row(sessions, uid)
        assert held.lease_owner is not None and held.status["state"] == "Profiling"
    finally:
        pool.stop()
        planning.join(60)
    assert outcomes == [STOPPED]
    row = _row(sessions, uid)
    assert row.lease_owner is None and row.lease_expires_at is None
    with session_scope(sessions) as session:  # due now: the next dispatcher round publishes it
        due = outbox.take_due(session, datetime.now(UTC), limit=10, claim=timedelta(seconds=10))
    assert [d.uid for d in due] == [uid]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert f"planning of {uid} stopped" in caplog.text and "picked up again" in caplog.text
    _wait_until(lambda: not running(engine), "the engine end with its child", 30)
