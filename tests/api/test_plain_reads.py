"""Plain gets and list pages answered ahead of FastAPI's router (``api.plain_reads``): the same
answers as the routes', the routes' answers for everything else, and the guards in front of both.
The real app on SQLite, in process."""

from __future__ import annotations

import pytest
from api_client import api_client
from sqlalchemy import Connection, create_engine, update

from api import plain_reads
from api.app import create_app
from api.routes import resources as routes
from infra import migrate
from infra.db import session_scope
from infra.tables import ResourceRow
from infra.settings import load_settings

NS = "/apis/nvidia.com/v1alpha1/namespaces/{ns}/dynamographdeploymentrequests"
ALL = "/apis/nvidia.com/v1alpha1/dynamographdeploymentrequests"
BETA = "/apis/nvidia.com/v1beta1/namespaces/{ns}/dynamographdeploymentrequests"


def dgdr(name: str) -> dict:
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeploymentRequest", "metadata": {"name": name},
            "spec": {"modelName": "Qwen/Qwen3-32B", "backend": "vllm", "sla": {"ttft": 500, "itl": 20},
                     "gpu": {"type": "h200_sxm"}}}


@pytest.fixture
def app(tmp_path):
    app = create_app(load_settings({}, database_url=f"sqlite:///{tmp_path / 'slaplan.db'}"))
    migrate.upgrade(app.state.settings)
    app.state.enqueue = lambda _kind, _uid: None  # nothing runs: objects stay as created
    yield app
    app.state.engine.dispose()


@pytest.fixture
def api(app):
    client = api_client(app)
    for i in range(5):
        assert client.post(NS.format(ns="a"), json=dgdr(f"d{i}")).status_code == 201
    return client


@pytest.fixture
def answered_by(monkeypatch):
    """The kind of database handle each body was read on: a Connection here, a Session in the routes."""
    seen: list[str] = []
    for name in ("object_body", "_list_body"):
        original = getattr(routes, name)

        def recorded(reader, *args, _original=original, **kwargs):
            seen.append("layer" if isinstance(reader, Connection) else "route")
            return _original(reader, *args, **kwargs)

        monkeypatch.setattr(routes, name, recorded)
    return seen


def test_a_plain_get_is_the_routes_answer_byte_for_byte(api, answered_by):
    plain = api.get(NS.format(ns="a") + "/d1")
    routed = api.get(NS.format(ns="a") + "/d1", params={"includeObject": ""})  # a query: not plain
    assert answered_by == ["layer", "route"]
    assert plain.status_code == routed.status_code == 200
    assert plain.content == routed.content and plain.json()["metadata"]["name"] == "d1"
    assert plain.headers["content-type"] == routed.headers["content-type"] == "application/json"
    assert plain.headers["content-length"] == str(len(plain.content))


def test_plain_list_pages_are_the_routes_pages_byte_for_byte(api, answered_by):
    def walk(extra: dict) -> list[bytes]:
        bodies, params = [], {"limit": "2", **extra}
        while True:
            page = api.get(ALL, params=params)
            assert page.status_code == 200, page.text
            bodies.append(page.content)
            token = page.json()["metadata"].get("continue")
            if not token:
                return bodies
            params = {**params, "continue": token}

    plain = walk({})
    routed = walk({"watch": "false"})  # a parameter the layer leaves to the route
    assert plain == routed and len(plain) == 3
    assert answered_by == ["layer"] * 3 + ["route"] * 3


def test_an_object_at_another_version_is_converted_as_the_route_converts_it(api, answered_by):
    plain = api.get(BETA.format(ns="a") + "/d2")
    routed = api.get(BETA.format(ns="a") + "/d2", params={"includeObject": ""})
    assert plain.content == routed.content and plain.json()["apiVersion"] == "nvidia.com/v1beta1"
    assert answered_by == ["layer", "route"]


@pytest.mark.parametrize("path,params,code,reason", [
    (NS.format(ns="a") + "/missing", {}, 404, "NotFound"),
    ("/apis/nvidia.com/v1alpha1/namespaces/a/nothings/d1", {}, 404, "NotFound"),
    (NS.format(ns="a"), {"continue": "not-a-token"}, 400, "BadRequest"),
    (NS.format(ns="a"), {"limit": "-1"}, 400, "BadRequest"),
])
def test_what_a_plain_read_would_not_answer_200_is_the_routes_status(api, path, params, code, reason):
    answer = api.get(path, params=params)
    assert answer.status_code == code
    assert answer.json()["kind"] == "Status" and answer.json()["reason"] == reason


