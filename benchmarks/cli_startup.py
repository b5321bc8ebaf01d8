"""CLI start-up: median wall (and CPU) time of ``python -c pass``, ``slaplan --help`` and
``slaplan plan`` on an example, run in turn so that a change in the machine's load falls on
every command alike.

Target (issue: start-up): ``slaplan plan examples/llama-70b-h200.dgdr.yaml`` ≤ 0.25 s median
wall on the 2-core development machine, and ≥ 30× faster than AIConfigurator's CLI on the same
request (``--compare``, run in its own environment). Run from the repository root::

    .venv/bin/python benchmarks/cli_startup.py [--runs 15] [--with-database] [--compare "CMD ARG…"]

slaplan runs from this checkout (``api.cli.program``, as the installed script does) in
a fresh data directory (``XDG_DATA_HOME``): no database, as on a new machine; ``--with-database``
adds a row that reads an empty, migrated one (``--db``). Bytecode caches are written by a warm-up
run (as an installed package has them), even when PYTHONDONTWRITEBYTECODE is set. A heavy command
in the rotation (``--compare``, ``--with-database``) leaves the caches colder for the next one:
compare rows of one run, not numbers of runs with different rows.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "llama-70b-h200.dgdr.yaml"
SLAPLAN = [sys.executable, "-c", "from api.cli import program; program()"]


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s of user and system) of one run of ``argv``, which must succeed (its error
    output is shown only when it fails)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{shlex.join(argv)} exited with {done.returncode}:\n{done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def commands(work: Path, database: Path | None, compare: list[str] | None) -> dict[str, list[str]]:
    """Label → command line of every row."""
    out = str(work / "out")
    rows = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "slaplan --help": [*SLAPLAN, "--help"],
        "slaplan plan (no database)": [*SLAPLAN, "plan", str(EXAMPLE), "--out", out, "--quiet"],
    }
    if database:
        rows["slaplan plan --db (empty database)"] = [*rows["slaplan plan (no database)"], "--db", str(database)]
    if compare:
        rows[f"compare: {shlex.join(compare)}"[:62]] = compare
    return rows


def measure(rows: dict[str, list[str]], env: dict[str, str], runs: int) -> dict[str, list[tuple[float, float]]]:
    """``runs`` timings of every row, one run of each in turn, after one warm-up run each."""
    for argv in rows.values():
        timed(argv, env)
    times: dict[str, list[tuple[float, float]]] = {label: [] for label in rows}
    for _ in range(runs):
        for label, argv in rows.items():
            times[label].append(timed(argv, env))
    return times


def report(times: dict[str, list[tuple[float, float]]], load: tuple[float, float]) -> str:
    """The table: median wall and CPU per row, and each wall as a multiple of ``python -c pass``'s."""
    base = statistics.median(w for w, _ in times["python -c pass"])
    plan = statistics.median(w for w, _ in times["slaplan plan (no database)"])
    lines = [f"load average {load[0]:.2f} before, {load[1]:.2f} after; {len(times['python -c pass'])} runs each",
             f"| {'command':62} | median wall | median CPU | × python -c pass | × slaplan plan |",
             f"|{'-' * 64}|-------------|------------|------------------|----------------|"]
    for label, samples in times.items():
        wall = statistics.median(w for w, _ in samples)
        cpu = statistics.median(c for _, c in samples)
        lines.append(f"| {label:62} | {wall * 1e3:8.0f} ms | {cpu * 1e3:7.0f} ms | {wall / base:16.1f} | "
                     f"{wall / plan:14.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs of each command (default 15)")
    parser.add_argument("--with-database", action="store_true", help="also plan with an empty, migrated database")
    parser.add_argument("--compare", metavar="CMD", help="another command to time alongside, e.g. AIConfigurator's "
                                                         "CLI on the same request (one string, split as a shell would)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "SLAPLAN_DATABASE_URL")}
        env["XDG_DATA_HOME"] = str(work / "data")
        database = work / "slaplan.db" if args.with_database else None
        if database:
            subprocess.run([*SLAPLAN, "migrate", "--db", str(database)], cwd=ROOT, env=env, check=True,
                           stdout=subprocess.DEVNULL)
        rows = commands(work, database, shlex.split(args.compare) if args.compare else None)
        first = os.getloadavg()[0]
        times = measure(rows, env, args.runs)
        print(report(times, (first, os.getloadavg()[0])))


if __name__ == "__main__":
    main()
