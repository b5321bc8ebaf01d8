"""The REST API as Kubernetes tooling sees it: the official ``kubernetes`` client against a real
uvicorn server on a free local port (SQLite database, in-process queue, no worker)."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime

import httpx
import pytest
import uvicorn
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from api.app import create_app
from api.routes import resources as resource_routes
from infra import resources as repo
from infra import migrate
from infra.settings import load_settings
from procs import free_port

pytestmark = pytest.mark.slow

GROUP, V1, PLURAL = "nvidia.com", "v1alpha1", "dynamographdeploymentrequests"
NS_PATH = f"/apis/{GROUP}/{V1}/namespaces/default/{PLURAL}"


def _serve(settings):
    """Start uvicorn in a thread; returns (base_url, stop)."""
    migrate.upgrade(settings)
    app = create_app(settings)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the API server did not start")
        time.sleep(0.02)

    def stop():
        server.should_exit = True
        thread.join(10)
        app.state.engine.dispose()

    return f"http://127.0.0.1:{port}", stop


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = tmp_path_factory.mktemp("api") / "slaplan.db"
    url, stop = _serve(load_settings({}, database_url=f"sqlite:///{db}", max_body_bytes=64 * 1024))
    yield url
    stop()


@pytest.fixture(scope="module")
def custom(server):
    configuration = k8s.Configuration(host=server)
    with k8s.ApiClient(configuration) as api_client:
        yield k8s.CustomObjectsApi(api_client)


def dgdr(name: str, labels: dict | None = None, **spec) -> dict:
    body = {
        "apiVersion": f"{GROUP}/{V1}",
        "kind": "DynamoGraphDeploymentRequest",
        "metadata": {"name": name, **({"labels": labels} if labels else {})},
        "spec": {
            "modelName": "Qwen/Qwen3-32B",
            "backend": "vllm",
            "sla": {"ttft": 500, "itl": 20},
            "gpu": {"type": "h200_sxm"},
            **spec,
        },
    }
    return body


def _status_of(exc: ApiException) -> dict:
    return json.loads(exc.body)


def test_create_get_list_delete_with_the_kubernetes_client(custom):
    created = custom.create_namespaced_custom_object(GROUP, V1, "default", PLURAL, dgdr("crud-a", {"team": "infer", "tier": "gold"}))
    meta = created["metadata"]
    assert meta["uid"] and meta["generation"] == 1 and meta["resourceVersion"] and meta["creationTimestamp"]
    assert created["status"]["state"] == "Pending"
    custom.create_namespaced_custom_object(GROUP, V1, "default", PLURAL, dgdr("crud-b", {"team": "infer"}))
    custom.create_namespaced_custom_object(GROUP, V1, "other", PLURAL, dgdr("crud-c", {"team": "train"}))

    got = custom.get_namespaced_custom_object(GROUP, V1, "default", PLURAL, "crud-a")
    assert got["metadata"]["uid"] == meta["uid"] and got["spec"]["modelName"] == "Qwen/Qwen3-32B"

    listed = custom.list_namespaced_custom_object(GROUP, V1, "default", PLURAL, label_selector="team=infer")
    assert listed["kind"] == "DynamoGraphDeploymentRequestList" and listed["metadata"]["resourceVersion"]
    assert [i["metadata"]["name"] for i in listed["items"]] == ["crud-a", "crud-b"]
    gold = custom.list_namespaced_custom_object(GROUP, V1, "default", PLURAL, label_selector="tier in (gold,silver)")
    assert [i["metadata"]["name"] for i in gold["items"]] == ["crud-a"]
    everywhere = custom.list_cluster_custom_object(GROUP, V1, PLURAL, label_selector="team,tier notin (gold)")
    assert sorted(i["metadata"]["name"] for i in everywhere["items"]) == ["crud-b", "crud-c"]
    assert custom.list_cluster_custom_object(GROUP, V1, PLURAL, label_selector="!team")["items"] == []

    custom.delete_namespaced_custom_object(GROUP, V1, "default", PLURAL, "crud-a")
    with pytest.raises(ApiException) as err:
        custom.get_namespaced_custom_object(GROUP, V1, "default", PLURAL, "crud-a")
    assert err.value.status == 404
    status = _status_of(err.value)
    assert status["kind"] == "Status" and status["reason"] == "NotFound" and status["code"] == 404


def test_duplicate_is_409_already_exists(custom):
    custom.create_namespaced_custom_object(GROUP, V1, "default", PLURAL, dgdr("dup"))
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object(GROUP, V1, "default", PLURAL, dgdr("dup"))
    assert err.value.status == 409
    assert _status_of(err.value)["reason"] == "AlreadyExists"


def test_invalid_spec_is_422_with_causes(custom):
    body = dgdr("bad-sla")
    body["spec"]["sla"] = {"ttft": -5}
    del body["spec"]["modelName"]
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object(GROUP, V1, "default", PLURAL, body)
    assert err.value.status == 422
    status = _status_of(err.value)
    assert status["reason"] == "Invalid"
    fields = {c["field"] for c in status["details"]["causes"]}
    assert {"spec.sla.ttft", "spec.modelName"} <= fields
    assert all(c["reason"].startswith("FieldValue") and c["message"] for c in status["details"]["causes"])


def test_invalid_name_is_422(custom):
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object(GROUP, V1, "default", PLURAL, dgdr("Not_A_Name"))
    assert err.value.status == 422
    assert _status_of(err.value)["details"]["causes"][0]["field"] == "metadata.name"


def test_malformed_body_is_400(server):
    r = httpx.post(server + NS_PATH, content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["reason"] == "BadRequest"
    r = httpx.post(server + NS_PATH, content=b"- a\n- list", headers={"content-type": "application/yaml"})
    assert r.status_code == 400
    r = httpx.post(server + NS_PATH, json={**dgdr("wrong-kind"), "kind": "Pod"})
    assert r.status_code == 400


def test_yaml_body_and_generate_name(server):
    text = """
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeploymentRequest
metadata:
  generateName: from-yaml-
