"""What a client can store or send that slaplan reads back by shape must never be a 500.

Any client may write a DGDR's or BenchmarkJob's status subresource (workers normally do), so the
dashboard must render any JSON there (a part of the wrong type reads as absent), and the manifests
endpoint must say when the stored DynamoGraphDeployment cannot be served. Also: the submit form
with a ``kind`` that is not a string, ``resourceVersion`` values that are not plain 64-bit numbers,
and file names the file system refuses. The app runs in process on SQLite; nothing is queued.
"""

from __future__ import annotations

import copy
import json

import pytest
from api_client import api_client, submit_form

from api.app import create_app
from infra import migrate
from infra.settings import load_settings

NS = "/apis/nvidia.com/v1alpha1/namespaces/default/dynamographdeploymentrequests"
ALL = "/apis/nvidia.com/v1alpha1/dynamographdeploymentrequests"
BNS = "/apis/ome.io/v1beta1/namespaces/default/benchmarkjobs"
MERGE = {"content-type": "application/merge-patch+json"}


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    """The API on a fresh SQLite database; nothing is enqueued, 500s come back as responses."""
    settings = load_settings({}, database_url=f"sqlite:///{tmp_path_factory.mktemp('bad-shapes') / 'slaplan.db'}")
    migrate.upgrade(settings)
    app = create_app(settings)
    app.state.enqueue = lambda _kind, _uid: None
    yield api_client(app, raise_server_exceptions=False)
    app.state.engine.dispose()


def dgdr(name: str) -> dict:
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeploymentRequest", "metadata": {"name": name},
            "spec": {"modelName": "Qwen/Qwen3-32B", "backend": "vllm", "gpu": {"type": "h200_sxm"},
                     "sla": {"ttft": 500, "itl": 20, "isl": 2000, "osl": 300}}}


def job(name: str) -> dict:
    return {"apiVersion": "ome.io/v1beta1", "kind": "BenchmarkJob", "metadata": {"name": name},
            "spec": {"endpoint": {"endpoint": {"url": "http://127.0.0.1:9", "apiFormat": "openai"}},
                     "task": "text-to-text", "numConcurrency": [1, 4], "maxTimePerIteration": 2,
                     "maxRequestsPerIteration": 50, "outputLocation": {"storageUri": "pvc://results"}}}


@pytest.fixture(scope="module")
def planned() -> dict:
    """The status a worker stores for ``dgdr(...)`` once planned (state Ready), as the worker makes it."""
    from planner import plan
    from planner.manifests.dynamo import render_dgd
    from planner.request import parse_dgdr
    from planner.status import dgdr_status
    from profiler.hub import load_model

    request = parse_dgdr(dgdr("planned"))
    result = plan(request, model=load_model(request.model))
    dgd = render_dgd(result.chosen, request, api_version="v1alpha1")
    return dgdr_status(result, dgd, observed_generation=1, state="Ready", now="2025-01-01T00:00:00Z")


@pytest.fixture(scope="module")
def results_doc(planned) -> dict:
    """The planned results document, with an online search's section as a worker writes it."""
    doc = json.loads(planned["profilingResults"])
    doc["online"] = {
        "study": "dgdr-u1-1", "target": "local", "budget": {"maxTrials": 8, "maxWallTimeMinutes": 240},
        "sweep": {"scenario": "D(2000,300)", "concurrency": [1, 4, 16]}, "trialsDone": 2,
        "stopped": "budget reached", "best": "agg tp4", "score": "output tokens/s per GPU",
        "calibration": {"unit": "agg tp4", "scale": 1.2, "fitted": ["decode_scale"], "points": 3,
                        "before": {"ttft_mdape_pct": 30.0, "tpot_mdape_pct": 20.0},
                        "after": {"ttft_mdape_pct": 3.0, "tpot_mdape_pct": 2.0}},
        "leftOut": [],
        "trials": [{"number": 0, "unit": "agg tp4", "state": "complete", "gpus": 4, "score": 400.0, "meetsSla": True,
                    "points": [{"concurrency": 1, "ttftMs": 100.0, "itlMs": 10.0, "outputTokPerSec": 90.0}]},
                   {"number": 1, "unit": "agg tp8", "state": "fail", "gpus": 8, "error": "engine did not start"}],
    }
    return doc


