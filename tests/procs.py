"""Helpers for tests that start real processes: a free loopback port and the CLI command."""

from __future__ import annotations

import socket
import sys

# ``slaplan`` itself, run by the interpreter under test.
SLAPLAN = [sys.executable, "-m", "api.cli"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(proc, url: str, log_path, timeout_s: float = 30.0) -> None:
    """Wait until ``url`` answers 200 (e.g. ``…/readyz``); stop ``proc`` and raise with its log if not."""
    import time

    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(log_path.read_text())
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    stop(proc)
    raise RuntimeError(f"{url} did not become ready:\n{log_path.read_text()}")


def stop(proc) -> None:
    """SIGTERM, then SIGKILL after 15 s."""
    import signal
    import subprocess

    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
