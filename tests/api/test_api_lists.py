"""Lists in pages (``limit`` / ``continue``), the server's page cap, Table responses, the OpenAPI
documents kubectl reads, and reads that need the token: the real app on SQLite, in process."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from api_client import api_client

from api.app import create_app
from infra import events, migrate
from infra.db import session_scope
from infra.settings import load_settings

NS = "/apis/nvidia.com/v1alpha1/namespaces/{ns}/dynamographdeploymentrequests"
ALL = "/apis/nvidia.com/v1alpha1/dynamographdeploymentrequests"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io, application/json"
CAP = 7


def make_app(tmp_path_factory, **settings):
    db = tmp_path_factory.mktemp("lists") / "slaplan.db"
    app = create_app(load_settings({}, database_url=f"sqlite:///{db}", **settings))
    migrate.upgrade(app.state.settings)
    app.state.enqueue = lambda _kind, _uid: None  # nothing runs: objects stay as created
    return app


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    app = make_app(tmp_path_factory, list_page_items=CAP)
    yield app
    app.state.engine.dispose()


@pytest.fixture(scope="module")
def api(app):
    client = api_client(app)
    for ns, count in (("alpha", 12), ("beta", 3)):
        for i in range(count):
            labels = {"parity": "even" if i % 2 == 0 else "odd"}
            r = client.post(NS.format(ns=ns), json=dgdr(f"item-{i:02d}", labels))
            assert r.status_code == 201, r.text
    return client


def dgdr(name: str, labels: dict[str, str]) -> dict:
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeploymentRequest",
            "metadata": {"name": name, "labels": labels},
            "spec": {"modelName": "Qwen/Qwen3-32B", "backend": "vllm", "sla": {"ttft": 500, "itl": 20},
                     "gpu": {"type": "h200_sxm"}}}


def keys(body: dict) -> list[tuple[str, str]]:
    return [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in body["items"]]


def pages(api, path: str, **params) -> list[dict]:
    """Every page of a list, following ``continue``."""
    out = []
    while True:
        r = api.get(path, params=params)
        assert r.status_code == 200, r.text
        out.append(r.json())
        token = r.json()["metadata"].get("continue")
        if not token:
            return out
        params = {**params, "continue": token}


def test_pages_follow_namespace_and_name_order_and_count_what_remains(api):
    got = pages(api, ALL, limit=4)
    listed = [key for page in got for key in keys(page)]
    assert listed == sorted(listed) and len(listed) == len(set(listed)) == 15
    assert [len(p["items"]) for p in got] == [4, 4, 4, 3]
    assert [p["metadata"].get("remainingItemCount") for p in got] == [11, 7, 3, None]
    assert {p["metadata"]["resourceVersion"] for p in got} == {got[0]["metadata"]["resourceVersion"]}


def test_the_server_caps_every_page(api):
    for params in ({}, {"limit": 0}, {"limit": 1000}):
        first = api.get(ALL, params=params).json()
        assert len(first["items"]) == CAP and first["metadata"]["remainingItemCount"] == 15 - CAP
    assert sum(len(p["items"]) for p in pages(api, ALL)) == 15


def test_selected_pages_hold_only_selected_objects(api):
    got = pages(api, NS.format(ns="alpha"), limit=2, labelSelector="parity=even")
    assert [name for page in got for _, name in keys(page)] == [f"item-{i:02d}" for i in range(0, 12, 2)]
    assert "remainingItemCount" not in got[0]["metadata"]  # as kube-apiserver: not counted under a selector
    named = pages(api, ALL, limit=1, fieldSelector="metadata.name=item-01")
    assert [key for page in named for key in keys(page)] == [("alpha", "item-01"), ("beta", "item-01")]


def test_objects_created_and_deleted_between_pages(api):
    path = NS.format(ns="beta")
    first = api.get(path, params={"limit": 1}).json()
    assert keys(first) == [("beta", "item-00")]
    assert api.delete(path + "/item-01").status_code == 200
    assert api.post(path, json=dgdr("item-99", {})).status_code == 201
    rest = pages(api, path, limit=1, **{"continue": first["metadata"]["continue"]})
    assert [key for page in rest for key in keys(page)] == [("beta", "item-02"), ("beta", "item-99")]


def test_later_pages_carry_the_first_pages_count_and_never_count_again(tmp_path_factory):
    """The count of what remains is taken once, at the first page, and carried in the token less
    each page's objects: exact while the list does not change; objects created after the first
    page are listed but not counted, and a count the list has outgrown is omitted."""
    app = make_app(tmp_path_factory)
    client = api_client(app)
    path = NS.format(ns="delta")
    for i in range(5):
        assert client.post(path, json=dgdr(f"item-{i:02d}", {})).status_code == 201
    assert [p["metadata"].get("remainingItemCount") for p in pages(client, path, limit=2)] == [3, 1, None]
    first = client.get(path, params={"limit": 2}).json()
    for name in ("item-10", "item-11"):
        assert client.post(path, json=dgdr(name, {})).status_code == 201
    rest = pages(client, path, limit=2, **{"continue": first["metadata"]["continue"]})
    assert [name for page in rest for _, name in keys(page)] == ["item-02", "item-03", "item-04", "item-10",
                                                                  "item-11"]
    assert [p["metadata"].get("remainingItemCount") for p in rest] == [1, None, None]
    app.state.engine.dispose()


@pytest.mark.parametrize("token", ["garbage!!", "e30", "eyJ2IjoxLCJydiI6MCwibnMiOiIiLCJuYW1lIjoiIn0",
                                   "eyJ2IjoxLCJydiI6MSwibnMiOiJhbHBoYSIsIm5hbWUiOiJ4IiwibiI6LTF9"])
def test_a_garbled_token_is_400_naming_continue(api, token):
    r = api.get(ALL, params={"continue": token})
    assert r.status_code == 400 and r.json()["reason"] == "BadRequest"
    assert r.json()["details"]["causes"][0]["field"] == "continue"


def test_a_token_of_another_namespace_or_with_a_version_is_400(api):
    token = api.get(NS.format(ns="alpha"), params={"limit": 1}).json()["metadata"]["continue"]
    assert api.get(NS.format(ns="beta"), params={"continue": token}).status_code == 400
    r = api.get(NS.format(ns="alpha"), params={"continue": token, "resourceVersion": "1"})
    assert r.status_code == 400 and r.json()["details"]["causes"][0]["field"] == "resourceVersion"


def test_a_token_older_than_the_history_is_410_with_a_fresh_token(app, api):
    first = api.get(ALL, params={"limit": 2}).json()
    assert api.post(NS.format(ns="gamma"), json=dgdr("after", {})).status_code == 201
    with session_scope(app.state.sessions) as session:
        assert events.compact(session, datetime.now(UTC) + timedelta(seconds=1)) > 0
    r = api.get(ALL, params={"continue": first["metadata"]["continue"]})
    assert r.status_code == 410 and r.json()["reason"] == "Expired"
    rest = [key for page in pages(api, ALL, **{"continue": r.json()["metadata"]["continue"]}) for key in keys(page)]
    assert rest[0] == ("alpha", "item-02") and rest[-1] == ("gamma", "after")


def test_a_table_has_the_printer_columns_and_pages(api):
    r = api.get(NS.format(ns="alpha"), params={"limit": 2}, headers={"Accept": TABLE})
    body = r.json()
    assert body["kind"] == "Table" and body["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in body["columnDefinitions"]] == ["Name", "Model", "Backend", "State", "DGD-State", "Age"]
    assert [row["cells"][0] for row in body["rows"]] == ["item-00", "item-01"]
    assert body["rows"][0]["cells"][3] == "Pending" and body["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert body["metadata"]["continue"] and body["metadata"]["remainingItemCount"] == 10
    one = api.get(NS.format(ns="alpha") + "/item-03", params={"includeObject": "Object"}, headers={"Accept": TABLE})
    assert one.json()["rows"][0]["object"]["metadata"]["name"] == "item-03"
    assert api.get(NS.format(ns="alpha"), params={"includeObject": "All"}, headers={"Accept": TABLE}).status_code == 400


def test_openapi_documents_publish_the_crd_schemas(api):
    index = api.get("/openapi/v3").json()["paths"]
    assert {"apis/nvidia.com/v1alpha1", "apis/nvidia.com/v1beta1", "apis/ome.io/v1beta1"} <= set(index)
    doc = api.get(index["apis/ome.io/v1beta1"]["serverRelativeURL"]).json()
    job = doc["components"]["schemas"]["io.ome.v1beta1.BenchmarkJob"]
    assert job["x-kubernetes-group-version-kind"] == [{"group": "ome.io", "version": "v1beta1", "kind": "BenchmarkJob"}]
    assert "numConcurrency" in job["properties"]["spec"]["properties"]
    assert api.get("/openapi/v3/apis/example.com/v1").status_code == 404
    v2 = api.get("/openapi/v2", headers={"Accept": "application/json"}).json()
    assert v2["swagger"] == "2.0" and "com.nvidia.v1alpha1.DynamoGraphDeploymentRequest" in v2["definitions"]
    protobuf = api.get("/openapi/v2", headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"})
    assert protobuf.status_code == 406 and protobuf.json()["kind"] == "Status"


def test_reads_can_require_the_token(tmp_path_factory):
    app = make_app(tmp_path_factory, api_token="s3cret", require_token_for_reads=True)
    client = api_client(app)
    assert client.get(ALL).status_code == 401
    assert client.get("/openapi/v3").status_code == 401
    assert client.get(ALL, headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert client.get("/healthz").status_code == 200 and client.get("/readyz").status_code == 200
    app.state.engine.dispose()


@pytest.mark.parametrize("params", [{}, {"watch": "true"}])
def test_a_version_ahead_of_the_server_is_too_large_at_once(api, params):
    r = api.get(ALL, params={**params, "resourceVersion": str(2**63 - 1)})
    assert r.status_code == 504 and r.json()["reason"] == "Timeout"
    assert r.json()["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


def test_a_timeout_beyond_a_go_duration_is_400(api):
    r = api.get(ALL, params={"watch": "true", "timeoutSeconds": "99999999999999999999"})
    assert r.status_code == 400 and r.json()["details"]["causes"][0]["field"] == "query.timeoutSeconds"
