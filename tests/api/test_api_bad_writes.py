"""Bad writes to the resource API: each gets a 4xx Kubernetes Status naming the field at fault,
and leaves the stored object exactly as it was (GET and LIST still work).

Status subresource bodies, DeleteOptions, merge patches that remove metadata or change kind or
apiVersion, BenchmarkJob fields of the wrong JSON type, and list query parameters. The app runs
in process on SQLite; nothing is queued to a worker (enqueued uids are recorded instead).
"""

from __future__ import annotations

import json

import pytest
from api_client import api_client

from api.app import create_app
from infra import migrate
from infra import resources as repo
from infra.db import session_scope
from infra.settings import load_settings

NS = "/apis/nvidia.com/v1alpha1/namespaces/default/dynamographdeploymentrequests"
NS2 = "/apis/nvidia.com/v1beta1/namespaces/default/dynamographdeploymentrequests"
BNS = "/apis/ome.io/v1beta1/namespaces/default/benchmarkjobs"
MERGE = {"content-type": "application/merge-patch+json"}
# Shaped as OME's own example BenchmarkJob (llama-3-1-70b): YAML ints, a string request parameter.
OME_EXAMPLE = """\
apiVersion: ome.io/v1beta1
kind: BenchmarkJob
metadata:
  name: llama-3-1-70b-benchmark
  namespace: llama-3-1-70b
spec:
  podOverride:
    image: "ghcr.io/sgl-project/genai-bench:0.1.132"
  huggingFaceSecretReference:
    name: huggingface-secret
  endpoint:
    inferenceService:
      name: llama-3-1-70b-instruct
      namespace: llama-3-1-70b-instruct
  task: text-to-text
  trafficScenarios: ["N(480,240)/(300,150)", "D(100,100)", "D(2000,200)"]
  numConcurrency: [1, 2, 4, 8, 16, 32, 64, 128, 256]
  maxTimePerIteration: 15
  maxRequestsPerIteration: 100
  additionalRequestParams:
    temperature: "0.0"
  outputLocation:
    storageUri: "oci://n/namespace/b/ome-benchmark-results/o/llama-3-1-70b-benchmark"
    parameters:
      auth: "instance_principal"
      region: "eu-frankfurt-1"
"""


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    settings = load_settings({}, database_url=f"sqlite:///{tmp_path_factory.mktemp('bad-writes') / 'slaplan.db'}")
    migrate.upgrade(settings)
    app = create_app(settings)
    app.state.enqueued = []
    app.state.enqueue = lambda _kind, uid: app.state.enqueued.append(uid)
    yield app
    app.state.engine.dispose()


@pytest.fixture(scope="module")
def api(app):
    return api_client(app)


def dgdr(name: str) -> dict:
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeploymentRequest",
            "metadata": {"name": name, "labels": {"team": "a"}, "annotations": {"note": "kept"}},
            "spec": {"modelName": "Qwen/Qwen3-32B", "backend": "vllm", "sla": {"ttft": 500, "itl": 20},
                     "gpu": {"type": "h200_sxm"}}}


def job(name: str, **spec) -> dict:
    return {"apiVersion": "ome.io/v1beta1", "kind": "BenchmarkJob", "metadata": {"name": name},
            "spec": {"endpoint": {"endpoint": {"url": "http://127.0.0.1:9", "apiFormat": "openai"}},
                     "task": "text-to-text", "numConcurrency": [1, 4], "maxTimePerIteration": 2,
                     "maxRequestsPerIteration": 50, "outputLocation": {"storageUri": "pvc://results"}, **spec}}


def create(api, body: dict, path: str = NS) -> dict:
    r = api.post(path, json=body)
    assert r.status_code == 201, r.text
    return r.json()


def get_or_create(api, path: str, body: dict, collection: str = NS) -> dict:
    """The object at ``path``, created from ``body`` if absent (shared by a test's parameters)."""
    found = api.get(path)
    return found.json() if found.status_code == 200 else create(api, body, collection)


def send(api, method: str, path: str, body, headers: dict | None = None):
    """``body`` as JSON, sent as it is (no client-side checks)."""
    return api.request(method, path, content=json.dumps(body), headers=headers or {"content-type": "application/json"})


def assert_rejected(r, code: int, field: str) -> None:
    """A ``code`` Status whose message or causes name ``field``."""
    assert r.status_code == code, r.text
    body = r.json()
    assert body["kind"] == "Status" and body["code"] == code
    named = [c["field"] for c in (body.get("details") or {}).get("causes", [])]
    assert field in named or body["message"].startswith(f"{field}:"), body


