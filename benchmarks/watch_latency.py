"""How soon a change reaches a watcher of `slaplan serve` (embedded default).

Starts `slaplan serve` in a temporary directory, opens ``--watchers`` watches of the DGDR list
(``?watch=true``), then creates ``--count`` DGDRs one after another (``--gap`` seconds apart)
and measures, for each, the time from the create's answer to its ADDED event on every watcher.

    .venv/bin/python benchmarks/watch_latency.py [--count 50] [--watchers 5] [--gap 0.2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
import yaml

from service_load import PATH
from service_stack import DGDR_FILE, free_port, start_serve
from service_stack import stop as stop_serve


def watch(url: str, arrivals: dict[str, list[float]], ready: threading.Event, stop: threading.Event) -> None:
    """Record the arrival time of every ADDED event, by object name, until ``stop``."""
    try:
        with httpx.stream("GET", url, params={"watch": "true", "resourceVersion": "0", "timeoutSeconds": "600"},
                          timeout=None) as response:
            ready.set()
            for line in response.iter_lines():
                if stop.is_set():
                    return
                event = json.loads(line) if line else {}
                if event.get("type") == "ADDED":
                    arrivals.setdefault(event["object"]["metadata"]["name"], []).append(time.monotonic())
    except httpx.TransportError:
        if not stop.is_set():  # the server going away at the end is expected
            raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=50, help="DGDRs created")
    parser.add_argument("--watchers", type=int, default=5, help="watches open at once")
    parser.add_argument("--gap", type=float, default=0.2, help="seconds between creates")
    args = parser.parse_args()
    template = yaml.safe_load(DGDR_FILE.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        proc = start_serve(Path(tmp), port, [])
        base = f"http://127.0.0.1:{port}"
        path = base + PATH.format(ns="watched")
        arrivals: dict[str, list[float]] = {}
        stop = threading.Event()
        threads = []
        try:
            for _ in range(args.watchers):
                ready = threading.Event()
                thread = threading.Thread(target=watch, args=(path, arrivals, ready, stop), daemon=True)
                thread.start()
                ready.wait(30)
                threads.append(thread)
            answered: dict[str, float] = {}
            with httpx.Client(timeout=30) as client:
                for i in range(args.count):
                    name = f"w{i}"
                    r = client.post(path, json={**template, "metadata": {"name": name}})
                    r.raise_for_status()
                    answered[name] = time.monotonic()
                    time.sleep(args.gap)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and any(len(arrivals.get(n, [])) < args.watchers for n in answered):
                time.sleep(0.1)
        finally:
            stop.set()
            stop_serve(proc)
    delays = sorted(1000 * (t - answered[n]) for n in answered for t in arrivals.get(n, []))
    missing = args.count * args.watchers - len(delays)
    q = lambda p: delays[min(len(delays) - 1, int(p * len(delays)))]  # noqa: E731
    print(f"{args.count} creates × {args.watchers} watchers: {len(delays)} ADDED events, {missing} missing")
    print(f"  create answered → ADDED: p50 {statistics.median(delays):.0f} ms   p90 {q(0.9):.0f} ms   "
          f"p99 {q(0.99):.0f} ms   max {delays[-1]:.0f} ms")


if __name__ == "__main__":
    main()
