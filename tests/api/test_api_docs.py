"""The app's own OpenAPI document is complete (bodies, Status errors, parameter formats) and
``/docs`` loads nothing from another host."""

from __future__ import annotations

import re

import pytest
from api_client import api_client

from api.app import create_app
from infra.settings import load_settings

ITEM = "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}"
COLLECTION = "/apis/{group}/{version}/namespaces/{namespace}/{plural}"


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    app = create_app(load_settings({}, database_url=f"sqlite:///{tmp_path_factory.mktemp('docs') / 'slaplan.db'}"))
    yield api_client(app)
    app.state.engine.dispose()


def test_writes_declare_their_bodies_and_every_error_is_a_status(api):
    document = api.get("/openapi.json").json()
    paths = document["paths"]
    assert set(paths[COLLECTION]["post"]["requestBody"]["content"]) == {"application/json", "application/yaml"}
    patch_types = paths[ITEM]["patch"]["requestBody"]["content"]
    assert set(patch_types) == {"application/merge-patch+json", "application/apply-patch+yaml",
                                "application/json-patch+json"}
    assert patch_types["application/json-patch+json"]["schema"]["type"] == "array"
    for method in ("post", "put", "patch", "delete"):
        operation = paths[COLLECTION if method == "post" else ITEM][method]
        assert {"400", "404", "409", "415", "422"} <= set(operation["responses"]), method
    for operations in paths.values():
        for operation in operations.values():
            for code, response in operation["responses"].items():
                if code >= "400":
                    assert response["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Status"}
    assert "HTTPValidationError" not in document["components"]["schemas"]


def test_query_parameters_carry_their_formats(api):
    params = {p["name"]: p["schema"] for p in api.get("/openapi.json").json()["paths"][COLLECTION]["get"]["parameters"]}
    assert re.fullmatch(params["resourceVersion"]["pattern"], "9223372036854775807")
    assert not re.fullmatch(params["resourceVersion"]["pattern"], "12a")
    timeout = next(s for s in params["timeoutSeconds"]["anyOf"] if s.get("type") == "integer")
    assert timeout["minimum"] == 0 and timeout["maximum"] < 2**63


def test_the_docs_page_loads_only_local_assets(api):
    page = api.get("/docs")
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href|url)\s*[=:]\s*['"]([^'"]+)['"]""", page.text)
    assert urls and all(u.startswith("/") for u in urls), urls
    for url in urls:
        if url.startswith("/docs/assets/"):
            assert api.get(url).status_code == 200, url
    assert api.get("/redoc").status_code == 404