def assert_unchanged(api, path: str, before: dict, collection: str = NS) -> None:
    """GET returns ``before`` exactly, and LIST still works and holds it."""
    assert api.get(path).json() == before
    listed = api.get(collection)
    assert listed.status_code == 200, listed.text
    assert before in listed.json()["items"]


# ------------------------------------------------------------------------------------------ status


@pytest.mark.parametrize(("body", "field"), [
    ({"status": "x"}, "status"),
    ({"status": [1, 2]}, "status"),
    ({"status": 5}, "status"),
    ({"status": []}, "status"),
    ({"metadata": "x"}, "metadata"),
    ({"metadata": [1]}, "metadata"),
    ({"status": {"state": ["x"]}}, "status.state"),
    ({"status": {"state": 3}}, "status.state"),
    ({"status": {"observedGeneration": "abc"}}, "status.observedGeneration"),
    ({"status": {"observedGeneration": True}}, "status.observedGeneration"),
    ({"status": {"conditions": "x"}}, "status.conditions"),
    ({"status": {"conditions": ["x"]}}, "status.conditions[0]"),
    ({"status": {"conditions": [{"type": "Profiling", "reason": "Started", "message": "",
                                 "lastTransitionTime": "2025-01-01T00:00:00Z"}]}}, "status.conditions[0].status"),
    ({"status": {"conditions": [{"type": 5, "status": "True", "reason": "Started", "message": "",
                                 "lastTransitionTime": "2025-01-01T00:00:00Z"}]}}, "status.conditions[0].type"),
])
def test_a_malformed_status_patch_is_422_naming_the_field(api, body, field):
    path = NS + "/status-patch"
    before = get_or_create(api, path, dgdr("status-patch"))
    assert_rejected(send(api, "PATCH", path + "/status", body, MERGE), 422, field)
    assert_unchanged(api, path, before)


def test_a_malformed_status_replace_is_422_naming_the_field(api):
    created = create(api, dgdr("status-put"))
    path = NS + "/status-put"
    rv = created["metadata"]["resourceVersion"]
    assert_rejected(send(api, "PUT", path + "/status", {"metadata": "x"}), 422, "metadata")
    assert_rejected(send(api, "PUT", path + "/status", {"metadata": {"resourceVersion": rv}, "status": {"state": ["x"]}}),
                    422, "status.state")
    assert_rejected(send(api, "PUT", path + "/status", {"metadata": {"resourceVersion": rv}, "status": [1]}), 422, "status")
    assert_unchanged(api, path, created)


def test_a_well_formed_status_write_is_stored_with_fields_slaplan_does_not_read(api):
    create(api, dgdr("status-ok"))
    condition = {"type": "Profiling", "status": "True", "reason": "Started", "message": "profiling",
                 "lastTransitionTime": "2025-01-01T00:00:00Z", "observedGeneration": 1}
    status = {"state": "Profiling", "observedGeneration": 1, "conditions": [condition], "profilingResults": "later"}
    r = send(api, "PATCH", NS + "/status-ok/status", {"status": status}, MERGE)
    assert r.status_code == 200, r.text
    assert api.get(NS + "/status-ok").json()["status"] == status


def test_benchmarkjob_conditions_need_only_what_omes_crd_requires(api):
    # OME's CRD requires no condition field (DGDR's require five), but a field given is typed.
    create(api, job("job-status"), BNS)
    status = {"state": "Running", "conditions": [{"type": "Running", "status": "True"}]}
    r = send(api, "PATCH", BNS + "/job-status/status", {"status": status}, MERGE)
    assert r.status_code == 200, r.text
    assert api.get(BNS + "/job-status").json()["status"]["conditions"] == status["conditions"]
    bad = {"status": {"conditions": [{"type": "Running", "status": True}]}}
    assert_rejected(send(api, "PATCH", BNS + "/job-status/status", bad, MERGE), 422, "status.conditions[0].status")


def test_a_stored_state_of_the_wrong_type_blocks_spec_changes_without_breaking_writes(app, api):
    """A state that is not a string (written before status writes were checked) freezes the spec
    with a 422 naming spec; metadata can still change."""
    created = create(api, dgdr("odd-state"))
    key = repo.ResourceKey(group="nvidia.com", plural="dynamographdeploymentrequests", namespace="default", name="odd-state")
    with session_scope(app.state.sessions) as session:
        repo.update_status(session, {"state": ["x"]}, key=key)
    before = api.get(NS + "/odd-state").json()
    assert_rejected(send(api, "PATCH", NS + "/odd-state", {"spec": {"backend": "sglang"}}, MERGE), 422, "spec")
    assert_unchanged(api, NS + "/odd-state", before)
    labelled = send(api, "PATCH", NS + "/odd-state", {"metadata": {"labels": {"team": "b"}}}, MERGE)
    assert labelled.status_code == 200 and labelled.json()["spec"] == created["spec"]