def stored(api, name: str, status: dict, *, body: dict | None = None, collection: str = NS) -> None:
    """Create ``name`` (once) and merge-patch its status with ``status``, as any client may."""
    if api.get(f"{collection}/{name}").status_code == 404:
        assert api.post(collection, json=body or dgdr(name)).status_code == 201
    r = api.patch(f"{collection}/{name}/status", content=json.dumps({"status": status}), headers=MERGE)
    assert r.status_code == 200, r.text


def page(api, url: str) -> str:
    r = api.get(url)
    assert r.status_code == 200, r.text[-2000:]
    assert r.headers["content-type"].startswith("text/html")
    return r.text


def with_part(doc: dict, path: tuple, value) -> dict:
    """``doc`` with the part at ``path`` (keys and list indexes) replaced by ``value``."""
    out = copy.deepcopy(doc)
    parent = out
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return out


def assert_rejected(r, code: int, field: str) -> None:
    """A ``code`` Status whose causes name ``field``."""
    assert r.status_code == code, r.text
    body = r.json()
    assert body["kind"] == "Status" and body["code"] == code
    assert field in [c["field"] for c in (body.get("details") or {}).get("causes", [])], body


# ---------------------------------------------------------------------------- DGDR status, dashboard


def test_the_planned_status_renders_in_full(api, planned, results_doc):
    stored(api, "whole", {**planned, "profilingResults": json.dumps(results_doc)})
    html = page(api, "/ui/dgdr/default/whole")
    for part in ('id="predicted"', 'id="time-parts"', 'id="pareto-chart"', 'id="candidates"', "Manifests",
                 'id="trials"', "engine did not start", "Assumptions"):
        assert part in html, part
    assert "TTFT ≤ 500 ms · ITL ≤ 20 ms" in page(api, "/")


DEEP_JSON = '{"chosen": ' + "[" * 100_000 + "]" * 100_000 + "}"  # deeper than Python's JSON parser follows


@pytest.mark.parametrize("profiling_results", [{"chosen": [1]}, json.dumps({"chosen": 5}), {"chosen": "x"},
                                               [1, 2], "{not json", 5, DEEP_JSON])
def test_unreadable_profiling_results_show_the_page_without_them(api, planned, profiling_results):
    stored(api, "unreadable", {**planned, "profilingResults": profiling_results})
    home = page(api, "/")
    assert 'href="/ui/dgdr/default/unreadable"' in home and "TTFT ≤ 500 ms" in home  # the SLA from the spec
    html = page(api, "/ui/dgdr/default/unreadable")
    assert 'id="headline"' in html and "Service-level objective" in html
    assert 'id="predicted"' not in html and 'id="candidates"' not in html


def test_a_results_document_with_an_sla_of_the_wrong_type_reads_the_sla_from_the_spec(api, planned, results_doc):
    doc = {"sla": "x", "chosen": results_doc["chosen"]}
    stored(api, "bad-sla", {**planned, "profilingResults": json.dumps(doc)})
    assert "TTFT ≤ 500 ms · ITL ≤ 20 ms" in page(api, "/")
    html = page(api, "/ui/dgdr/default/bad-sla")
    assert 'id="predicted"' in html and "4 × h200_sxm" in html


