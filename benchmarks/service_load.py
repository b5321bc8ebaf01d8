"""Load on `slaplan serve`: the targets of the service's "Numbers", embedded or on PostgreSQL + Redis.

Starts the service (service_stack.py: `--stack embedded`, SQLite with the embedded worker; or
`--stack postgres`, a fresh PostgreSQL database, a private redis-server, `--workers` worker
processes and `--processes` API processes) in a temporary directory, then:

1. mixed open-loop load: ``--create-rate`` creates/s (50) and ``--get-rate`` gets/s (200) of
   DGDRs created earlier, for ``--seconds`` (60), while the created DGDRs are planned. Open loop:
   each request is sent at its scheduled time whether or not earlier ones were answered, and its
   latency counts from that time (a client that falls behind adds to it). Target: create p99
   ≤ 100 ms, get p99 ≤ 50 ms, no errors. Then the time until every DGDR created is Ready.
2. paged list: ``--list-objects`` (500) DGDRs in a namespace of their own, listed whole in pages
   of ``--page`` (100) by ``--list-clients`` (10) clients at once, each ``--list-rounds`` times
   (closed loop). Target: p99 ≤ 100 ms per page.
3. burst: ``--burst`` (500) DGDRs submitted at once, then the time until every one is Ready
   (target ≤ 30 s, embedded).
Each line ends with the 1-minute load average when it was printed: the machine may be shared.

    .venv/bin/python benchmarks/service_load.py [--stack embedded|postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import httpx
import yaml
from service_stack import DGDR_FILE, Stack, free_port, load_average, start_serve
from service_stack import stop as stop_serve


PATH = "/apis/nvidia.com/v1alpha1/namespaces/{ns}/dynamographdeploymentrequests"
FINAL = ("Ready", "Failed")
CONNECTIONS = 64  # the load's connection pool: open-loop requests beyond it wait (and that counts)


def dgdr(template: dict, name: str) -> dict:
    return {**template, "metadata": {"name": name}}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def summary(ms: list[float]) -> str:
    return f"p50 {statistics.median(ms):.1f} ms, p99 {percentile(ms, 99):.1f} ms, max {max(ms):.1f} ms"


async def create_many(http: httpx.AsyncClient, template: dict, ns: str, names: list[str], at_once: int) -> None:
    """Create ``names`` (untimed), ``at_once`` in flight."""
    gate = asyncio.Semaphore(at_once)

    async def one(name: str) -> None:
        async with gate:
            (await http.post(PATH.format(ns=ns), json=dgdr(template, name))).raise_for_status()

    await asyncio.gather(*(one(n) for n in names))


TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"  # kubectl's get: rows of printer columns


async def states(http: httpx.AsyncClient, ns: str) -> Counter:
    """How many DGDRs of namespace ``ns`` are in each state, read as ``kubectl get`` reads them: a
    Table of the CRD's printer columns without the objects (polling full objects, 12 KB each once
    planned, would itself load the server), else (no State column: the CRDs are not beside the
    server) the objects."""
    counts: Counter = Counter()
    params = {"limit": "500", "includeObject": "None"}
    while True:
        page = (await http.get(PATH.format(ns=ns), params=params, headers={"Accept": TABLE})).json()
        names = [c["name"] for c in page["columnDefinitions"]]
        if "State" in names:
            counts.update(row["cells"][names.index("State")] or "" for row in page["rows"])
        else:
            page = (await http.get(PATH.format(ns=ns), params={k: v for k, v in params.items() if k != "includeObject"})).json()
            counts.update((item.get("status") or {}).get("state", "") for item in page["items"])
        if not page["metadata"].get("continue"):
            return counts
        params = {**params, "continue": page["metadata"]["continue"]}


async def until_final(http: httpx.AsyncClient, ns: str, count: int, timeout_s: float) -> tuple[float | None, Counter]:
    """Seconds until all ``count`` DGDRs of ``ns`` are final (None: not within ``timeout_s``), and their states."""
    started = time.perf_counter()
    while True:
        counts = await states(http, ns)
        if sum(counts[s] for s in FINAL) >= count:
            return time.perf_counter() - started, counts
        if time.perf_counter() - started > timeout_s:
            return None, counts
        await asyncio.sleep(0.5)


class Connections:
    """Keep-alive HTTP/1.1 connections to the server, lent one request at a time: a client much
    lighter than httpx (a few hundred requests a second from httpx would take a good part of a
    core from the server it measures). Enough for this server's answers: a status line,
    headers with Content-Length, a body."""

    def __init__(self, base: str, size: int):
        self.host, self.port = base.rsplit("//", 1)[1].rsplit(":", 1)
        self.size = size
        self.idle: asyncio.Queue = asyncio.Queue()

    async def open(self) -> None:
        for _ in range(self.size):
            self.idle.put_nowait(await asyncio.open_connection(self.host, int(self.port)))

    async def close(self) -> None:
        while not self.idle.empty():
            _reader, writer = self.idle.get_nowait()
            writer.close()

    async def request(self, method: str, path: str, body: bytes = b"") -> int:
        """Send one request; its status code (0: the connection failed, and is replaced)."""
        reader, writer = await self.idle.get()
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                + (f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n" if body else "") + "\r\n")
        try:
            writer.write(head.encode() + body)
            status = int((await reader.readline()).split()[1])
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
        except (OSError, ValueError, IndexError, asyncio.IncompleteReadError):
            writer.close()
            self.idle.put_nowait(await asyncio.open_connection(self.host, int(self.port)))
            return 0
        self.idle.put_nowait((reader, writer))
        return status


async def open_loop(rate: float, seconds: float, send) -> list[float | None]:
    """Call ``send(i)`` at ``rate`` per second for ``seconds`` without waiting for answers; each
    one's latency (s) from its scheduled time, None for an error."""
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def timed(i: int, at: float) -> float | None:
        return loop.time() - at if await send(i) else None

    tasks = []
    for i in range(int(rate * seconds)):
        at = start + i / rate
        await asyncio.sleep(max(0.0, at - loop.time()))
        tasks.append(asyncio.create_task(timed(i, at)))
    return await asyncio.gather(*tasks)


