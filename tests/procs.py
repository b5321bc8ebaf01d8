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
