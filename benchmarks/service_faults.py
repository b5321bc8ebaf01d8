"""Faults under `slaplan serve` + `slaplan worker`s on PostgreSQL and a Redis this script starts.

Starts its own redis-server on a free port (never the machine's), a fresh PostgreSQL database
(dropped afterwards), `slaplan serve` (API only) and two `slaplan worker`s (default settings:
15 s lease; see service_stack.py), then:

1. outage: Redis stopped (SIGSTOP: connections open, nothing answers); ``--creates`` creates,
   each followed by a /healthz, timed; and how long /readyz takes to name the broker;
2. worker SIGKILL: ``--requests`` DGDRs submitted, one worker frozen (SIGSTOP) while it holds
   one, then killed; the time from the kill until every request it held is held by another
   worker (or final);
3. worker SIGKILL between delivery and the lease: a third worker whose tasks stop before they
   take their request's lease (a hook in this script; ``--pool threads``, 4 threads) is handed
   ``--requests`` DGDRs with the others, then killed once it holds 4 (or the rest are final);
   the time from the kill until every request it held is held by another worker (or final);
4. frozen worker handed a message: both workers frozen (SIGSTOP) while blocked in BRPOP, one
   DGDR created, Redis pops it into a frozen worker's socket (tried again if their BRPOPs had
   timed out), both killed and started again; the time from the kill until it is held by a
   worker (or final);
5. Redis restart (without persistence: its queue is lost): ``--requests`` DGDRs submitted,
   Redis restarted while they are queued and planned; the time until every unfinished request
   is held by a worker, published again, or final.
Every phase waits until all its requests are final and checks one result each.

    .venv/bin/python benchmarks/service_faults.py [--requests 30] [--creates 50]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import yaml
from service_stack import DGDR_FILE, PG_ADMIN, Stack, load_average, start_redis, stop, wait_for

PATH = "/apis/nvidia.com/v1alpha1/namespaces/default/dynamographdeploymentrequests"
FINAL = ("Ready", "Failed")
REPUBLISH_AFTER = timedelta(minutes=10)  # workers.dispatcher: a published request is due again after this
STUCK_THREADS = 4  # the stopped worker's threads: the deliveries it holds when killed
# A `slaplan worker` whose tasks stop before they take their request's lease: delivered, not started.
STOPPED_BEFORE_THE_LEASE = """
import sys, threading
from contextlib import contextmanager
from api.cli import main
from workers import heartbeat

@contextmanager
def stopped(sessions, uid, ttl, **_):
    threading.Event().wait()
    yield None

