"""CPU the service's own process spends per request, measured in-process (no sockets).

The API (``api.app.create_app`` on a fresh SQLite file, or with ``--database-url`` an empty
database made beforehand, e.g. PostgreSQL's; its dispatcher running) is driven by an
httpx client over the ASGI transport in the same process, so each figure is the process's CPU
time (all threads; the light client included) divided by the requests:

- per create, per get of a created DGDR, per list page of 100 planned DGDRs (the first DGDR is
  planned, the others carry its status: the same objects as planned ones, made without planning
  each);
- with ``--list-limit N``: the list read in pages of N, and the CPU of its first, middle and last
  page apart (the service's process and, on PostgreSQL, the database backends of the
  benchmark's own database, read from /proc), and the whole list's wall time: a page's cost
  should not grow with the list's length (``--listed 13000 --list-limit 500``);
- with ``--plans N``: ``slaplan serve``'s embedded worker and planning pool added, N DGDRs
  created and planned; the API process's CPU per DGDR (the create, the worker's hand-off, lease
  and dispatcher writes: what competes with requests for this process's GIL; the planning
  itself runs in the pool's children and is not counted).

CPU figures do not depend on the machine's other users the way latencies do, but a busy
machine still moves them some: compare code versions in turn.

    .venv/bin/python benchmarks/service_cpu.py [--requests 300] [--listed 200] [--list-limit 100] [--plans 200] [--database-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DGDR_FILE = ROOT / "examples" / "llama-70b-h200.dgdr.yaml"
PATH = "/apis/nvidia.com/v1alpha1/namespaces/{ns}/dynamographdeploymentrequests"
FINAL = ("Ready", "Failed")


def _service(plans: bool, database_url: str | None):
    """(app, embedded worker or None) on ``database_url`` (None: a fresh SQLite file), migrated."""
    from api.app import create_app
    from infra import migrate
    from infra.settings import load_settings
    from workers.celery_app import make_celery
    from workers.embedded import start_embedded_worker
    from workers.plan_pool import PlanPool

    settings = load_settings({}, database_url=database_url or f"sqlite:///{tempfile.mkdtemp()}/service.db")
    migrate.upgrade(settings)
    pool = PlanPool(settings) if plans else None
    celery = make_celery(settings, plan_pool=pool)
    app = create_app(settings, celery=celery)
    return app, (start_embedded_worker(celery, concurrency=2, plan_pool=pool) if plans else None)


def _dgdr(template: dict, name: str) -> dict:
    return {**template, "metadata": {"name": name}}


async def _all_final(client: httpx.AsyncClient, ns: str) -> None:
    while True:
        items = (await client.get(PATH.format(ns=ns), params={"limit": 500})).json()["items"]
        if all((item.get("status") or {}).get("state") in FINAL for item in items):
            return
        await asyncio.sleep(0.2)


async def _requests(client: httpx.AsyncClient, template: dict, sessions, args, engine) -> dict[str, float]:
    """CPU ms per create, get and list page; the list's wall time."""
    from workers.tasks import process_dgdr

    from infra.resources import get_resource, update_status

    for i in range(args.listed):  # planned DGDRs, as a list after the load returns them
        created = await client.post(PATH.format(ns="listed"), json=_dgdr(template, f"l{i}"))
        uid = created.json()["metadata"]["uid"]
        if i == 0:
            process_dgdr(sessions, uid)
        with sessions() as session, session.begin():
            if i == 0:
                status = get_resource(session, _listed_key("l0")).status
            else:
                update_status(session, status, uid=uid)
    out = {}
    started = time.process_time()
    for i in range(args.requests):
        assert (await client.post(PATH.format(ns="load"), json=_dgdr(template, f"d{i}"))).status_code == 201
    out["create"] = (time.process_time() - started) / args.requests
    started = time.process_time()
    for i in range(args.requests):
        assert (await client.get(PATH.format(ns="load") + f"/d{i}")).status_code == 200
    out["get"] = (time.process_time() - started) / args.requests
    out.update(await _list(client, args, engine))
    return out