spec:
  modelName: Qwen/Qwen3-32B
  backend: vllm
  sla: {ttft: 400, itl: 25}
  gpu: {type: h200_sxm}
"""
    r = httpx.post(server + NS_PATH, content=text.encode(), headers={"content-type": "application/yaml"})
    assert r.status_code == 201, r.text
    assert r.json()["metadata"]["name"].startswith("from-yaml-")


def test_unknown_resource_and_object_are_404(server):
    r = httpx.get(server + "/apis/nvidia.com/v1alpha1/namespaces/default/widgets")
    assert r.status_code == 404 and r.json()["kind"] == "Status"
    r = httpx.get(server + NS_PATH + "/nope")
    assert r.status_code == 404 and r.json()["reason"] == "NotFound"


def test_merge_patch_of_metadata(custom):
    custom.create_namespaced_custom_object(GROUP, V1, "default", PLURAL, dgdr("patched", {"keep": "1", "drop": "1"}))
    out = custom.patch_namespaced_custom_object(
        GROUP, V1, "default", PLURAL, "patched", {"metadata": {"labels": {"drop": None, "added": "yes"}, "annotations": {"note": "hi"}}}
    )
    assert out["metadata"]["labels"] == {"keep": "1", "added": "yes"}
    assert out["metadata"]["annotations"] == {"note": "hi"}
    assert out["metadata"]["generation"] == 1  # metadata changes do not bump the generation


def test_a_patch_naming_no_version_is_merged_again_when_a_write_races_it(custom, monkeypatch):
    custom.create_namespaced_custom_object(GROUP, V1, "default", PLURAL, dgdr("raced"))
    real_load, raced = resource_routes._load, []

    def load_then_race(session, kind, namespace, name):
        """The worker writes the status between the patch's read and its write."""
        current = real_load(session, kind, namespace, name)
        if name == "raced" and not raced:
            raced.append(current.resource_version)
            repo.update_status(session, {**current.status, "message": "written by the worker"}, key=current.key)
            session.commit()
        return current

    monkeypatch.setattr(resource_routes, "_load", load_then_race)
    out = custom.patch_namespaced_custom_object(GROUP, V1, "default", PLURAL, "raced", {"metadata": {"labels": {"seen": "yes"}}})
    assert raced and out["metadata"]["labels"] == {"seen": "yes"}
    assert out["status"]["message"] == "written by the worker"  # the racing write is kept
    with pytest.raises(ApiException) as err:  # a patch that names a stale version still conflicts
        custom.patch_namespaced_custom_object(GROUP, V1, "default", PLURAL, "raced",
                                              {"metadata": {"resourceVersion": str(raced[0]), "labels": {"seen": "no"}}})
    assert err.value.status == 409 and _status_of(err.value)["reason"] == "Conflict"