def cpu_line(stack: Stack, wall_s: float, service_cpu_s: float, client_cpu_s: float) -> str:
    """How much of the machine's 2 cores the service and this client used over ``wall_s``."""
    return (f"  CPU over those {wall_s:.0f} s: service {service_cpu_s:.0f} s, this client {client_cpu_s:.0f} s "
            f"(of {os.cpu_count()} cores × {wall_s:.0f} s; the rest went to other processes)")


async def mixed_load(stack: Stack, template: dict, ns: str, args) -> None:
    async with httpx.AsyncClient(base_url=stack.base, timeout=60) as http:
        seeds = [f"seed-{i}" for i in range(100)]  # what the first gets read
        await create_many(http, template, ns, seeds, 10)
    created = list(seeds)
    picker = random.Random(0)
    connections = Connections(stack.base, CONNECTIONS)
    await connections.open()

    async def create(i: int) -> bool:
        name = f"load-{i}"
        status = await connections.request("POST", PATH.format(ns=ns), json.dumps(dgdr(template, name)).encode())
        if status != 201:
            return False
        created.append(name)
        return True

    async def get(_i: int) -> bool:
        return await connections.request("GET", PATH.format(ns=ns) + f"/{picker.choice(created)}") == 200

    started, service_cpu, client_cpu = time.perf_counter(), stack.cpu_seconds(), time.process_time()
    creates, gets = await asyncio.gather(open_loop(args.create_rate, args.seconds, create),
                                         open_loop(args.get_rate, args.seconds, get))
    wall = time.perf_counter() - started
    service_cpu, client_cpu = stack.cpu_seconds() - service_cpu, time.process_time() - client_cpu
    await connections.close()
    load = load_average()
    for what, results, target in (("create", creates, 100), ("get", gets, 50)):
        ms = [x * 1000 for x in results if x is not None]
        errors = sum(x is None for x in results)
        print(f"{what}s, open loop at {len(results) / args.seconds:g}/s for {args.seconds:g} s "
              f"({len(results)} in {wall:.1f} s): {summary(ms)}; errors {errors}; target p99 ≤ {target} ms "
              f"(load {load})", flush=True)
    print(cpu_line(stack, wall, service_cpu, client_cpu), flush=True)
    async with httpx.AsyncClient(base_url=stack.base, timeout=60) as http:
        done, counts = await until_final(http, ns, len(created), args.ready_timeout)
    print(f"  all {len(created)} DGDRs final {done:.1f} s after the load ended ({dict(counts)}) (load {load_average()})"
          if done is not None else f"  NOT all final after {args.ready_timeout:g} s: {dict(counts)}", flush=True)


