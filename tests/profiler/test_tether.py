"""Child processes tied to the life of the process that starts them: the guard passes the
command's exit code on, stops its whole tree when told to, and an emulator started with
``--exit-with-parent`` ends with its parent."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from paths import ROOT
from procs import SLAPLAN, descendants, free_port, running, wait_ended
from profiler.bench.tether import CANNOT_START, start_tethered, stop_group

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process tree from /proc")


def test_the_guard_passes_the_exit_code_on_and_says_what_cannot_start(tmp_path):
    log = tmp_path / "out.log"
    with log.open("wb") as out:
        assert start_tethered(["sh", "-c", "echo engine says hi; exit 3"], stdout=out).wait() == 3
        assert start_tethered(["sh", "-c", "kill -TERM $$"], stdout=out).wait() == 128 + signal.SIGTERM
        assert start_tethered(["no-such-engine-here", "--port", "1"], stdout=out).wait() == CANNOT_START
    lines = log.read_text().splitlines()
    assert lines[0] == "engine says hi"
    assert lines[1].startswith("cannot start 'no-such-engine-here': [Errno 2]")


def _tree(guard) -> set[int]:
    """The guard's descendants once all four run: the sentinel, the shell and its two children."""
    tree: set[int] = set()
    deadline = time.monotonic() + 30
    while len(running(tree)) < 4 and time.monotonic() < deadline:
        tree = descendants(guard.pid)
        time.sleep(0.05)
    assert len(running(tree)) == 4
    return tree


def test_stopping_the_guard_stops_the_whole_tree(tmp_path):
    with (tmp_path / "out.log").open("wb") as out:
        guard = start_tethered(["sh", "-c", "sleep 600 & sleep 600 & wait"], stdout=out)
    tree = _tree(guard)
    stop_group(guard)
    assert guard.returncode is not None and wait_ended(tree) == set()


def test_a_killed_guard_takes_the_command_tree_with_it(tmp_path):
    """SIGKILLed, the guard stops nothing itself: the sentinel in the command's group does."""
    with (tmp_path / "out.log").open("wb") as out:
        guard = start_tethered(["sh", "-c", "sleep 600 & sleep 600 & wait"], stdout=out)
    tree = _tree(guard)
    guard.kill()
    assert guard.wait() == -signal.SIGKILL
    assert wait_ended(tree) == set()


@pytest.mark.slow
def test_an_emulator_told_so_ends_with_its_parent():
    """Not started under a guard, the emulator watches its parent itself."""
    port = free_port()
    parent = textwrap.dedent(f"""
        import subprocess, sys, time, httpx
        emulator = subprocess.Popen({[*SLAPLAN, "emulate", "--model", "meta-llama/Llama-3.1-8B-Instruct",
                                      "--gpu", "a100_sxm", "--port", str(port), "--exit-with-parent"]!r})
        while emulator.poll() is None:
            try:
                httpx.get("http://127.0.0.1:{port}/health", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        print(emulator.pid, flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", parent], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        emulator = {int(proc.stdout.readline())}
        assert running(emulator) == emulator
    finally:
        proc.kill()
        proc.wait()
    assert wait_ended(emulator) == set()
