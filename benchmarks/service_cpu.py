"""CPU the service's own process spends per request, measured in-process (no sockets).

The API (``api.app.create_app`` on a fresh SQLite file, or with ``--database-url`` an empty
database made beforehand, e.g. PostgreSQL's; its dispatcher running) is driven by an
httpx client over the ASGI transport in the same process, so each figure is the process's CPU
time (all threads; the light client included) divided by the requests:

- per create, per get of a created DGDR, per list page of 100 planned DGDRs;
- with ``--plans N``: ``slaplan serve``'s embedded worker and planning pool added, N DGDRs
  created and planned; the API process's CPU per DGDR (the create, the worker's hand-off, lease
  and dispatcher writes: what competes with requests for this process's GIL; the planning
  itself runs in the pool's children and is not counted).

CPU figures do not depend on the machine's other users the way latencies do, but a busy
machine still moves them some: compare code versions in turn.

    .venv/bin/python benchmarks/service_cpu.py [--requests 300] [--listed 200] [--plans 200] [--database-url URL]
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


async def _requests(client: httpx.AsyncClient, template: dict, sessions, args) -> dict[str, float]:
    """CPU ms per create, get and list page."""
    from workers.tasks import process_dgdr

    for i in range(args.listed):  # planned DGDRs, as a list after the load returns them
        created = await client.post(PATH.format(ns="listed"), json=_dgdr(template, f"l{i}"))
        process_dgdr(sessions, created.json()["metadata"]["uid"])
    out = {}
    started = time.process_time()
    for i in range(args.requests):
        assert (await client.post(PATH.format(ns="load"), json=_dgdr(template, f"d{i}"))).status_code == 201
    out["create"] = (time.process_time() - started) / args.requests
    started = time.process_time()
    for i in range(args.requests):
        assert (await client.get(PATH.format(ns="load") + f"/d{i}")).status_code == 200
    out["get"] = (time.process_time() - started) / args.requests
    started, pages = time.process_time(), 0
    for _ in range(args.list_rounds):
        token = None
        while True:
            page = await client.get(PATH.format(ns="listed"), params={"limit": 100, **({"continue": token} if token else {})})
            pages += 1
            token = page.json()["metadata"].get("continue")
            if not token:
                break
    out["list page of 100"] = (time.process_time() - started) / pages
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
            return await _requests(client, template, app.state.sessions, args)
    finally:
        app.state.dispatcher.stop()
        if worker is not None:
            stop_embedded_worker(worker)
        app.state.engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="creates, then gets of them")
    parser.add_argument("--listed", type=int, default=200, help="planned DGDRs listed in pages of 100")
    parser.add_argument("--list-rounds", type=int, default=10, help="times the whole list is read")
    parser.add_argument("--plans", type=int, default=0,
                        help="instead: DGDRs created and planned by the embedded worker and planning pool")
    parser.add_argument("--database-url", help="an empty database to use, made beforehand (default: a fresh SQLite file)")
    args = parser.parse_args()
    for what, seconds in asyncio.run(_run(args)).items():
        print(f"{what}: {seconds * 1e3:.2f} ms of CPU")


if __name__ == "__main__":
    main()