def children_cpu_seconds() -> float:
    """CPU seconds (user + system) of this process's children that have ended."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def list_client(base: str, path: str, page: int, rounds: int, objects: int, start_at: float) -> tuple[list[float], int]:
    """One closed-loop list client (run in a process of its own): lists `path` whole `rounds` times
    in pages of `page`, from wall time `start_at` (s). Returns each page's latency (s: request sent
    to last byte read) and the number of failed lists (a non-200 page, or not `objects` items)."""
    os.nice(10)  # the clients stand in for other machines: the service comes first for this machine's cores
    latencies: list[float] = []
    errors = 0
    with httpx.Client(base_url=base, timeout=60) as http:
        time.sleep(max(0.0, start_at - time.time()))
        for _ in range(rounds):
            params, seen = {"limit": str(page)}, 0
            while True:
                started = time.perf_counter()
                answer = http.get(path, params=params)
                latencies.append(time.perf_counter() - started)
                if answer.status_code != 200:
                    errors += 1
                    break
                body = answer.json()
                seen += len(body["items"])
                if not body["metadata"].get("continue"):
                    errors += seen != objects
                    break
                params = {"limit": str(page), "continue": body["metadata"]["continue"]}
    return latencies, errors


async def paged_lists(stack: Stack, template: dict, ns: str, args) -> None:
    base = stack.base
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        await create_many(http, template, ns, [f"listed-{i}" for i in range(args.list_objects)], 10)
        await until_final(http, ns, args.list_objects, args.ready_timeout)  # no plans compete with the lists
    # Each client is a process of its own, as ten kubectl clients would be: in one event loop, one
    # client's decoding of a 1.2 MB page would hold up the others' timers and count as server time.
    start_at = time.time() + 3.0  # every client's first request at once, after the processes start
    jobs = [(base, PATH.format(ns=ns), args.page, args.list_rounds, args.list_objects, start_at)
            for _ in range(args.list_clients)]
    started, service_cpu = time.perf_counter(), stack.cpu_seconds()
    children_cpu = children_cpu_seconds()
    with ProcessPoolExecutor(args.list_clients, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(list_client, *zip(*jobs)))
    wall = time.perf_counter() - started - 3.0
    service_cpu, client_cpu = stack.cpu_seconds() - service_cpu, children_cpu_seconds() - children_cpu
    pages = [page for latencies, _ in results for page in latencies]
    errors = sum(failed for _, failed in results)
    ms = [x * 1000 for x in pages]
    print(f"list of {args.list_objects} in pages of {args.page}, {args.list_clients} clients × {args.list_rounds} "
          f"lists: {len(ms)} pages, {summary(ms)}; errors {errors}; target p99 ≤ 100 ms (load {load_average()})",
          flush=True)
    print(cpu_line(stack, wall, service_cpu, client_cpu)
          + f"; per page: service {service_cpu / len(ms) * 1e3:.1f} ms, clients {client_cpu / len(ms) * 1e3:.1f} ms",
          flush=True)


async def burst(stack: Stack, template: dict, ns: str, args) -> None:
    limits = httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS)
    async with httpx.AsyncClient(base_url=stack.base, limits=limits, timeout=120) as http:
        started, service_cpu, client_cpu = time.perf_counter(), stack.cpu_seconds(), time.process_time()
        answers = await asyncio.gather(
            *(http.post(PATH.format(ns=ns), json=dgdr(template, f"burst-{i}")) for i in range(args.burst)))
        submitted = time.perf_counter() - started
        bad = [a.status_code for a in answers if a.status_code != 201]
        done, counts = await until_final(http, ns, args.burst - len(bad), args.ready_timeout)
    total = time.perf_counter() - started
    service_cpu, client_cpu = stack.cpu_seconds() - service_cpu, time.process_time() - client_cpu
    print(f"burst: {args.burst} DGDRs submitted at once in {submitted:.1f} s ({len(bad)} refused); "
          + (f"all final {total:.1f} s after the first was sent" if done is not None
             else f"NOT all final after {args.ready_timeout:g} s")
          + f"; states {dict(counts)}; target ≤ 30 s embedded (load {load_average()})", flush=True)
    print(cpu_line(stack, total, service_cpu, client_cpu), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", choices=("embedded", "postgres"), default="embedded")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (postgres stack)")
    parser.add_argument("--processes", type=int, default=1, help="API processes, serve --processes (postgres stack)")
    parser.add_argument("--create-rate", type=float, default=50.0, help="creates per second")
    parser.add_argument("--get-rate", type=float, default=200.0, help="gets per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the mixed load")
    parser.add_argument("--list-objects", type=int, default=500)
    parser.add_argument("--page", type=int, default=100, help="list page size (limit)")
    parser.add_argument("--list-clients", type=int, default=10)
    parser.add_argument("--list-rounds", type=int, default=20, help="whole lists per client")
    parser.add_argument("--burst", type=int, default=500, help="DGDRs submitted at once; 0 skips the phase")
    parser.add_argument("--ready-timeout", type=float, default=900.0)
    parser.add_argument("--skip", action="append", default=[], choices=("mixed", "list", "burst"))
    parser.add_argument("--dgdr", type=Path, default=DGDR_FILE)
    args = parser.parse_args(argv)
    template = yaml.safe_load(args.dgdr.read_text())

    with tempfile.TemporaryDirectory(prefix="slaplan-load-") as tmp:
        serve_args = ("--processes", str(args.processes)) if args.processes > 1 else ()
        stack = Stack(Path(tmp), postgres=args.stack == "postgres", workers=args.workers, serve_args=serve_args)
        print(f"slaplan serve, {args.stack}, {args.processes} API process(es) (load {load_average()})", flush=True)
        try:
            if "mixed" not in args.skip:
                asyncio.run(mixed_load(stack, template, "load", args))
            if "list" not in args.skip:
                asyncio.run(paged_lists(stack, template, "lists", args))
            if args.burst and "burst" not in args.skip:
                asyncio.run(burst(stack, template, "burst", args))
        finally:
            stack.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
