"""Load on `slaplan serve` with the embedded default (SQLite, in-process queue, embedded worker).

Starts `slaplan serve` in a temporary directory on a free loopback port, then:

1. create+get latency: ``--clients`` concurrent clients, each creating a DGDR and reading it
   back, ``--pairs`` times or until ``--seconds`` pass. Closed loop by default (each client
   sends its next pair as soon as the last one is answered: latency = clients / throughput);
   ``--rate R`` paces each client at R pairs per second instead (open loop).
2. burst: ``--burst`` DGDRs submitted at once (``--clients`` connections), then the time until
   every one is Ready (or Failed), polled on the list endpoint.

The server and the clients share the machine; numbers are for the machine they ran on.

    .venv/bin/python benchmarks/service_load.py [--clients 50] [--pairs 40] [--burst 500]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
DGDR_FILE = ROOT / "examples" / "llama-70b-h200.dgdr.yaml"
PATH = "/apis/nvidia.com/v1alpha1/namespaces/{ns}/dynamographdeploymentrequests"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve(workdir: Path, port: int, extra: list[str], env_extra: dict[str, str] | None = None) -> subprocess.Popen:
    """`slaplan serve` in ``workdir`` on ``port``, with no SLAPLAN_* variable of this process but
    ``env_extra``'s; returns once it is ready."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLAPLAN_")}
    env.update(env_extra or {})
    env["PYTHONPATH"] = str(ROOT)
    log = (workdir / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "serve", "--port", str(port), "--log-level", "warning", *extra],
        cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("slaplan serve exited:\n" + (workdir / "serve.log").read_text())
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    stop_serve(proc)
    raise SystemExit("slaplan serve did not become ready in 60 s")


def stop_serve(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def dgdr(template: dict, name: str) -> dict:
    return {**template, "metadata": {"name": name}}


def warm_up(base: str, template: dict, ns: str, n: int = 20) -> None:
    """A few untimed pairs first: lazy imports and first connections are not what is measured."""
    with httpx.Client(base_url=base, timeout=30) as http:
        for i in range(n):
            http.post(PATH.format(ns=ns), json=dgdr(template, f"warm-{i}")).raise_for_status()
            http.get(PATH.format(ns=ns) + f"/warm-{i}").raise_for_status()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


async def create_get_load(base: str, template: dict, ns: str, clients: int, pairs: int, seconds: float, rate: float):
    """Latencies (s) of create+get pairs, errors, and wall time."""
    latencies: list[float] = []
    errors: list[str] = []
    # one client, one connection each, as separate users would have; connected before timing
    https = [httpx.AsyncClient(base_url=base, timeout=30) for _ in range(clients)]
    await asyncio.gather(*(http.get("/healthz") for http in https))
    deadline = time.monotonic() + seconds

    async def client(index: int) -> None:
        http = https[index]
        # paced clients start spread over one period, as independent users would
        next_at = time.monotonic() + (index / (clients * rate) if rate else 0.0)
        for n in range(pairs):
            if time.monotonic() > deadline:
                return
            if rate:
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                next_at += 1 / rate
            name = f"load-{index}-{n}"
            started = time.perf_counter()
            created = await http.post(PATH.format(ns=ns), json=dgdr(template, name))
            got = await http.get(PATH.format(ns=ns) + f"/{name}")
            latencies.append(time.perf_counter() - started)
            if created.status_code != 201 or got.status_code != 200:
                errors.append(f"{created.status_code}/{got.status_code}")

    started = time.perf_counter()
    try:
        await asyncio.gather(*(client(i) for i in range(clients)))
    finally:
        await asyncio.gather(*(http.aclose() for http in https))
    return latencies, errors, time.perf_counter() - started


async def burst(base: str, template: dict, ns: str, count: int, clients: int, timeout_s: float):
    """Submit ``count`` DGDRs at once; (submit seconds, seconds until all final, states)."""
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=120) as http:
        started = time.perf_counter()
        answers = await asyncio.gather(
            *(http.post(PATH.format(ns=ns), json=dgdr(template, f"burst-{i}")) for i in range(count))
        )
        submitted = time.perf_counter() - started
        bad = [a.status_code for a in answers if a.status_code != 201]
        if bad:
            raise SystemExit(f"{len(bad)} creates failed: {bad[:5]}")
        deadline = time.monotonic() + timeout_s
        states: dict[str, int] = {}
        while time.monotonic() < deadline:
            items = (await http.get(PATH.format(ns=ns))).json()["items"]
            states = {}
            for item in items:
                state = (item.get("status") or {}).get("state", "")
                states[state] = states.get(state, 0) + 1
            if states.get("Ready", 0) + states.get("Failed", 0) == count:
                return submitted, time.perf_counter() - started, states
            await asyncio.sleep(0.5)
        return submitted, None, states


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--pairs", type=int, default=40, help="create+get pairs per client (at most)")
    parser.add_argument("--seconds", type=float, default=60.0, help="time limit of the latency phase")
    parser.add_argument("--rate", type=float, default=0.0, help="pairs per second per client; 0 = closed loop")
    parser.add_argument("--burst", type=int, default=500, help="DGDRs submitted at once; 0 skips the phase")
    parser.add_argument("--ready-timeout", type=float, default=600.0)
    parser.add_argument("--dgdr", type=Path, default=DGDR_FILE)
    parser.add_argument("--url", help="measure a server already running here instead of starting one")
    parser.add_argument("--serve-arg", action="append", default=[], help="extra `slaplan serve` argument")
    args = parser.parse_args(argv)
    template = yaml.safe_load(args.dgdr.read_text())

    with tempfile.TemporaryDirectory(prefix="slaplan-load-") as tmp:
        proc = None
        if args.url:
            base = args.url.rstrip("/")
        else:
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            proc = start_serve(Path(tmp), port, args.serve_arg)
        try:
            run_id = f"{os.getpid() % 10000}-{int(time.time()) % 100000}"
            warm_up(base, template, f"warm-{run_id}")
            latencies, errors, wall = asyncio.run(
                create_get_load(base, template, f"load-{run_id}", args.clients, args.pairs, args.seconds, args.rate)
            )
            ms = [x * 1000 for x in latencies]
            mode = f"open loop, {args.rate:g} pairs/s per client" if args.rate else "closed loop"
            print(f"create+get, {args.clients} clients ({mode}): {len(ms)} pairs in {wall:.1f} s "
                  f"({len(ms) / wall:.0f} pairs/s), errors {len(errors)}")
            if ms:
                print(f"  p50 {statistics.median(ms):.1f} ms   p90 {percentile(ms, 90):.1f} ms   "
                      f"p99 {percentile(ms, 99):.1f} ms   max {max(ms):.1f} ms")
            if args.burst:
                submitted, done, states = asyncio.run(
                    burst(base, template, f"burst-{run_id}", args.burst, args.clients, args.ready_timeout)
                )
                print(f"burst: {args.burst} DGDRs submitted in {submitted:.1f} s; "
                      + (f"all final after {done:.1f} s" if done is not None else f"NOT all final after {args.ready_timeout:.0f} s")
                      + f"; states {states}")
        finally:
            if proc is not None:
                stop_serve(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