def test_spec_change_after_profiling_started_is_422(server, custom):
    custom.create_namespaced_custom_object(GROUP, V1, "default", PLURAL, dgdr("frozen"))
    # While Pending the spec may still change (generation bumps).
    out = custom.patch_namespaced_custom_object(GROUP, V1, "default", PLURAL, "frozen", {"spec": {"sla": {"itl": 30}}})
    assert out["metadata"]["generation"] == 2 and out["spec"]["sla"]["itl"] == 30
    # A worker takes it: the status subresource says Profiling.
    r = httpx.patch(
        server + NS_PATH + "/frozen/status",
        content=json.dumps({"status": {"state": "Profiling"}}),
        headers={"content-type": "application/merge-patch+json"},
    )
    assert r.status_code == 200 and r.json()["status"]["state"] == "Profiling"
    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object(GROUP, V1, "default", PLURAL, "frozen", {"spec": {"sla": {"itl": 10}}})
    assert err.value.status == 422
    assert _status_of(err.value)["details"]["causes"][0]["field"] == "spec"
    # Labels may still change.
    custom.patch_namespaced_custom_object(GROUP, V1, "default", PLURAL, "frozen", {"metadata": {"labels": {"x": "y"}}})


def test_replace_needs_the_current_resource_version(custom):
    created = custom.create_namespaced_custom_object(GROUP, V1, "default", PLURAL, dgdr("replaced"))
    stale = {**created, "metadata": {**created["metadata"], "resourceVersion": "1"}}
    with pytest.raises(ApiException) as err:
        custom.replace_namespaced_custom_object(GROUP, V1, "default", PLURAL, "replaced", stale)
    assert err.value.status == 409 and _status_of(err.value)["reason"] == "Conflict"
    fresh = {**created, "metadata": {**created["metadata"], "labels": {"v": "2"}}}
    out = custom.replace_namespaced_custom_object(GROUP, V1, "default", PLURAL, "replaced", fresh)
    assert out["metadata"]["labels"] == {"v": "2"}


def test_bad_label_selector_is_400(server):
    r = httpx.get(server + NS_PATH, params={"labelSelector": "a in (b"})
    assert r.status_code == 400 and r.json()["kind"] == "Status"


def test_v1beta1_is_served(custom):
    body = {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeploymentRequest",
        "metadata": {"name": "beta"},
        "spec": {"model": "Qwen/Qwen3-32B", "hardware": {"gpuSku": "h200_sxm"}, "sla": {"ttft": 500, "itl": 20}},
    }
    created = custom.create_namespaced_custom_object(GROUP, "v1beta1", "default", PLURAL, body)
    assert created["apiVersion"] == "nvidia.com/v1beta1"


BENCH = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "BenchmarkJob",
    "metadata": {"name": "bench-a"},
    "spec": {
        "endpoint": {"endpoint": {"url": "http://127.0.0.1:8000", "apiFormat": "openai", "modelName": "m"}},
        "task": "text-to-text",
        "trafficScenarios": ["D(100,100)", "N(480,240)/(300,150)"],
        "numConcurrency": [1, 4],
        "maxTimePerIteration": 2,
        "maxRequestsPerIteration": 50,
        "outputLocation": {"storageUri": "pvc://results/bench-a"},
    },
}


def test_benchmarkjob_create_and_validation(custom):
    created = custom.create_namespaced_custom_object("ome.io", "v1beta1", "default", "benchmarkjobs", BENCH)
    assert created["status"]["state"] == "Pending"
    bad = json.loads(json.dumps(BENCH))
    bad["metadata"]["name"] = "bench-bad"
    bad["spec"]["trafficScenarios"] = ["D(100, 100)"]
    bad["spec"]["endpoint"]["endpoint"]["url"] = "ftp://x"
    del bad["spec"]["maxRequestsPerIteration"]
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object("ome.io", "v1beta1", "default", "benchmarkjobs", bad)
    assert err.value.status == 422
    fields = {c["field"] for c in _status_of(err.value)["details"]["causes"]}
    assert {"spec.trafficScenarios", "spec.endpoint.endpoint.url", "spec.maxRequestsPerIteration"} <= fields