def _listed_key(name: str):
    from infra.resources import ResourceKey

    return ResourceKey(group="nvidia.com", plural="dynamographdeploymentrequests", namespace="listed", name=name)


def _backend_cpu(engine) -> float:
    """CPU seconds so far of the database backends serving the benchmark's database (0 but on
    PostgreSQL on this machine): the database's own share of a list page."""
    if engine.dialect.name != "postgresql":
        return 0.0
    with engine.connect() as connection:
        pids = connection.exec_driver_sql(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()").scalars().all()
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


async def _list(client: httpx.AsyncClient, args, engine) -> dict[str, float]:
    """CPU per list page (all pages; and the first, middle and last apart, service and database),
    and the whole list's wall time, each a mean over the rounds."""
    service: list[list[float]] = []
    database: list[list[float]] = []
    walls = []
    for _ in range(args.list_rounds):
        token, service_s, database_s = None, [], []
        wall = time.perf_counter()
        while True:
            cpu, db = time.process_time(), _backend_cpu(engine)
            params = {"limit": args.list_limit, **({"continue": token} if token else {})}
            page = await client.get(PATH.format(ns="listed"), params=params)
            service_s.append(time.process_time() - cpu)
            database_s.append(_backend_cpu(engine) - db)
            token = page.json()["metadata"].get("continue")
            if not token:
                break
        walls.append(time.perf_counter() - wall)
        service.append(service_s)
        database.append(database_s)
    n, rounds = len(service[0]), args.list_rounds
    out = {f"list page of {args.list_limit}": sum(map(sum, service)) / (n * rounds)}
    for label, at in (("first", 0), ("middle", n // 2), ("last", n - 1)):
        out[f"list page of {args.list_limit}, {label}"] = sum(s[at] for s in service) / rounds
        if engine.dialect.name == "postgresql":
            out[f"list page of {args.list_limit}, {label}, database"] = sum(d[at] for d in database) / rounds
    if engine.dialect.name == "postgresql":  # /proc counts in clock ticks (10 ms): the whole list's sum
        out[f"whole list of {args.listed}, database"] = sum(map(sum, database)) / rounds
    out[f"whole list of {args.listed} in {n} pages, wall"] = sum(walls) / rounds
    return out


async def _planned(client: httpx.AsyncClient, template: dict, n: int) -> dict[str, float]:
    """API-process CPU ms per DGDR created and planned by the embedded worker."""
    await client.post(PATH.format(ns="warm"), json=_dgdr(template, "warm"))  # the pool's children start
    await _all_final(client, "warm")
    started = time.process_time()
    for i in range(n):
        await client.post(PATH.format(ns="planned"), json=_dgdr(template, f"p{i}"))
    await _all_final(client, "planned")
    return {"DGDR created and planned (API process)": (time.process_time() - started) / n}


async def _run(args) -> dict[str, float]:
    from workers.embedded import stop_embedded_worker

    template = yaml.safe_load(DGDR_FILE.read_text())
    app, worker = _service(args.plans > 0, args.database_url)
    app.state.dispatcher.start()
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
            if worker is not None:
                return await _planned(client, template, args.plans)
            return await _requests(client, template, app.state.sessions, args, app.state.engine)
    finally:
        app.state.dispatcher.stop()
        if worker is not None:
            stop_embedded_worker(worker)
        app.state.engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="creates, then gets of them")
    parser.add_argument("--listed", type=int, default=200, help="planned DGDRs listed")
    parser.add_argument("--list-limit", type=int, default=100, help="the list's page size (kubectl's chunk: 500)")
    parser.add_argument("--list-rounds", type=int, default=10, help="times the whole list is read")
    parser.add_argument("--plans", type=int, default=0,
                        help="instead: DGDRs created and planned by the embedded worker and planning pool")
    parser.add_argument("--database-url", help="an empty database to use, made beforehand (default: a fresh SQLite file)")
    args = parser.parse_args()
    for what, seconds in asyncio.run(_run(args)).items():
        print(f"{what}: {seconds * 1e3:.2f} ms" + ("" if what.endswith("wall") else " of CPU"))


if __name__ == "__main__":
    main()