heartbeat.leased = stopped
sys.exit(main(sys.argv[1:]))
"""


def submit(stack: Stack, template: dict, prefix: str, n: int) -> list[str]:
    names = [f"{prefix}-{i}" for i in range(n)]
    with httpx.Client(base_url=stack.base, timeout=30) as http:
        for name in names:
            http.post(PATH, json={**template, "metadata": {"name": name}}).raise_for_status()
    return names


def all_final(stack: Stack, names: list[str], timeout_s: float = 600) -> float:
    """Seconds until every one of ``names`` is final; checks one result each."""
    took = wait_for(lambda: all(s in FINAL for n, s, _o, _d in stack.rows() if n in names), timeout_s, "all final")
    with httpx.Client(base_url=stack.base, timeout=30) as http:
        for name in names:
            status = http.get(f"{PATH}/{name}").json()["status"]
            types = [c["type"] for c in status["conditions"]]
            assert status["state"] == "Ready" and len(types) == len(set(types)), (name, status["state"])
    return took


def outage(stack: Stack, template: dict, creates: int) -> dict:
    stack.redis.send_signal(signal.SIGSTOP)
    create_ms, health_ms = [], []
    try:
        with httpx.Client(base_url=stack.base, timeout=120) as http:
            stopped = time.monotonic()
            noticed = None
            for i in range(creates):
                started = time.perf_counter()
                http.post(PATH, json={**template, "metadata": {"name": f"outage-{i}"}}).raise_for_status()
                create_ms.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                assert http.get("/healthz").text == "ok"
                health_ms.append((time.perf_counter() - started) * 1000)
                if noticed is None and http.get("/readyz").status_code == 503:
                    noticed = time.monotonic() - stopped
            if noticed is None:
                noticed = wait_for(lambda: http.get("/readyz").status_code == 503, 30, "readyz") + time.monotonic() - stopped
    finally:
        stack.redis.send_signal(signal.SIGCONT)
    final = all_final(stack, [f"outage-{i}" for i in range(creates)])
    return {"create_ms": create_ms, "health_ms": health_ms, "readyz_s": noticed, "final_s": final}


def worker_kill(stack: Stack, template: dict, n: int) -> dict:
    names = submit(stack, template, "kill", n)
    victim = stack.workers[0]
    mark = f"/{victim.pid}/"
    wait_for(lambda: any(o and mark in o for _n, _s, o, _d in stack.rows()), 120, "the worker holds a request")
    victim.send_signal(signal.SIGSTOP)  # frozen mid-request: what it holds now is what the kill orphans
    held = [name for name, state, owner, _d in stack.rows() if owner and mark in owner and state not in FINAL]
    victim.kill()
    killed = time.monotonic()
    stack.workers[0] = stack.start_worker()  # as a supervisor would; the other worker alone also takes over

    def back() -> bool:
        return all(state in FINAL or (owner and mark not in owner)
                   for name, state, owner, _d in stack.rows() if name in held)

    wait_for(back, 120, "back in progress")
    return {"held": len(held), "back_s": time.monotonic() - killed, "final_s": all_final(stack, names)}


def delivery_kill(stack: Stack, template: dict, n: int) -> dict:
    log = stack.folder / "stuck.log"
    victim = subprocess.Popen(
        [sys.executable, "-c", STOPPED_BEFORE_THE_LEASE, "worker", "--queues", "plan", "--pool", "threads",
         "--concurrency", str(STUCK_THREADS), "--loglevel", "INFO", "--hostname", f"stuck-{os.getpid()}@%h"],
        cwd=stack.folder, env=stack.env, stdin=subprocess.DEVNULL, stdout=log.open("w"),
        stderr=subprocess.STDOUT)
    mark = f"/{victim.pid}/"
    wait_for(lambda: victim.poll() is None and log.exists() and " ready." in log.read_text(), 120, "the worker ready")
    names = submit(stack, template, "delivered", n)

    def held_by_victim() -> list[str]:
        return [name for name, state, owner, _d in stack.rows()
                if name in names and owner and mark in owner and state not in FINAL]

    wait_for(lambda: len(held_by_victim()) >= STUCK_THREADS
             or all(s in FINAL or (o and mark in o) for name, s, o, _d in stack.rows() if name in names),
             120, "the stopped worker holds its deliveries")
    held = held_by_victim()
    victim.kill()
    victim.wait(10)
    killed = time.monotonic()

    def back() -> bool:
        return all(state in FINAL or (owner and mark not in owner)
                   for name, state, owner, _d in stack.rows() if name in held)

    wait_for(back, 900, "back in progress")
    return {"held": len(held), "back_s": time.monotonic() - killed, "final_s": all_final(stack, names)}


def frozen_handed(stack: Stack, template: dict) -> dict:
    import redis

    broker = redis.Redis(port=stack.redis_port)
    for attempt in range(10):  # a BRPOP lasts 1 s: the freeze and the publish must fall in one
        wait_for(lambda: sum("b" in c["flags"] for c in broker.client_list()) >= 2, 60, "both workers in BRPOP")
        for worker in stack.workers:
            worker.send_signal(signal.SIGSTOP)
        name = submit(stack, template, f"frozen-{attempt}", 1)[0]

        def popped() -> bool:  # published (due again in ten minutes) and in no queue
            soon = datetime.now(UTC) + REPUBLISH_AFTER / 2
            return any(n == name and due and due > soon for n, _s, _o, due in stack.rows()) and not broker.llen("plan")

        deadline = time.monotonic() + 3
        while not popped() and time.monotonic() < deadline:
            time.sleep(0.05)
        if popped():
            break
        for worker in stack.workers:  # their BRPOPs had timed out: they plan this one; again
            worker.send_signal(signal.SIGCONT)
        all_final(stack, [name])
    else:
        raise SystemExit("Redis never handed a message to a frozen worker")
    for worker in stack.workers:
        worker.kill()
        worker.wait(10)
    killed = time.monotonic()
    stack.workers = [stack.start_worker() for _ in stack.workers]
    wait_for(lambda: any(n == name and (o or s in FINAL) for n, s, o, _d in stack.rows()), 900, "back in progress")
    return {"back_s": time.monotonic() - killed, "final_s": all_final(stack, [name]), "attempts": attempt + 1}


def redis_restart(stack: Stack, template: dict, n: int) -> dict:
    names = submit(stack, template, "restart", n)
    wait_for(lambda: any(s == "Ready" for name, s, _o, _d in stack.rows() if name in names), 120, "work under way")
    stop(stack.redis)
    restarted_at = datetime.now(UTC)
    fault = time.monotonic()
    stack.redis = start_redis(stack.folder, stack.redis_port)
    open_at_fault = [name for name, s, _o, _d in stack.rows() if name in names and s not in FINAL]

    def back() -> bool:
        return all(state in FINAL or owner or (due and due >= restarted_at + REPUBLISH_AFTER)
                   for name, state, owner, due in stack.rows() if name in open_at_fault)

    wait_for(back, 120, "back in progress")
    back_s = time.monotonic() - fault
    return {"open": len(open_at_fault), "back_s": back_s, "final_s": all_final(stack, names),
            "alive": all(w.poll() is None for w in stack.workers)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=30, help="DGDRs in each fault phase")
    parser.add_argument("--creates", type=int, default=50, help="creates during the outage")
    parser.add_argument("--pg-admin", default=PG_ADMIN)
    args = parser.parse_args(argv)
    template = {k: v for k, v in yaml.safe_load(DGDR_FILE.read_text()).items() if k != "metadata"}
    with tempfile.TemporaryDirectory(prefix="slaplan-faults-") as tmp:
        stack = Stack(Path(tmp), postgres=True, pg_admin=args.pg_admin)
        try:
            out = outage(stack, template, args.creates)
            c, h = sorted(out["create_ms"]), sorted(out["health_ms"])
            print(f"outage (Redis stopped): {len(c)} creates p50 {statistics.median(c):.1f} ms, max {c[-1]:.1f} ms; "
                  f"/healthz p50 {statistics.median(h):.1f} ms, max {h[-1]:.1f} ms; /readyz named the broker after "
                  f"{out['readyz_s']:.1f} s; all Ready {out['final_s']:.1f} s after it answered again "
                  f"(load {load_average()})")
            out = worker_kill(stack, template, args.requests)
            print(f"worker SIGKILL: {out['held']} held request(s) back in progress after {out['back_s']:.1f} s; "
                  f"all {args.requests} Ready after {out['final_s']:.1f} s more, one result each (load {load_average()})")
            out = delivery_kill(stack, template, args.requests)
            print(f"worker SIGKILL between delivery and lease: {out['held']} delivered request(s) back in progress "
                  f"after {out['back_s']:.1f} s; all {args.requests} Ready after {out['final_s']:.1f} s more, "
                  f"one result each (load {load_average()})")
            out = frozen_handed(stack, template)
            print(f"frozen worker handed a message, killed: back in progress after {out['back_s']:.1f} s; Ready "
                  f"{out['final_s']:.1f} s later, one result (attempt {out['attempts']}; load {load_average()})")
            out = redis_restart(stack, template, args.requests)
            print(f"Redis restart: {out['open']} unfinished request(s) back in progress or queued after "
                  f"{out['back_s']:.1f} s; all Ready {out['final_s']:.1f} s later, one result each; "
                  f"workers alive: {out['alive']} (load {load_average()})")
        finally:
            stack.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