def test_discovery(server):
    groups = httpx.get(server + "/apis").json()
    assert groups["kind"] == "APIGroupList"
    by_name = {g["name"]: g for g in groups["groups"]}
    assert {v["version"] for v in by_name["nvidia.com"]["versions"]} == {"v1alpha1", "v1beta1"}
    resources = httpx.get(server + "/apis/ome.io/v1beta1").json()
    assert resources["kind"] == "APIResourceList" and resources["groupVersion"] == "ome.io/v1beta1"
    by_resource = {r["name"]: r for r in resources["resources"]}
    assert {"benchmarkjobs", "benchmarkjobs/status"} <= set(by_resource)
    assert {"list", "watch"} <= set(by_resource["benchmarkjobs"]["verbs"])  # kubectl get -w asks
    assert httpx.get(server + "/apis/ome.io/v9").status_code == 404


def test_health_metrics_openapi(server):
    assert httpx.get(server + "/healthz").text == "ok"
    assert httpx.get(server + "/readyz").status_code == 200
    metrics = httpx.get(server + "/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    assert "slaplan_http_requests_total" in metrics.text
    assert 'slaplan_resources{kind="DynamoGraphDeploymentRequest",state="Pending"}' in metrics.text
    paths = httpx.get(server + "/openapi.json").json()["paths"]
    assert "/apis/{group}/{version}/namespaces/{namespace}/{plural}" in paths


def test_body_over_the_limit_is_413(server):
    body = dgdr("huge")
    body["metadata"]["annotations"] = {"blob": "x" * (70 * 1024)}
    r = httpx.post(server + NS_PATH, json=body)
    assert r.status_code == 413 and r.json()["kind"] == "Status"


def test_token_guards_mutating_calls(tmp_path):
    secret = "s3cr3t-token-value"
    url, stop = _serve(load_settings({}, database_url=f"sqlite:///{tmp_path / 't.db'}", api_token=secret))
    try:
        r = httpx.post(url + NS_PATH, json=dgdr("guarded"))
        assert r.status_code == 401 and r.json()["reason"] == "Unauthorized"
        assert secret not in r.text
        r = httpx.post(url + NS_PATH, json=dgdr("guarded"), headers={"authorization": "Bearer wrong"})
        assert r.status_code == 401
        assert httpx.get(url + NS_PATH).status_code == 200  # reads need no token
        configuration = k8s.Configuration(host=url, api_key={"BearerToken": secret}, api_key_prefix={"BearerToken": "Bearer"})
        with k8s.ApiClient(configuration) as api_client:
            created = k8s.CustomObjectsApi(api_client).create_namespaced_custom_object(GROUP, V1, "default", PLURAL, dgdr("guarded"))
        assert created["metadata"]["name"] == "guarded"
        assert secret not in httpx.get(url + "/metrics").text
    finally:
        stop()


def test_readyz_fails_on_an_unmigrated_database(tmp_path):
    from api_client import api_client

    app = create_app(load_settings({}, database_url=f"sqlite:///{tmp_path / 'empty.db'}"))
    try:
        r = api_client(app).get("/readyz")
        assert r.status_code == 503 and "migrat" in r.json()["message"]
    finally:
        app.state.engine.dispose()


def test_auto_apply_needs_a_token_when_a_cluster_is_configured(tmp_path):
    """With a cluster and no token anyone reaching the API could deploy: autoApply is refused
    (422 naming spec.autoApply) unless allowed; plain planning requests are still accepted."""
    env = {"SLAPLAN_KUBECONFIG": str(tmp_path / "kubeconfig")}
    url, stop = _serve(load_settings(env, database_url=f"sqlite:///{tmp_path / 'a.db'}"))
    try:
        refused = httpx.post(url + NS_PATH, json=dgdr("applies", autoApply=True))
        assert refused.status_code == 422, refused.text
        causes = refused.json()["details"]["causes"]
        assert [c["field"] for c in causes] == ["spec.autoApply"] and "SLAPLAN_API_TOKEN" in causes[0]["message"]
        beta = {"apiVersion": f"{GROUP}/v1beta1", "kind": "DynamoGraphDeploymentRequest", "metadata": {"name": "beta-default"},
                "spec": {"model": "Qwen/Qwen3-32B", "hardware": {"gpuSku": "h200_sxm"}, "sla": {"ttft": 500, "itl": 20}}}
        beta_path = NS_PATH.replace(V1, "v1beta1")
        assert httpx.post(url + beta_path, json=beta).status_code == 422  # v1beta1 applies by default
        assert httpx.post(url + beta_path, json={**beta, "spec": {**beta["spec"], "autoApply": False}}).status_code == 201
        assert httpx.post(url + NS_PATH, json=dgdr("plans-only")).status_code == 201
        assert httpx.get(url + NS_PATH + "/applies").status_code == 404  # nothing stored for the refusal
    finally:
        stop()

    url, stop = _serve(load_settings({**env, "SLAPLAN_ALLOW_UNAUTHENTICATED_APPLY": "true"},
                                     database_url=f"sqlite:///{tmp_path / 'b.db'}"))
    try:
        assert httpx.post(url + NS_PATH, json=dgdr("applies", autoApply=True)).status_code == 201
    finally:
        stop()

    url, stop = _serve(load_settings({**env, "SLAPLAN_API_TOKEN": "t0ken"}, database_url=f"sqlite:///{tmp_path / 'c.db'}"))
    try:
        created = httpx.post(url + NS_PATH, json=dgdr("applies", autoApply=True), headers={"authorization": "Bearer t0ken"})
        assert created.status_code == 201, created.text
    finally:
        stop()


def test_a_pending_request_cannot_be_patched_into_applying_without_a_token(tmp_path):
    from api_client import api_client

    from infra.db import session_scope
    from infra.resources import ResourceCreate, create_resource
    from workers import lifecycle

    settings = load_settings({"SLAPLAN_KUBECONFIG": str(tmp_path / "kubeconfig")}, database_url=f"sqlite:///{tmp_path / 'p.db'}")
    migrate.upgrade(settings)
    app = create_app(settings)
    try:
        body = dgdr("waiting")
        with session_scope(app.state.sessions) as session:  # stored, never enqueued: stays Pending
            create_resource(session, ResourceCreate(
                group=GROUP, version=V1, kind=body["kind"], plural=PLURAL, namespace="default", name="waiting",
                spec=body["spec"], status=lifecycle.dgdr_pending(1, datetime.now(UTC))))
        r = api_client(app).patch(NS_PATH + "/waiting", json={"spec": {"autoApply": True}},
                                  headers={"content-type": "application/merge-patch+json"})
        assert r.status_code == 422 and r.json()["details"]["causes"][0]["field"] == "spec.autoApply"
        assert api_client(app).get(NS_PATH + "/waiting").json()["spec"] == body["spec"]
    finally:
        app.state.engine.dispose()


def test_the_kubernetes_client_pages_with_limit_and_continue(custom):
    for name in ("paged-a", "paged-b", "paged-c"):
        custom.create_namespaced_custom_object(GROUP, V1, "paging", PLURAL, dgdr(name))
    names, token = [], None
    while True:
        page = custom.list_namespaced_custom_object(GROUP, V1, "paging", PLURAL, limit=2, **({"_continue": token} if token else {}))
        names += [i["metadata"]["name"] for i in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
    assert names == ["paged-a", "paged-b", "paged-c"]


def test_server_side_apply_with_the_kubernetes_client_owns_fields_and_conflicts(custom):
    def apply(body: dict, manager: str, **options):
        return custom.patch_namespaced_custom_object(GROUP, V1, "default", PLURAL, body["metadata"]["name"], body,
                                                     field_manager=manager, _content_type="application/apply-patch+yaml",
                                                     **options)

    apply(dgdr("ssa-client", {"team": "a"}), "deployer")  # 201: the client maps only 200 to an object
    created = custom.get_namespaced_custom_object(GROUP, V1, "default", PLURAL, "ssa-client")
    assert [(e["manager"], e["operation"]) for e in created["metadata"]["managedFields"]] == [("deployer", "Apply")]
    with pytest.raises(ApiException) as info:
        apply(dgdr("ssa-client", {"team": "b"}), "other")
    status = _status_of(info.value)
    assert info.value.status == 409 and status["reason"] == "Conflict"
    assert [c["field"] for c in status["details"]["causes"]] == [".metadata.labels.team"]
    forced = apply(dgdr("ssa-client", {"team": "b"}), "other", force=True)
    assert forced["metadata"]["labels"] == {"team": "b"}
    owners = {e["manager"]: e for e in forced["metadata"]["managedFields"]}
    assert "f:metadata" not in owners["deployer"]["fieldsV1"]  # its one metadata field was taken
    assert owners["other"]["fieldsV1"]["f:metadata"] == {"f:labels": {"f:team": {}}}