# ------------------------------------------------------------------------------------------ delete


@pytest.mark.parametrize(("options", "field"), [
    ({"preconditions": "x"}, "preconditions"),
    ({"preconditions": [1]}, "preconditions"),
    ({"preconditions": {"uid": 5}}, "preconditions.uid"),
    ({"propagationPolicy": 5}, "propagationPolicy"),
    ({"propagationPolicy": "Sometimes"}, "propagationPolicy"),
])
def test_malformed_delete_options_are_400_and_delete_nothing(api, options, field):
    path = NS + "/kept"
    before = get_or_create(api, path, dgdr("kept"))
    assert_rejected(send(api, "DELETE", path, options), 400, field)
    assert_unchanged(api, path, before)


@pytest.mark.parametrize(("method", "suffix", "body"), [
    ("DELETE", "", None),
    ("DELETE", "", {"dryRun": ["All"]}),  # DeleteOptions, as kubectl delete --dry-run=server sends it
    ("PATCH", "", {"metadata": {"labels": {"team": "b"}}}),
    ("PATCH", "/status", {"status": {"state": "Failed"}}),
])
def test_a_dry_run_is_refused_and_changes_nothing(api, method, suffix, body):
    # Carried out, a dry run would really delete or write: kubectl users expect nothing to change.
    path = NS + "/rehearsed"
    before = get_or_create(api, path, dgdr("rehearsed"))
    query = "" if body and "dryRun" in body else "?dryRun=All"
    headers = MERGE if method == "PATCH" else None
    assert_rejected(send(api, method, path + suffix + query, body or {}, headers), 400, "dryRun")
    assert_unchanged(api, path, before)


def test_a_create_cannot_set_the_resource_version(api):
    body = dgdr("versioned")
    body["metadata"]["resourceVersion"] = "7"
    assert_rejected(send(api, "POST", NS, body), 422, "metadata.resourceVersion")
    assert api.get(NS + "/versioned").status_code == 404


def test_a_dry_run_create_stores_nothing(api):
    assert_rejected(send(api, "POST", NS + "?dryRun=All", dgdr("never")), 400, "dryRun")
    assert api.get(NS + "/never").status_code == 404


def test_delete_preconditions_resource_version_must_be_a_string(api):
    created = create(api, dgdr("deleted"))
    path, rv = NS + "/deleted", created["metadata"]["resourceVersion"]
    as_number = send(api, "DELETE", path, {"preconditions": {"resourceVersion": int(rv)}})
    assert_rejected(as_number, 400, "preconditions.resourceVersion")
    assert_unchanged(api, path, created)
    gone = send(api, "DELETE", path, {"preconditions": {"resourceVersion": rv}, "propagationPolicy": "Background"})
    assert gone.status_code == 200, gone.text
    assert api.get(path).status_code == 404


# ------------------------------------------------------------------------------------------- patch


@pytest.mark.parametrize("collection", [NS, NS2], ids=["same-version", "other-version"])
@pytest.mark.parametrize("metadata", [None, "x", [1]], ids=["null", "string", "list"])
def test_a_patch_that_removes_metadata_is_422_and_changes_nothing(request, app, api, collection, metadata):
    """Through the v1beta1 path the object (stored as v1alpha1) kept its spec only if converted:
    removing metadata must not skip conversion, drop labels, bump generation or re-enqueue."""
    name = "meta-" + request.node.callspec.id
    created = create(api, dgdr(name))
    before, queued = api.get(f"{collection}/{name}").json(), list(app.state.enqueued)
    assert_rejected(send(api, "PATCH", f"{collection}/{name}", {"metadata": metadata}, MERGE), 422, "metadata")
    assert_unchanged(api, f"{collection}/{name}", before, collection)
    assert api.get(f"{NS}/{name}").json() == created and app.state.enqueued == queued


@pytest.mark.parametrize(("patch", "field"), [
    ({"kind": "BenchmarkJob"}, "kind"),
    ({"apiVersion": "ome.io/v1beta1"}, "apiVersion"),
    ({"apiVersion": "nvidia.com/v1beta1", "metadata": {"labels": {"team": "b"}}}, "apiVersion"),
])
def test_a_patch_cannot_change_kind_or_api_version(api, patch, field):
    path = NS + "/typed"
    before = get_or_create(api, path, dgdr("typed"))
    assert_rejected(send(api, "PATCH", path, patch, MERGE), 400, field)
    assert_unchanged(api, path, before)
    same = {"apiVersion": before["apiVersion"], "kind": before["kind"], "metadata": {"annotations": {"seen": "yes"}}}
    patched = send(api, "PATCH", path, same, MERGE)  # naming the object's own type is fine
    assert patched.status_code == 200 and patched.json()["metadata"]["annotations"]["seen"] == "yes"
    send(api, "PATCH", path, {"metadata": {"annotations": {"seen": None}}}, MERGE)


