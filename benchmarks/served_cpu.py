"""CPU the running service spends per get and per list page, read from /proc (a load-independent
measure, unlike latency on a shared machine).

Starts the service as service_load.py does (service_stack.py: embedded, or ``--stack postgres``
with its workers and a private Redis), creates ``--objects`` DGDRs and waits until all are
planned (12 KB each then), and reads them over one keep-alive HTTP/1.1 connection, one request
at a time, with a client that does not decode what it reads:

- ``--gets`` gets of those DGDRs (by name, round robin);
- the whole list ``--rounds`` times in pages of ``--page`` (100: about 1.25 MB a page).

Each figure is the CPU time (user + system) of the service's processes over the phase, less what
they use when idle (the dispatcher's rounds, the workers' heartbeats; measured over ``--idle``
seconds just before), divided by the requests. PostgreSQL's own processes are not counted.

    .venv/bin/python benchmarks/served_cpu.py [--stack postgres] [--objects 500] [--gets 2000] [--rounds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml
from service_load import PATH, Connections, create_many, until_final
from service_stack import DGDR_FILE, Stack, load_average

NS = "served"


async def _measure(stack: Stack, send, count: int, idle_rate: float) -> float:
    """Service CPU seconds per call of ``send`` (``count`` calls, one at a time), idle use taken out."""
    started, cpu = time.perf_counter(), stack.cpu_seconds()
    for i in range(count):
        if await send(i) != 200:
            raise SystemExit(f"request {i} failed")
    wall, cpu = time.perf_counter() - started, stack.cpu_seconds() - cpu
    return max(0.0, cpu - idle_rate * wall) / count


async def _run(stack: Stack, args) -> None:
    template = yaml.safe_load(args.dgdr.read_text())
    names = [f"d{i}" for i in range(args.objects)]
    async with httpx.AsyncClient(base_url=stack.base, timeout=60) as http:
        await create_many(http, template, NS, names, 10)
        if (await until_final(http, NS, args.objects, args.ready_timeout))[0] is None:
            raise SystemExit("the DGDRs were not all planned in time")
        first = (await http.get(PATH.format(ns=NS), params={"limit": args.page})).json()
    pages_per_list = -(-args.objects // args.page)
    continues = [None]  # each page's continue token, read once: the pages of one list, in turn
    async with httpx.AsyncClient(base_url=stack.base, timeout=60) as http:
        token = first["metadata"].get("continue")
        while token:
            continues.append(token)
            token = (await http.get(PATH.format(ns=NS), params={"limit": args.page, "continue": token})
                     ).json()["metadata"].get("continue")
    assert len(continues) == pages_per_list, continues
    connections = Connections(stack.base, 1)
    await connections.open()
    cpu = stack.cpu_seconds()
    await asyncio.sleep(args.idle)
    idle_rate = (stack.cpu_seconds() - cpu) / args.idle

    def page_path(i: int) -> str:
        token = continues[i % pages_per_list]
        return PATH.format(ns=NS) + f"?limit={args.page}" + (f"&continue={token}" if token else "")

    get_s = await _measure(stack, lambda i: connections.request("GET", PATH.format(ns=NS) + f"/{names[i % len(names)]}"),
                           args.gets, idle_rate)
    page_s = await _measure(stack, lambda i: connections.request("GET", page_path(i)), args.rounds * pages_per_list,
                            idle_rate)
    await connections.close()
    print(f"service CPU per get {get_s * 1e3:.2f} ms, per page of {args.page} {page_s * 1e3:.2f} ms "
          f"(idle {idle_rate * 1e3:.1f} ms/s; load {load_average()})", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", choices=("embedded", "postgres"), default="embedded")
    parser.add_argument("--objects", type=int, default=500, help="planned DGDRs read")
    parser.add_argument("--gets", type=int, default=2000)
    parser.add_argument("--page", type=int, default=100, help="list page size (limit)")
    parser.add_argument("--rounds", type=int, default=20, help="whole lists read")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds the idle use is measured over")
    parser.add_argument("--ready-timeout", type=float, default=600.0)
    parser.add_argument("--dgdr", type=Path, default=DGDR_FILE)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="slaplan-cpu-") as tmp:
        stack = Stack(Path(tmp), postgres=args.stack == "postgres")
        try:
            asyncio.run(_run(stack, args))
        finally:
            stack.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
