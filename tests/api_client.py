"""Test clients that talk to the API as real clients do: by a loopback name (the API answers only
the Host names it is told to) and, for the dashboard's form, with its CSRF token."""

from __future__ import annotations

import re
from typing import Any

from fastapi.testclient import TestClient

LOCAL = "http://localhost"
_CSRF_INPUT = re.compile(r'id="csrf" value="([^"]+)"')


def api_client(app: Any, **options: Any) -> TestClient:
    """A ``TestClient`` for ``app`` at ``http://localhost``."""
    return TestClient(app, base_url=LOCAL, **options)


def submit_form(client: TestClient, text: str | bytes):
    """POST ``text`` to ``/ui/submit`` as the dashboard's form does: YAML, with the CSRF token of
    the form page (its cookie is kept by the client)."""
    page = client.get("/ui/submit")
    token = _CSRF_INPUT.search(page.text).group(1)
    return client.post("/ui/submit", content=text, headers={"Content-Type": "application/yaml", "X-CSRF-Token": token})
