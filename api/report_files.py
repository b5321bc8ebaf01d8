"""genai-bench's own result files of a BenchmarkJob: listed and served from the job's local
results folder (``status.resultsLocation``), never from anywhere else.

A folder is served only when it is a genai-bench experiment folder (it holds
``experiment_metadata.json``), so a status pointing elsewhere exposes nothing; a file is served
only when its resolved path (links followed) lies inside that folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from api.kinds import BENCHMARKJOB
from profiler.bench.results import METADATA_FILE

MAX_FILES = 500


def files_url(version: str, namespace: str, name: str) -> str:
    """Where the API serves a job's files (append ``/<relative path>``)."""
    return f"/apis/{BENCHMARKJOB.group}/{version}/namespaces/{namespace}/{BENCHMARKJOB.plural}/{name}/results/files"


def results_folder(status: dict[str, Any]) -> Path | None:
    """The job's local genai-bench folder, or None (not run, remote, not a genai-bench folder, or a
    ``resultsLocation`` that is no usable path: too long for the file system, or holding a NUL)."""
    where = status.get("resultsLocation")
    if not isinstance(where, str) or not where.startswith("/"):
        return None
    try:
        folder = Path(where).resolve()
        return folder if (folder / METADATA_FILE).is_file() else None
    except (OSError, ValueError):
        return None


def report_files(folder: Path) -> list[tuple[str, int]]:
    """(path relative to ``folder``, size in bytes) of every regular file inside it, sorted."""
    out = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and inside(folder, rel) is not None:
            out.append((rel, path.stat().st_size))
        if len(out) >= MAX_FILES:
            break
    return out


def inside(folder: Path, rel: str) -> Path | None:
    """``folder/rel`` when it is a regular file inside ``folder`` once resolved, else None (as well
    for a name too long for the file system)."""
    if not rel or rel.startswith("/") or "\\" in rel or "\x00" in rel:
        return None
    try:
        path = (folder / rel).resolve()
        return path if path.is_relative_to(folder) and path.is_file() else None
    except OSError:
        return None