def test_a_bad_continue_token_names_the_field_as_the_route_does(api):
    causes = api.get(NS.format(ns="a"), params={"continue": "bm90LWpzb24"}).json()["details"]["causes"]
    assert [c["field"] for c in causes] == ["continue"]


def test_a_row_without_its_text_and_a_database_error_are_answered_by_the_route(app, api, answered_by):
    with session_scope(app.state.sessions) as s:
        s.execute(update(ResourceRow).where(ResourceRow.name == "d3").values(object_json=None))
    legacy = api.get(NS.format(ns="a") + "/d3")
    assert legacy.status_code == 200 and legacy.json()["metadata"]["name"] == "d3"
    assert answered_by == ["layer", "route"]
    answered_by.clear()
    app.state.read_engine = create_engine(f"sqlite:///{app.state.settings.database_file.parent}/absent/x.db")
    read = api.get(NS.format(ns="a") + "/d1")
    assert read.status_code == 200 and read.json()["metadata"]["name"] == "d1"
    assert answered_by == ["route"]  # the layer's read failed before reaching the body


def test_guards_stand_in_front_of_plain_reads(tmp_path):
    app = create_app(load_settings({}, database_url=f"sqlite:///{tmp_path / 'slaplan.db'}", api_token="s3cret",
                                   require_token_for_reads=True))
    migrate.upgrade(app.state.settings)
    try:
        client = api_client(app)
        assert client.get(NS.format(ns="a") + "/d1").status_code == 401
        assert client.get(ALL, params={"limit": "1"}).status_code == 401
        assert client.get(ALL, headers={"Host": "evil.example", "Authorization": "Bearer s3cret"}).status_code == 400
        assert client.get(ALL, headers={"Authorization": "Bearer s3cret"}).status_code == 200
    finally:
        app.state.engine.dispose()


def test_requests_are_counted_under_the_routes_templates(api):
    api.get(NS.format(ns="a") + "/d1")
    api.get(ALL, params={"limit": "1"})
    text = api.get("/metrics").text
    assert f'route="{routes.ONE}"' in text and f'route="{routes.ALL_NAMESPACES}"' in text


def _scope(path: str, query: bytes = b"", method: str = "GET", accept: str | None = None) -> dict:
    headers = [(b"host", b"localhost")] + ([(b"accept", accept.encode())] if accept else [])
    return {"type": "http", "method": method, "path": path, "query_string": query, "headers": headers, "root_path": ""}


@pytest.mark.parametrize("scope", [
    _scope(NS.format(ns="a") + "/d1", b"includeObject=Object"),
    _scope(NS.format(ns="a") + "/d1", accept="application/json;as=Table;v=v1;g=meta.k8s.io"),
    _scope(NS.format(ns="a") + "/d1", method="HEAD"),
    _scope(NS.format(ns="a") + "/d1/status"),
    _scope(NS.format(ns="a") + "/"),
    _scope(NS.format(ns="a"), b"watch=true"),
    _scope(NS.format(ns="a"), b"labelSelector=a%3Db"),
    _scope(NS.format(ns="a"), b"limit=2&limit=3"),
    _scope(NS.format(ns="a"), b"limit=%2B2"),
    _scope(NS.format(ns="a"), b"resourceVersion=0"),
    _scope("/apis/nvidia.com/v1alpha1/namespaces"),
    _scope("/apis/nvidia.com/v1alpha1/namespaces/a/nothings"),
    _scope("/apis/nvidia.com/v9/namespaces/a/dynamographdeploymentrequests"),
    _scope("/apis/nvidia.com/v1alpha1/elsewhere/a/dynamographdeploymentrequests"),
])
def test_other_requests_go_on_to_the_routes(scope):
    assert plain_reads.plain_read(scope) is None


def test_what_a_plain_read_reads_from_the_path_and_query():
    get = plain_reads.plain_read(_scope(NS.format(ns="a") + "/d1", accept="application/json"))
    assert (get.kind.plural, get.version, get.namespace, get.name, get.route.path) == (
        "dynamographdeploymentrequests", "v1alpha1", "a", "d1", routes.ONE)
    page = plain_reads.plain_read(_scope(ALL, b"limit=20&continue=abc"))
    assert (page.namespace, page.name, page.limit, page.continue_, page.route.path) == (
        None, None, 20, "abc", routes.ALL_NAMESPACES)
    blank = plain_reads.plain_read(_scope(NS.format(ns="b"), b"continue="))
    assert (blank.namespace, blank.limit, blank.continue_, blank.route.path) == ("b", None, None, routes.NS)