# Each top-level part of the document, and each item of its lists (Pareto plans, candidate rows,
# online trials), is read on its own: one of another shape reads as absent, the rest still shows.
# Inside one part or item nothing is guessed: a chosen plan with an engine of another shape is no plan.
@pytest.mark.parametrize(("path", "value", "still_shown", "gone"), [
    (("chosen", "engines"), "x", ['id="candidates"', 'id="pareto-chart"', "stored in a shape this page cannot read"],
     ['id="predicted"', "No configuration meets the SLA"]),
    (("chosen", "engines", 0), [1], ['id="candidates"'], ['id="predicted"']),
    (("chosen", "engines", 0, "tp"), "x", ['id="candidates"'], ['id="predicted"', "<td>TP1</td>"]),
    (("chosen", "predicted"), "x", ['id="candidates"', 'id="trials"'], ['id="predicted"', 'id="time-parts"']),
    (("chosen", "predicted", "ttftMs"), "fast", ['id="candidates"'], ['id="predicted"']),
    (("pareto",), "x", ['id="predicted"', 'id="candidates"'], ['data-series="Pareto front"']),
    (("pareto", 0), 7, ['id="pareto-chart"'], []),
    (("candidates",), [1, "a", None], ['id="predicted"', "on the Pareto front"], []),
    (("candidates", "rows", 0), "x", ['id="candidates"', 'id="predicted"'], []),
    (("candidates", "rows", 0, 1), "x", ['id="candidates"'], []),
    (("candidates", "columns"), ["mode", 5], ['id="predicted"', "on the Pareto front"], []),
    (("online",), "x", ['id="predicted"', 'id="candidates"'], ['id="trials"']),
    (("online", "trials"), "x", ['id="predicted"'], ['id="trials"']),
    (("online", "trials", 0, "points"), [{"concurrency": "one"}], ['id="trials"', "engine did not start"], ["400 tok/s/GPU"]),
    (("online", "trials", 1, "state"), "exploded", ['id="trials"', "400 tok/s/GPU"], ["engine did not start"]),
    (("online", "budget"), [8], ['id="predicted"', 'id="candidates"'], ['id="trials"']),
    (("online", "calibration", "scale"), None, ['id="predicted"'], ['id="trials"', "times ×"]),
    (("sla", "itlMs"), "x", ['id="predicted"'], ["SLA region"]),
    (("assumptions",), {"a": 1}, ['id="predicted"'], ["Assumptions"]),
    (("assumptions", 0), 5, ['id="predicted"', "Assumptions"], []),
])
def test_a_part_of_the_wrong_type_renders_as_absent(api, planned, results_doc, path, value, still_shown, gone):
    doc = with_part(results_doc, path, value)
    stored(api, "bad-part", {**planned, "profilingResults": json.dumps(doc)})
    page(api, "/")
    html = page(api, "/ui/dgdr/default/bad-part")
    for part in still_shown:
        assert part in html, part
    for part in gone:
        assert part not in html, part
    for target in ("dynamo", "ome", "kthena", "kubeai"):
        assert api.get(f"/ui/dgdr/default/bad-part/manifests/{target}").status_code in (200, 404)


