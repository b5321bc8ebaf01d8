"""Writes come from the server's own pages or from clients that are not browsers: a page of another
site cannot create or delete objects (Origin, Sec-Fetch-Site, bodies only JSON or YAML, the form's
CSRF token), a name the server does not answer to is refused (DNS rebinding), ``slaplan serve``
listens on loopback unless told otherwise, and off loopback it refuses writes without a token."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from api.app import create_app
from api.origins import host_name, is_loopback
from api_client import api_client, submit_form
from infra import migrate
from infra.settings import load_settings
from procs import start_serve, stop

DGDRS = "/apis/nvidia.com/v1alpha1/namespaces/default/dynamographdeploymentrequests"
EVIL = {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
SAME = {"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"}


def _dgdr(name: str) -> dict:
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeploymentRequest", "metadata": {"name": name},
            "spec": {"modelName": "Qwen/Qwen3-32B", "backend": "vllm", "sla": {"ttft": 2000, "itl": 50},
                     "gpu": {"type": "h200_sxm"}}}


@pytest.fixture
def make_client(tmp_path):
    """make_client(listen_host=…, **settings) -> a client of the API on one migrated SQLite
    database (nothing is enqueued)."""
    db = f"sqlite:///{tmp_path / 'origins.db'}"
    migrate.upgrade(load_settings({}, database_url=db))
    apps = []

    def make(listen_host: str = "127.0.0.1", **settings):
        app = create_app(load_settings({}, database_url=db, **settings), listen_host=listen_host)
        app.state.enqueue = lambda kind, uid: None
        apps.append(app)
        return api_client(app)

    yield make
    for app in apps:
        app.state.engine.dispose()


def _names(client) -> list[str]:
    return [item["metadata"]["name"] for item in client.get(DGDRS).json()["items"]]


@pytest.mark.parametrize("headers", [
    EVIL,
    {"Origin": "https://evil.example"},  # a browser that does not send Sec-Fetch-Site
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},  # another port or subdomain of the same site
    {"Origin": "null"},  # a sandboxed frame or a file:// page
])
def test_a_write_from_another_origin_is_refused(make_client, headers):
    client = make_client()
    r = client.post(DGDRS, json=_dgdr("cross"), headers=headers)
    assert r.status_code == 403 and r.json()["reason"] == "Forbidden", r.text
    assert "another origin" in r.json()["message"]
    assert _names(client) == []


def test_deletes_and_patches_from_another_origin_are_refused(make_client):
    client = make_client()
    assert client.post(DGDRS, json=_dgdr("kept")).status_code == 201  # no browser headers: kubectl, curl
    assert client.delete(DGDRS + "/kept", headers=EVIL).status_code == 403
    patch = client.patch(DGDRS + "/kept", content=json.dumps({"metadata": {"labels": {"x": "y"}}}),
                         headers={**EVIL, "Content-Type": "application/merge-patch+json"})
    assert patch.status_code == 403
    assert client.get(DGDRS + "/kept").json()["metadata"].get("labels", {}) == {}


@pytest.mark.parametrize("content_type", ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x"])
def test_a_body_a_page_can_send_unasked_is_415(make_client, content_type):
    """What a form or a no-cors fetch can send without a preflight is refused, whatever it holds."""
    client = make_client()
    r = client.post(DGDRS, content=json.dumps(_dgdr("plain")), headers={"Content-Type": content_type})
    assert r.status_code == 415 and r.json()["reason"] == "UnsupportedMediaType", r.text
    assert _names(client) == []


def test_same_origin_writes_and_trusted_origins_are_accepted(make_client):
    client = make_client()
    assert client.post(DGDRS, json=_dgdr("same"), headers=SAME).status_code == 201
    assert client.post(DGDRS, json=_dgdr("origin-only"), headers={"Origin": "http://localhost"}).status_code == 201
    proxied = make_client(trusted_origins=("https://slaplan.example",))
    assert proxied.post(DGDRS, json=_dgdr("proxied"), headers={"Origin": "https://slaplan.example",
                                                               "Sec-Fetch-Site": "cross-site"}).status_code == 201
    assert sorted(_names(client)) == ["origin-only", "proxied", "same"]


def _form_token(client) -> str:
    page = client.get("/ui/submit")
    assert "slaplan-csrf" in page.headers["set-cookie"] and "SameSite=strict" in page.headers["set-cookie"]
    return re.search(r'id="csrf" value="([^"]+)"', page.text).group(1)


def test_the_dashboard_form_works_from_its_own_page(make_client):
    client = make_client()
    token = _form_token(client)
    assert _form_token(client) == token  # a second tab's form keeps the first one valid
    r = client.post("/ui/submit", content=json.dumps(_dgdr("from-form")),
                    headers={**SAME, "Content-Type": "application/yaml", "X-CSRF-Token": token})
    assert r.status_code == 201 and r.json()["accepted"] is True, r.text
    assert submit_form(client, json.dumps(_dgdr("again"))).status_code == 201
    assert sorted(_names(client)) == ["again", "from-form"]


def test_the_dashboard_form_refuses_other_sites_and_missing_tokens(make_client):
    client = make_client()
    token = _form_token(client)
    body = json.dumps(_dgdr("forged"))
    yaml_type = {"Content-Type": "application/yaml"}
    assert client.post("/ui/submit", content=body, headers={**EVIL, **yaml_type}).status_code == 403
    assert client.post("/ui/submit", content=body, headers={"Content-Type": "text/plain", "X-CSRF-Token": token}).status_code == 415
    missing = client.post("/ui/submit", content=body, headers=yaml_type)
    assert missing.status_code == 403 and missing.json()["accepted"] is False
    wrong = client.post("/ui/submit", content=body, headers={**yaml_type, "X-CSRF-Token": "A" * 43})
    assert wrong.status_code == 403
    fresh = make_client()  # no cookie: a token copied from someone's page is not enough
    assert fresh.post("/ui/submit", content=body, headers={**yaml_type, "X-CSRF-Token": token}).status_code == 403
    assert _names(client) == []


@pytest.mark.parametrize("path", [DGDRS, "/", "/ui/submit", "/openapi.json"])
def test_a_host_the_server_does_not_answer_to_is_400(make_client, path):
    client = make_client()
    r = client.get(path, headers={"Host": "evil.example"})
    assert r.status_code == 400 and "Host" in r.json()["message"], r.text
    assert client.post(DGDRS, json=_dgdr("rebound"), headers={"Host": "evil.example:8080"}).status_code == 400
    assert _names(client) == []


def test_allowed_hosts_and_the_listen_address_are_answered(make_client):
    client = make_client()
    for host in ("localhost:8080", "127.0.0.1", "[::1]:8080", "LOCALHOST"):
        assert client.get(DGDRS, headers={"Host": host}).status_code == 200, host
    for path in ("/healthz", "/readyz", "/metrics"):  # probes and scrapers use the pod's IP
        assert client.get(path, headers={"Host": "10.1.2.3:8080"}).status_code == 200, path
    named = make_client(allowed_hosts=("slaplan.example",))
    assert named.get(DGDRS, headers={"Host": "slaplan.example:443"}).status_code == 200
    assert named.get(DGDRS, headers={"Host": "localhost"}).status_code == 400
    assert make_client(allowed_hosts=("*",)).get(DGDRS, headers={"Host": "any.example"}).status_code == 200
    own = make_client(listen_host="10.1.2.3", allow_unauthenticated_writes=True)
    assert own.get(DGDRS, headers={"Host": "10.1.2.3:8080"}).status_code == 200


def test_host_names_and_loopback():
    assert [host_name(h) for h in ("Example.com:80", "[::1]:8080", "::1", "localhost")] == [
        "example.com", "::1", "::1", "localhost"]
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.1.2.3", "myhost", ""))


def test_serve_listens_on_loopback_by_default():
    from api.cli import build_parser

    assert build_parser().parse_args(["serve"]).host == "127.0.0.1"


def test_off_loopback_writes_need_the_token_or_an_explicit_setting(make_client):
    open_to_all = make_client(listen_host="0.0.0.0")
    r = open_to_all.post(DGDRS, json=_dgdr("anonymous"))
    assert r.status_code == 403 and "SLAPLAN_API_TOKEN" in r.json()["message"]
    assert open_to_all.delete(DGDRS + "/anything").status_code == 403
    assert open_to_all.get(DGDRS).status_code == 200  # reads stay open
    allowed = make_client(listen_host="0.0.0.0", allow_unauthenticated_writes=True)
    assert allowed.post(DGDRS, json=_dgdr("allowed")).status_code == 201
    with_token = make_client(listen_host="0.0.0.0", api_token="t0ken")
    assert with_token.post(DGDRS, json=_dgdr("anonymous")).status_code == 401
    assert with_token.post(DGDRS, json=_dgdr("signed"), headers={"Authorization": "Bearer t0ken"}).status_code == 201
    assert sorted(_names(allowed)) == ["allowed", "signed"]


@pytest.mark.slow
def test_serve_on_every_interface_refuses_unauthenticated_writes(tmp_path):
    url, procs = start_serve(tmp_path, host="0.0.0.0")
    try:
        r = httpx.post(url + DGDRS, json=_dgdr("anonymous"))
        assert r.status_code == 403 and "SLAPLAN_API_TOKEN" in r.json()["message"], r.text
        assert httpx.get(url + DGDRS).json()["items"] == []
    finally:
        for proc in procs:
            stop(proc)
    assert "writes are refused" in (tmp_path / "serve.log").read_text()
