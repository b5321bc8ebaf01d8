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