def _paths(value, prefix: tuple = ()):
    """Every part of ``value`` (the first item of each list only: the rest are alike)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list) and value:
        yield (*prefix, 0)
        yield from _paths(value[0], (*prefix, 0))


def _other_type(value):
    return 5 if isinstance(value, str) else [1, "a", None] if not isinstance(value, list) else {"a": "x"}


@pytest.mark.slow
def test_every_part_of_the_results_document_may_have_another_type(api, planned, results_doc):
    small = {**results_doc, "pareto": results_doc["pareto"][:2],
             "candidates": {**results_doc["candidates"], "rows": results_doc["candidates"]["rows"][:2]}}
    failures = []
    for path in _paths(small):
        original = small
        for key in path:
            original = original[key]
        status = {**planned, "profilingResults": json.dumps(with_part(small, path, _other_type(original)))}
        stored(api, "every-part", status)
        for url in ("/", "/ui/dgdr/default/every-part", "/ui/dgdr/default/every-part?feasible=1",
                    "/ui/dgdr/default/every-part/manifests/kubeai"):
            code = api.get(url).status_code
            if code not in (200, 404):
                failures.append((path, url, code))
    assert not failures


@pytest.mark.parametrize("conditions", [
    [{"type": "Profiling", "status": "True", "reason": "Done", "message": "", "lastTransitionTime": "now",
      "observedGeneration": 1, "extra": [1]}],
    [],
])
def test_conditions_render_as_stored(api, planned, conditions):
    stored(api, "conditions", {**planned, "conditions": conditions})
    assert page(api, "/ui/dgdr/default/conditions")


def test_a_condition_of_another_shape_is_left_out_and_the_others_shown(api, planned):
    odd = {"type": "Profiling", "status": "Maybe", "reason": "Odd", "message": "not shown", "lastTransitionTime": "now"}
    stored(api, "odd-condition", {**planned, "conditions": [odd, *planned["conditions"][1:]]})
    html = page(api, "/ui/dgdr/default/odd-condition")
    assert "not shown" not in html and "Deployment generated" in html and "Request validated" not in html


def test_a_backend_of_another_type_in_the_status_reads_from_the_spec(api, planned):
    stored(api, "odd-backend", {**planned, "backend": {"name": "vllm"}})
    html = page(api, "/ui/dgdr/default/odd-backend")
    assert "<dd>vllm</dd>" in html
    assert page(api, "/?q=vllm")


# ------------------------------------------------------------------------------- manifests endpoint


@pytest.mark.parametrize("generated", ["oops", [1, 2], {"apiVersion": 5}, {"apiVersion": "nvidia.com/v1alpha1"}])
def test_a_malformed_generated_deployment_is_409_not_500(api, planned, generated):
    stored(api, "bad-dgd", {**planned, "generatedDeployment": generated})
    r = api.get(NS + "/bad-dgd/manifests", params={"target": "dynamo"})
    assert r.status_code == 409, r.text
    body = r.json()
    assert body["kind"] == "Status" and body["reason"] == "Conflict"
    assert "status.generatedDeployment" in body["message"] and "cannot be rendered" in body["message"]
    # What can be rendered still is: the plan again, for another version of Dynamo or another target.
    again = api.get(NS + "/bad-dgd/manifests", params={"target": "dynamo", "dynamoVersion": "v1alpha1"})
    assert again.status_code == 200 and again.json()["items"][0]["kind"] == "DynamoGraphDeployment"
    assert api.get(NS + "/bad-dgd/manifests", params={"target": "ome"}).status_code == 200
    assert page(api, "/ui/dgdr/default/bad-dgd")


def test_a_well_formed_generated_deployment_is_served_as_stored(api, planned):
    stored(api, "good-dgd", planned)
    r = api.get(NS + "/good-dgd/manifests", params={"target": "dynamo"})
    assert r.status_code == 200 and r.json()["items"] == [planned["generatedDeployment"]]


def test_an_unknown_kthena_group_is_400_naming_the_field_as_the_cli_names_its_option(api, planned):
    stored(api, "group", planned)
    r = api.get(NS + "/group/manifests", params={"target": "kthena", "kthenaGroup": "volcano.sh"})
    assert r.status_code == 400
    assert r.json()["message"] == ("kthenaGroup must be one of workload.volcano.sh, workload.serving.volcano.sh, "
                                   "not 'volcano.sh'")
    served = api.get(NS + "/group/manifests", params={"target": "kthena", "kthenaGroup": "workload.serving.volcano.sh"})
    assert served.status_code == 200 and served.json()["items"][0]["apiVersion"] == "workload.serving.volcano.sh/v1alpha1"


# ------------------------------------------------------------------------------------ BenchmarkJobs


@pytest.mark.parametrize("status", [
    {"details": "x"},
    {"details": {"results": "x", "sla": "fast", "reports": 5}},
    {"details": json.dumps({"results": [1, "a", None, {"concurrency": "x"}, {"concurrency": 4, "ttftMs": [1]}]})},
    {"results": [1, "a", None]},
    {"results": {"a": 1}, "metrics": [[]]},
    {"details": {"scenarios": {"D(1,1)": [{"concurrency": 1, "ttftMs": {"mean": "x"}, "itlMs": {"p99": 2}}]}}},
    {"details": {"aggregated_metrics": {"num_concurrency": 1, "stats": "x"}}},
    {"state": "Completed", "startTime": [1], "failureMessage": {"a": 1}, "resultsLocation": 5},
    {"state": "Failed", "failureMessage": ["x"]},
    {"details": "[" * 100_000 + "]" * 100_000},
    {"resultsLocation": "/" + "a" * 5000},
    {"resultsLocation": "/tmp/x\u0000y"},
])
def test_benchmarkjob_statuses_of_any_shape_render(api, status):
    stored(api, "odd-job", status, body=job("odd-job"), collection=BNS)
    assert 'href="/ui/benchmarkjob/default/odd-job"' in page(api, "/")
    assert 'id="headline"' in page(api, "/ui/benchmarkjob/default/odd-job")
    assert api.get(BNS + "/odd-job/results").status_code in (200, 404)
    assert api.get(BNS + "/odd-job/results/files/x.json").status_code == 404


def test_result_file_names_the_file_system_refuses_are_404(api, tmp_path):
    folder = tmp_path / "experiment"
    folder.mkdir()
    (folder / "experiment_metadata.json").write_text("{}")
    stored(api, "files-job", {"state": "Completed", "results": [{"concurrency": 1, "ttftMs": 5.0}],
                              "resultsLocation": str(folder)}, body=job("files-job"), collection=BNS)
    files = BNS + "/files-job/results/files"
    assert api.get(files + "/experiment_metadata.json").status_code == 200
    for name in ("a" * 5000, "a" * 300 + ".json", "d/" + "b" * 300):
        r = api.get(f"{files}/{name}")
        assert r.status_code == 404 and r.json()["kind"] == "Status", r.text
    assert 'id="report-files"' in page(api, "/ui/benchmarkjob/default/files-job")


def test_a_results_location_the_file_system_refuses_has_no_results_files(api):
    stored(api, "far-job", {"state": "Completed", "results": [{"concurrency": 1}], "resultsLocation": "/" + "a" * 5000},
           body=job("far-job"), collection=BNS)
    r = api.get(BNS + "/far-job/results")
    assert r.status_code == 200 and r.json()["files"] == []
    assert api.get(BNS + "/far-job/results/files/x").status_code == 404


# ------------------------------------------------------------------------------------- static files


@pytest.mark.parametrize("name", ["a" * 300 + ".css", "x%00.css", "..%2Fhtml.py", "dashboard.py",
                                  "missing.js", "%EF%BC%8E.css"])
def test_static_names_that_are_not_the_dashboards_files_are_404(api, name):
    assert api.get(f"/ui/static/{name}").status_code == 404


def test_the_dashboards_static_files_are_served(api):
    css = api.get("/ui/static/dashboard.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css") and css.text
    assert api.get("/ui/static/dashboard.js").headers["content-type"].startswith("text/javascript")


# ----------------------------------------------------------------------------------- the submit form


@pytest.mark.parametrize(("manifest", "field"), [
    ("apiVersion: nvidia.com/v1alpha1\nkind: [a]\nmetadata: {name: x}\nspec: {}\n", "kind"),
    ("apiVersion: nvidia.com/v1alpha1\nkind: {a: 1}\nmetadata: {name: x}\nspec: {}\n", "kind"),
    ("apiVersion: nvidia.com/v1alpha1\nkind: 5\nmetadata: {name: x}\nspec: {}\n", "kind"),
    ("apiVersion: [nvidia.com/v1alpha1]\nkind: DynamoGraphDeploymentRequest\nmetadata: {name: x}\n", "apiVersion"),
    ("apiVersion: {a: 1}\nkind: BenchmarkJob\nmetadata: {name: x}\n", "apiVersion"),
])
def test_submit_with_kind_or_api_version_of_another_type_is_refused_naming_it(api, manifest, field):
    r = submit_form(api, manifest.encode())
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["accepted"] is False and body["code"] == 422
    assert [c["field"] for c in body["causes"]] == [field]
    assert body["causes"][0]["line"] == (2 if field == "kind" else 1)


@pytest.mark.parametrize("manifest", ["[" * 100_000, "a: " + "[" * 5000 + "]" * 5000, "a: " + "{b: " * 3000 + "1" + "}" * 3000])
def test_submit_nested_deeper_than_the_parser_follows_is_refused(api, manifest):
    r = submit_form(api, manifest.encode())
    assert r.status_code == 200, r.text
    assert r.json()["accepted"] is False and r.json()["code"] == 400


# ---------------------------------------------------------------------------------- resourceVersion


BAD_VERSIONS = ["9223372036854775808", "99999999999999999999", "1" * 5000, " 1", "1 ", "１", "1_0", "+1", "-1", "0x1",
                "yesterday"]


@pytest.mark.parametrize("version", BAD_VERSIONS)
@pytest.mark.parametrize("url", [ALL, NS])
def test_a_watch_from_a_resource_version_that_is_not_a_64_bit_number_is_400(api, url, version):
    r = api.get(url, params={"watch": "true", "resourceVersion": version, "timeoutSeconds": "1"})
    assert_rejected(r, 400, "resourceVersion")
    assert "resourceVersion" in r.json()["message"]


@pytest.mark.parametrize("version", BAD_VERSIONS)
def test_a_list_at_a_resource_version_that_is_not_a_64_bit_number_is_400(api, version):
    assert_rejected(api.get(NS, params={"resourceVersion": version}), 400, "resourceVersion")


def test_watch_and_list_take_plain_decimal_versions(api):
    stored(api, "watched", {"state": "Pending"})
    latest = api.get(NS).json()["metadata"]["resourceVersion"]
    for version in ("0", latest):
        assert api.get(NS, params={"resourceVersion": version}).status_code == 200
    with api.stream("GET", ALL, params={"watch": "true", "resourceVersion": "0", "timeoutSeconds": "1"}) as r:
        assert r.status_code == 200
        events = [json.loads(line) for line in r.iter_lines() if line]
    assert any(e["object"]["metadata"]["name"] == "watched" for e in events if e["type"] == "ADDED")
    # The largest 64-bit version parses, but the server has not reached it: kube-apiserver's answer,
    # a 504 whose cause client-go's reflectors recognise, for lists and watches alike, without waiting.
    for params in ({}, {"watch": "true", "timeoutSeconds": "1"}):
        too_large = api.get(ALL if params else NS, params={**params, "resourceVersion": "9223372036854775807"})
        assert too_large.status_code == 504
        assert too_large.json()["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


@pytest.mark.parametrize("spelled", [" {v}", "{v} ", "+{v}", "0{v}_0", "{wide}"])
def test_a_body_resource_version_is_only_plain_digits(api, spelled):
    created = api.post(NS, json=dgdr("versioned")).json() if api.get(NS + "/versioned").status_code == 404 \
        else api.get(NS + "/versioned").json()
    version = created["metadata"]["resourceVersion"]
    wide = "".join(chr(ord(d) - ord("0") + ord("０")) for d in version)  # fullwidth digits
    given = spelled.format(v=version, wide=wide)
    r = api.put(NS + "/versioned/status", json={"metadata": {"resourceVersion": given}, "status": {"state": "Pending"}})
    assert r.status_code == 409 and r.json()["reason"] == "Conflict", r.text
    assert api.get(NS + "/versioned").json()["metadata"]["resourceVersion"] == version
    exact = api.put(NS + "/versioned/status", json={"metadata": {"resourceVersion": version}, "status": {"state": "Pending"}})
    assert exact.status_code == 200, exact.text


@pytest.mark.parametrize("version", ["9223372036854775808", "99999999999999999999"])
def test_a_body_resource_version_beyond_64_bits_is_a_conflict(api, version):
    stored(api, "huge-version", {"state": "Pending"})
    r = api.put(NS + "/huge-version/status", json={"metadata": {"resourceVersion": version}, "status": {"state": "Pending"}})
    assert r.status_code == 409 and r.json()["reason"] == "Conflict", r.text