# ---------------------------------------------------------------------------------- benchmarkjobs


@pytest.mark.parametrize(("name", "spec", "field"), [
    ("time-string", {"maxTimePerIteration": "5"}, "spec.maxTimePerIteration"),
    ("time-bool", {"maxTimePerIteration": True}, "spec.maxTimePerIteration"),
    ("time-float", {"maxTimePerIteration": 5.0}, "spec.maxTimePerIteration"),
    ("requests-string", {"maxRequestsPerIteration": "50"}, "spec.maxRequestsPerIteration"),
    ("level-string", {"numConcurrency": ["4"]}, "spec.numConcurrency[0]"),
    ("level-bool", {"numConcurrency": [True]}, "spec.numConcurrency[0]"),
    ("levels-string", {"numConcurrency": "4"}, "spec.numConcurrency"),
    ("levels-repeated", {"numConcurrency": [1, 1]}, "spec.numConcurrency"),
    ("scenarios-repeated", {"trafficScenarios": ["D(100,20)", "D(100,20)"]}, "spec.trafficScenarios"),
    ("gpus-string", {"serviceMetadata": {"engine": "vLLM", "version": "0.10.0", "gpuType": "A10", "gpuCount": "2"}},
     "spec.serviceMetadata.gpuCount"),
    ("param-number", {"additionalRequestParams": {"temperature": 0.0}}, "spec.additionalRequestParams.temperature"),
])
def test_a_benchmarkjob_field_of_the_wrong_json_type_is_422_and_not_stored(api, name, spec, field):
    assert_rejected(api.post(BNS, json=job(name, **spec)), 422, field)
    assert api.get(f"{BNS}/{name}").status_code == 404
    assert api.get(BNS).status_code == 200


def test_a_benchmarkjob_spec_patch_of_the_wrong_type_changes_nothing(api):
    created = create(api, job("patched-job"), BNS)
    path = BNS + "/patched-job"
    assert_rejected(send(api, "PATCH", path, {"spec": {"maxTimePerIteration": "9"}}, MERGE), 422, "spec.maxTimePerIteration")
    assert_rejected(send(api, "PATCH", path, {"spec": {"numConcurrency": [4, 4]}}, MERGE), 422, "spec.numConcurrency")
    assert_unchanged(api, path, created, BNS)


def test_valid_benchmarkjobs_keep_parsing(api):
    """The upstream OME example (YAML ints, string request params) and a JSON job are accepted as sent."""
    r = api.post("/apis/ome.io/v1beta1/namespaces/llama-3-1-70b/benchmarkjobs", content=OME_EXAMPLE,
                 headers={"content-type": "application/yaml"})
    assert r.status_code == 201, r.text
    spec = r.json()["spec"]
    assert spec["numConcurrency"] == [1, 2, 4, 8, 16, 32, 64, 128, 256] and spec["maxTimePerIteration"] == 15
    assert spec["additionalRequestParams"] == {"temperature": "0.0"}
    meta = {"engine": "vLLM", "version": "0.10.0", "gpuType": "A10", "gpuCount": 1}
    assert create(api, job("plain-job", serviceMetadata=meta), BNS)["spec"]["serviceMetadata"] == meta


# ------------------------------------------------------------------------------------------- lists


@pytest.mark.parametrize(("params", "field"), [
    ({"limit": "-1"}, "query.limit"),
    ({"limit": "abc"}, "query.limit"),
    ({"continue": "garbage!!"}, "continue"),
    ({"resourceVersionMatch": "Bogus"}, "query.resourceVersionMatch"),
])
def test_invalid_list_parameters_are_400_naming_the_parameter(api, params, field):
    assert_rejected(api.get(NS, params=params), 400, field)


def test_valid_list_parameters_list_everything(api):
    create(api, dgdr("listed-1"))
    create(api, dgdr("listed-2"))
    everything = api.get(NS).json()["items"]
    for params in ({"limit": "0"}, {"resourceVersionMatch": "NotOlderThan", "resourceVersion": "0"}):
        r = api.get(NS, params=params)
        assert r.status_code == 200 and r.json()["items"] == everything and "continue" not in r.json()["metadata"]
    first = api.get(NS, params={"limit": "1"}).json()
    assert first["items"] == everything[:1] and first["metadata"]["remainingItemCount"] == len(everything) - 1
