"""A BenchmarkJob's results: the stored metrics per (scenario, concurrency), and genai-bench's
own files (its JSON per iteration, Excel summary, plots and logs) from the job's folder.

``GET …/benchmarkjobs/{name}/results`` answers ``BenchmarkJobResults``; ``GET
…/benchmarkjobs/{name}/results/files/{path}`` serves one file. 404 ``Status`` when the job, its
results or the file do not exist (yet).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import FileResponse

from api.deps import SessionDep
from api.errors import ApiError
from api.kinds import BENCHMARKJOB
from api.routes.resources import load_resource
from api.report_files import files_url, inside, report_files, results_folder

router = APIRouter(tags=["benchmark results"])

TEXT_SUFFIXES = (".log", ".txt", ".out")
JOB = f"/apis/{BENCHMARKJOB.group}/{{version}}/namespaces/{{namespace}}/{BENCHMARKJOB.plural}/{{name}}"


def _no_results(name: str, why: str) -> ApiError:
    return ApiError(404, f'{BENCHMARKJOB.plural}.{BENCHMARKJOB.group} "{name}" has no results: {why}',
                    details={"name": name, "group": BENCHMARKJOB.group, "kind": BENCHMARKJOB.plural})


@router.get(JOB + "/results", summary="Measured metrics of a BenchmarkJob, and genai-bench's files")
def results(version: str, namespace: str, name: str, session: SessionDep) -> dict[str, Any]:
    job = load_resource(session, BENCHMARKJOB.group, version, BENCHMARKJOB.plural, namespace, name)
    status = job.status
    measured = status.get("results")
    if not isinstance(measured, list) or not measured:
        raise _no_results(name, f"not measured yet (state {status.get('state') or 'Pending'})")
    folder = results_folder(status)
    url = files_url(version, namespace, name)
    files = [{"path": rel, "bytes": size, "url": f"{url}/{rel}"} for rel, size in report_files(folder)] if folder else []
    return {
        "apiVersion": f"{BENCHMARKJOB.group}/{version}", "kind": "BenchmarkJobResults",
        "metadata": {"name": name, "namespace": namespace},
        "state": status.get("state"), "resultsLocation": status.get("resultsLocation"),
        "results": measured, "files": files,
    }


@router.get(JOB + "/results/files/{path:path}", summary="One of genai-bench's result files of a BenchmarkJob")
def result_file(version: str, namespace: str, name: str, path: str, session: SessionDep) -> FileResponse:
    job = load_resource(session, BENCHMARKJOB.group, version, BENCHMARKJOB.plural, namespace, name)
    folder = results_folder(job.status)
    if folder is None:
        raise _no_results(name, "no local genai-bench folder")
    found = inside(folder, path)
    if found is None:
        raise ApiError(404, f'{BENCHMARKJOB.plural}.{BENCHMARKJOB.group} "{name}" has no result file {path!r}',
                       details={"name": name, "group": BENCHMARKJOB.group, "kind": BENCHMARKJOB.plural})
    text = found.suffix in TEXT_SUFFIXES  # genai-bench's logs: readable in the browser
    return FileResponse(found, filename=found.name, content_disposition_type="inline",
                        media_type="text/plain; charset=utf-8" if text else None)
