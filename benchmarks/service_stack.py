"""The service under measurement, for the service benchmarks: `slaplan serve` embedded (SQLite,
in-process queue and worker), or `slaplan serve` (API only) with `slaplan worker`s on a fresh
PostgreSQL database and a redis-server started here on a free port (never the machine's own).

Used by service_load.py and service_faults.py (run as scripts: this folder is on sys.path)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
DGDR_FILE = ROOT / "examples" / "llama-70b-h200.dgdr.yaml"
PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"
# Workers sharing the API's machine run this much nicer, as the embedded stack's plan processes do
# (workers.plan_pool): the API's requests come before planning.
WORKER_NICENESS = 10


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(done, timeout_s: float, what: str) -> float:
    """Poll ``done`` until true; seconds it took."""
    started = time.monotonic()
    while not done():
        if time.monotonic() - started > timeout_s:
            raise SystemExit(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(0.05)
    return time.monotonic() - started


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 20 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def start_redis(folder: Path, port: int) -> subprocess.Popen:
    """A redis-server on ``port`` without persistence, logging into ``folder``."""
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
                             "--save", "", "--appendonly", "no"],
                            stdout=(folder / "redis.log").open("a"), stderr=subprocess.STDOUT)
    wait_for(lambda: _redis_answers(port), 10, "redis-server")
    return proc


def _redis_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def clean_env(folder: Path) -> dict[str, str]:
    """This environment without ``SLAPLAN_*`` settings, the repository importable, data in ``folder``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLAPLAN_")}
    return {**env, "PYTHONPATH": str(ROOT), "XDG_DATA_HOME": str(folder)}


def spawn(folder: Path, env: dict[str, str], log: str, *args: str, niceness: int = 0) -> subprocess.Popen:
    """``slaplan ARGS`` in ``folder`` (``niceness`` added to its nice value), its output appended to
    ``folder/LOG.log``."""
    return subprocess.Popen([sys.executable, "-m", "api.cli", *args], cwd=folder, env=env,
                            stdin=subprocess.DEVNULL, stdout=(folder / f"{log}.log").open("a"),
                            stderr=subprocess.STDOUT, preexec_fn=(lambda: os.nice(niceness)) if niceness else None)


def start_serve(folder: Path, port: int, extra: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    """``slaplan serve`` on ``port`` (``extra``: more of its arguments; ``env``: default the embedded
    one), once its /readyz answers 200."""
    proc = spawn(folder, env or clean_env(folder), "serve", "serve", "--port", str(port), "--log-level", "warning",
                 *extra)

    def ready() -> bool:
        if proc.poll() is not None:
            raise SystemExit("slaplan serve exited:\n" + (folder / "serve.log").read_text())
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    wait_for(ready, 90, "slaplan serve")
    return proc


def cpu_seconds(pids: list[int]) -> float:
    """CPU time (user + system, s) the processes ``pids`` and their children have used so far
    (Linux /proc; 0 for a process that is gone)."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)  # ppid, cpu
    wanted = set(pids) | {pid for pid, (ppid, _cpu) in stats.items() if ppid in pids}
    return sum(cpu for pid, (_ppid, cpu) in stats.items() if pid in wanted)


def load_average() -> str:
    """The 1-minute load average, as ``uptime`` shows it."""
    return f"{os.getloadavg()[0]:.1f}"


class Stack:
    """The processes of one service; ``base`` is its URL. ``postgres``: PostgreSQL and a private
    Redis with ``workers`` worker processes; else the embedded default."""

    def __init__(self, folder: Path, *, postgres: bool, workers: int = 2, pg_admin: str = PG_ADMIN,
                 serve_args: tuple[str, ...] = ()):
        self.folder, self.pg_admin = folder, pg_admin
        self.db = self.redis = None
        self.workers: list[subprocess.Popen] = []
        self.env = clean_env(folder)
        if postgres:
            import psycopg

            self.db = f"slaplan_bench_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(pg_admin, autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{self.db}"')
            self.redis_port = free_port()
            self.redis = start_redis(folder, self.redis_port)
            self.env.update(SLAPLAN_BROKER_URL=f"redis://127.0.0.1:{self.redis_port}/0",
                            SLAPLAN_DATABASE_URL=f"postgresql+psycopg://postgres@127.0.0.1:5432/{self.db}")
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.serve = start_serve(folder, port, list(serve_args), self.env)
        if postgres:
            self.workers = [self.start_worker() for _ in range(workers)]

    def start_worker(self) -> subprocess.Popen:
        return spawn(self.folder, self.env, "worker", "worker", "--queues", "plan", "--pool", "solo", "--loglevel", "WARNING",
                     "--hostname", f"bench-{uuid.uuid4().hex[:6]}@%h", niceness=WORKER_NICENESS)

    def cpu_seconds(self) -> float:
        """CPU time (s) the service's processes (serve, its plan processes, the workers) have used."""
        return cpu_seconds([self.serve.pid, *(w.pid for w in self.workers)])

    def rows(self) -> list[tuple]:
        """(name, state, lease owner, publish due) of every DGDR (PostgreSQL only)."""
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 user=postgres dbname={self.db}") as db:
            return db.execute("SELECT name, status->>'state', lease_owner, publish_due_at FROM slaplan_resources").fetchall()

    def close(self) -> None:
        for proc in [self.serve, *self.workers, *([self.redis] if self.redis else [])]:
            stop(proc)
        if self.db:
            import psycopg

            with psycopg.connect(self.pg_admin, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
