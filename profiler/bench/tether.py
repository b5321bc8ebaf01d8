"""Child processes tied to the life of the process that starts them (I/O: processes, signals).

A worker starts engines (``slaplan emulate`` or a user's command) and genai-bench as child
processes, each in a session of its own. Killed outright (SIGKILL, the OOM killer), the worker
runs no clean-up, and such a child would run on, orphaned. ``start_tethered`` therefore runs
each command under a guard: this file, run as a script by the same interpreter. The guard

- asks the kernel for ``PARENT_DEATH_SIGNAL`` when its parent dies (Linux ``PR_SET_PDEATHSIG``)
  and also looks at its parent pid every ``PARENT_CHECK_S`` (other systems; a backstop);
- runs the command in a process group of its own, so that the command's whole tree (a shell's
  children, an engine's workers) is stopped at once;
- starts that group with a sentinel (this file again, ``--sentinel``): a process of the group that
  outlives the guard and kills the group with SIGKILL once the guard is gone, however it ended
  (SIGKILLed itself, the guard cleans nothing up). The sentinel leads the group and the command
  joins it, so there is no moment when the command runs unwatched, and the group's id cannot be
  reused while the sentinel lives;
- on SIGTERM or SIGINT (``stop_group``), or once its parent is gone, stops that group: SIGTERM,
  then, when the command has ended or after ``STOP_GRACE_S``, SIGKILL for whatever is left;
- exits with the command's exit code when the command ends by itself (127 when it cannot be
  started, saying why on its output).

The kernel sends the parent-death signal when the *thread* that started a process ends, not
only the process; a tethered process whose parent pid has not changed ignores it.
``tether_to_parent`` is that watch alone, for processes that stop themselves
(``slaplan emulate --exit-with-parent``, the planning pool's children). Only the standard
library is imported here: the guard starts with no packages on its path.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

PARENT_CHECK_S = 1.0  # how often a tethered process looks at its parent pid (s)
STOP_GRACE_S = 5.0  # from SIGTERM to SIGKILL for a command's process group (s)
PARENT_DEATH_SIGNAL = signal.SIGHUP  # the kernel's word that the parent (thread) has ended
_PR_SET_PDEATHSIG = 1  # prctl(2) option
CANNOT_START = 127  # the guard's exit code for a command it cannot start (as a shell's)
_GUARD = Path(__file__).resolve()


def tether_to_parent(on_parent_death: Callable[[], None], *, parent: int | None = None) -> None:
    """Call ``on_parent_death`` once, when this process's parent (``parent``: its pid when the
    parent started this process; default the parent now) has ended. Call from the main thread."""
    parent = os.getppid() if parent is None else parent
    once = threading.Lock()

    def check(*_signal) -> None:
        if os.getppid() != parent and once.acquire(blocking=False):
            on_parent_death()

    def watch() -> None:
        while True:
            time.sleep(PARENT_CHECK_S)
            check()

    signal.signal(PARENT_DEATH_SIGNAL, check)  # before the kernel may send it
    _ask_for_parent_death_signal()
    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
    check()  # the parent may have ended before the kernel was asked


def _ask_for_parent_death_signal() -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(PARENT_DEATH_SIGNAL), 0, 0, 0)


def start_tethered(argv: list[str], *, stdout: IO | int, cwd: str | Path | None = None,
                   env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """Start ``argv`` under a guard that lives no longer than this process (see the module
    docstring): stdin closed, stdout and stderr to ``stdout``, ``env`` (default: this process's).
    The process returned is the guard, leader of its own session; stop it with ``stop_group``."""
    return subprocess.Popen([sys.executable, "-I", str(_GUARD), str(os.getpid()), *argv], stdin=subprocess.DEVNULL,
                            stdout=stdout, stderr=subprocess.STDOUT, cwd=cwd, env=env, start_new_session=True)


def stop_group(proc: subprocess.Popen, grace_s: float = 2 * STOP_GRACE_S, *, group: int | None = None) -> None:
    """Stop a process started in a session (or process group) of its own, and everything in its
    group (``group``: the group's id when ``proc`` does not lead it): SIGTERM; once ``proc`` has
    ended, or after ``grace_s``, SIGKILL for whatever is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid if group is None else group, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass


def _guard(parent: int, argv: list[str]) -> int:
    """Run ``argv`` until it ends, this process is told to stop, or ``parent`` is gone; returns
    the exit code to leave with."""
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    tether_to_parent(done.set, parent=parent)
    sentinel = subprocess.Popen([sys.executable, "-I", str(_GUARD), "--sentinel", str(os.getpid())],
                                stdin=subprocess.DEVNULL, process_group=0)
    try:
        child = subprocess.Popen(argv, process_group=sentinel.pid)
    except OSError as exc:
        print(f"cannot start {argv[0]!r}: {exc}", flush=True)
        stop_group(sentinel, STOP_GRACE_S)
        return CANNOT_START
    threading.Thread(target=lambda: (child.wait(), done.set()), name="command", daemon=True).start()
    done.wait()
    stop_group(child, STOP_GRACE_S, group=sentinel.pid)  # also what a command that ended by itself left running
    sentinel.wait()
    code = child.wait()
    return code if code >= 0 else 128 - code


def _sentinel(guard: int) -> None:
    """Wait in the command's process group until ``guard`` is gone, then kill the group (this
    process with it). Stopped with the group otherwise."""
    tether_to_parent(lambda: os.killpg(0, signal.SIGKILL), parent=guard)
    while True:
        signal.pause()


if __name__ == "__main__":
    if sys.argv[1] == "--sentinel":
        _sentinel(int(sys.argv[2]))
    sys.exit(_guard(int(sys.argv[1]), sys.argv[2:]))
