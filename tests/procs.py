"""Helpers for tests that start real processes: a free loopback port, the CLI command, the
service, a worker, a private redis-server and the engine emulator."""

from __future__ import annotations

import socket
import sys
from paths import ROOT

# ``slaplan`` itself, run by the interpreter under test.
SLAPLAN = [sys.executable, "-m", "api.cli"]
# The model the engine emulator serves unless told otherwise.
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(folder, port: int):
    """A redis-server only its caller uses, on 127.0.0.1:``port``, without persistence, logging
    into ``folder``; returned once it answers PING (``RuntimeError`` after 10 s)."""
    import subprocess
    import time

    import redis

    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
         "--save", "", "--appendonly", "no"],
        stdin=subprocess.DEVNULL, stdout=(folder / "redis.log").open("a"), stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            redis.Redis(port=port, socket_connect_timeout=0.5).ping()
            return proc
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"redis-server did not start:\n{(folder / 'redis.log').read_text()}")


def wait_ready(proc, url: str, log_path, timeout_s: float = 30.0, *, verify=True) -> None:
    """Wait until ``url`` answers 200 (e.g. ``…/readyz``); stop ``proc`` and raise with its log if not.
    ``verify``: httpx's (an ``ssl.SSLContext`` trusting a self-signed server)."""
    import time

    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(log_path.read_text())
        try:
            if httpx.get(url, timeout=1, verify=verify).status_code == 200:
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


def start_serve(workdir, env_extra: dict[str, str] | None = None, *, worker: bool = False, host: str | None = None,
                tls: tuple | None = None, args: tuple[str, ...] = (), ready_s: float = 30.0):
    """``slaplan serve`` in ``workdir`` with no ``SLAPLAN_*`` variables but ``env_extra``, listening
    on ``host`` (default: serve's own), serving HTTPS with ``tls`` (certificate file, key file), and
    with ``worker`` a ``slaplan worker`` for the plan queue beside it (``args``: more of serve's arguments; ``ready_s``: how long it may take to answer); ``workdir`` is their data
    directory (the default database is ``workdir/slaplan/slaplan.db``). Returns (base URL on
    127.0.0.1, processes)."""
    import os
    import ssl
    import subprocess
    import uuid
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if not k.startswith("SLAPLAN_")}
    env.update(PYTHONPATH=str(ROOT), XDG_DATA_HOME=str(workdir), **(env_extra or {}))
    port = free_port()
    log = workdir / "serve.log"
    tls_args = ["--tls-cert-file", str(tls[0]), "--tls-private-key-file", str(tls[1])] if tls else []
    procs = [subprocess.Popen(
        [*SLAPLAN, "serve", "--port", str(port), "--log-level", "warning", *(["--host", host] if host else []),
         *tls_args, *args],
        cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=log.open("a"), stderr=subprocess.STDOUT,
    )]
    base = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    verify = ssl.create_default_context(cafile=str(tls[0])) if tls else True
    wait_ready(procs[0], f"{base}/readyz", log, ready_s, verify=verify)
    if worker:
        procs.append(subprocess.Popen(
            [*SLAPLAN, "worker", "--queues", "plan", "--pool", "solo", "--loglevel", "WARNING",
             "--hostname", f"test-{uuid.uuid4().hex[:6]}@%h"],
            cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=(workdir / "worker.log").open("a"),
            stderr=subprocess.STDOUT,
        ))
    return base, procs


def start_worker(cwd, env: dict, *, name: str = "test"):
    """A ``slaplan worker`` process on the ``plan`` and ``bench`` queues (one task at a time),
    logging to ``cwd/worker.log``; stop it with ``stop``."""
    import subprocess
    import uuid

    with (cwd / "worker.log").open("w") as log:
        return subprocess.Popen(
            [*SLAPLAN, "worker", "--queues", "plan,bench", "--pool", "solo", "--concurrency", "1",
             "--loglevel", "WARNING", "--hostname", f"{name}-{uuid.uuid4().hex[:6]}@%h"],
            cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)


def role_command(mode: str, speed: float = 4.0) -> str:
    """An engine command template (SLAPLAN_ONLINE_PREFILL_COMMAND and the like) starting
    ``slaplan emulate`` in ``mode`` (agg, prefill or decode), as a user's template starts a real
    engine; a prefill engine serves SGLang's bootstrap rooms on the side port too."""
    import shlex

    bootstrap = " --bootstrap-port {side_port}" if mode == "prefill" else ""
    return (f"{shlex.join(SLAPLAN)} emulate --model {{model}} --gpu {{gpu}} --backend {{backend}} --tp {{tp}} "
            f"--pp {{pp}} --dp {{dp}} --ep {{ep}} --max-batch {{max_batch}} --mode {mode} --speed {speed:g} "
            f"--served-model-name {{model}} --host {{host}} --port {{port}}{bootstrap}")


def start_emulator(*extra: str, model: str = MODEL, gpu: str = "a100_sxm"):
    """Start ``slaplan emulate`` on a free loopback port; returns (process, base URL)."""
    import subprocess
    import time
    from pathlib import Path

    import httpx

    port = free_port()
    proc = subprocess.Popen([*SLAPLAN, "emulate", "--model", model, "--gpu", gpu,
                             "--host", "127.0.0.1", "--port", str(port), *extra],
                            cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90  # a busy machine imports slowly
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"emulator exited: {proc.stderr.read().decode()}")
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("emulator did not start in 90 s")


def descendants(pid: int) -> set[int]:
    """The pids of every process below ``pid`` in the process tree (Linux: read from /proc)."""
    from pathlib import Path

    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def running(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running (a zombie, ended but not yet reaped, is not)."""
    from pathlib import Path

    out = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            out.add(pid)
    return out


def wait_ended(pids: set[int], limit_s: float = 30.0) -> set[int]:
    """Wait until none of ``pids`` runs, at most ``limit_s``; returns those still running."""
    import time

    deadline = time.monotonic() + limit_s
    while running(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return running(pids)


def command_line(pid: int) -> str:
    """The command line of process ``pid``, its arguments joined by spaces ("" once it has ended)."""
    from pathlib import Path

    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
