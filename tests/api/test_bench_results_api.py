"""A BenchmarkJob's results endpoint and genai-bench's files, over HTTP against a real server:
the stored metrics, the folder's files, and nothing outside that folder; and its dashboard page
(the runner's caveats as warnings, times in the dashboard's one format)."""

from __future__ import annotations

import json

import httpx
import pytest
from test_api_resources import _serve

from infra.settings import load_settings

pytestmark = pytest.mark.slow

JOBS = "/apis/ome.io/v1beta1/namespaces/default/benchmarkjobs"
RESULTS = [{"scenario": "D(100,20)", "concurrency": 1, "requests": 8, "errors": 0, "errorRate": 0.0,
            "ttftMs": {"mean": 80.0, "p50": 79.0, "p90": 90.0, "p99": 99.0}, "tpotMs": {"mean": 12.0}}]


def _job(name: str) -> dict:
    return {"apiVersion": "ome.io/v1beta1", "kind": "BenchmarkJob", "metadata": {"name": name},
            "spec": {"endpoint": {"endpoint": {"url": "http://127.0.0.1:9", "apiFormat": "openai"}},
                     "task": "text-to-text", "trafficScenarios": ["D(100,20)"], "numConcurrency": [1],
                     "maxTimePerIteration": 1, "maxRequestsPerIteration": 8,
                     "outputLocation": {"storageUri": "pvc://results"}}}


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    db = tmp_path_factory.mktemp("results-api") / "slaplan.db"
    url, stop = _serve(load_settings({}, database_url=f"sqlite:///{db}"))
    with httpx.Client(base_url=url, timeout=10) as client:
        yield client
    stop()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A genai-bench experiment folder, a secret beside it and a link inside it pointing out."""
    base = tmp_path_factory.mktemp("bench")
    (base / "secret.txt").write_text("not yours")
    exp = base / "run"
    (exp / "logs").mkdir(parents=True)
    (exp / "experiment_metadata.json").write_text(json.dumps({"api_model_name": "m"}))
    (exp / "D100_20_text-to-text_num_concurrency_1_time_3s.json").write_text('{"aggregated_metrics": {}}')
    (exp / "run_summary.xlsx").write_bytes(b"PK\x03\x04 a workbook")
    (exp / "logs" / "genai-bench.console.log").write_text("done\n")
    (exp / "escape.txt").symlink_to(base / "secret.txt")
    return exp


def _completed(api, name: str, location: str) -> None:
    assert api.post(JOBS, json=_job(name)).status_code == 201
    status = {"status": {"state": "Completed", "results": RESULTS, "resultsLocation": location}}
    r = api.patch(f"{JOBS}/{name}/status", content=json.dumps(status),
                  headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text


def test_results_and_files_of_a_measured_job(api, folder):
    _completed(api, "done", str(folder))
    body = api.get(f"{JOBS}/done/results").json()
    assert body["kind"] == "BenchmarkJobResults" and body["state"] == "Completed"
    assert body["results"] == RESULTS and body["resultsLocation"] == str(folder)
    paths = [f["path"] for f in body["files"]]
    assert paths == ["D100_20_text-to-text_num_concurrency_1_time_3s.json", "experiment_metadata.json",
                     "logs/genai-bench.console.log", "run_summary.xlsx"]  # the link out is not listed
    book = next(f for f in body["files"] if f["path"] == "run_summary.xlsx")
    got = api.get(book["url"])
    assert got.status_code == 200 and got.content == b"PK\x03\x04 a workbook" and book["bytes"] == len(got.content)
    assert api.get(f"{JOBS}/done/results/files/logs/genai-bench.console.log").text == "done\n"


@pytest.fixture(scope="module")
def guarded(api, folder) -> str:
    _completed(api, "guarded", str(folder))
    return "guarded"


@pytest.mark.parametrize("path", ["../secret.txt", "%2e%2e/secret.txt", "logs/../../secret.txt", "escape.txt",
                                  "/etc/passwd", "logs", "nope.json"])
def test_nothing_outside_the_folder_is_served(api, guarded, path):
    r = api.get(f"{JOBS}/{guarded}/results/files/{path}")
    assert r.status_code == 404 and "not yours" not in r.text
    assert r.json()["kind"] == "Status" and r.json()["reason"] == "NotFound"


def test_a_status_pointing_elsewhere_exposes_no_files(api, folder):
    _completed(api, "elsewhere", str(folder.parent))  # not a genai-bench folder
    assert api.get(f"{JOBS}/elsewhere/results").json()["files"] == []
    r = api.get(f"{JOBS}/elsewhere/results/files/secret.txt")
    assert r.status_code == 404 and "no local genai-bench folder" in r.json()["message"]


def test_missing_job_or_results_is_a_404_status(api):
    r = api.get(f"{JOBS}/absent/results")
    assert r.status_code == 404 and r.json()["message"] == 'benchmarkjobs.ome.io "absent" not found'
    assert api.post(JOBS, json=_job("waiting")).status_code == 201
    r = api.get(f"{JOBS}/waiting/results")
    assert r.status_code == 404 and r.json()["kind"] == "Status"
    assert "has no results: not measured yet (state Pending)" in r.json()["message"]
    assert api.get("/apis/ome.io/v9/namespaces/default/benchmarkjobs/waiting/results").status_code == 404


BYTES_AND_PLACEHOLDER = (
    "1 of 1 iteration(s) measured in 12 s; results in bench-results/cautioned; tokenizer: offline and org/m is not "
    "in the local Hugging Face cache, so slaplan's own byte-level tokenizer was used (one token per UTF-8 byte): "
    "prompt and output lengths are counted in bytes, not in the model's tokens; give a tokenizer directory to "
    "measure in real tokens; no API key configured: sent a placeholder key")


def _page(api, name: str, status: dict) -> str:
    assert api.post(JOBS, json=_job(name)).status_code == 201
    r = api.patch(f"{JOBS}/{name}/status", content=json.dumps({"status": status}),
                  headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    got = api.get(f"/ui/benchmarkjob/default/{name}")
    assert got.status_code == 200
    return got.text


def test_the_page_warns_of_the_runners_caveats(api):
    status = {"state": "Completed", "results": RESULTS, "details": BYTES_AND_PLACEHOLDER,
              "startTime": "2025-01-01T00:00:00Z", "completionTime": "2025-01-01T00:00:12Z"}
    html = _page(api, "cautioned", status)
    warnings = html[html.index('id="warnings"'):]
    warnings = warnings[:warnings.index("</section>")]
    assert warnings.count("<li>") == 2
    assert "Lengths were counted in bytes" in warnings and "placeholder key was sent" in warnings
    assert '<time datetime="2025-01-01T00:00:12Z">2025-01-01 00:00:12 UTC</time>' in html


def test_the_page_of_a_job_without_caveats_has_no_warnings(api):
    details = "1 of 1 iteration(s) measured in 12 s; tokenizer: org/m from the Hugging Face Hub"
    html = _page(api, "plain", {"state": "Completed", "results": RESULTS, "details": details})
    assert 'id="warnings"' not in html and "Warnings" not in html
