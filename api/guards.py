"""ASGI guards in front of the app: bearer token on mutating calls, body size limit, request metrics."""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from api.errors import status_body
from infra.settings import Settings

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


async def _send_status(send, code: int, message: str, extra_headers: list | None = None) -> None:
    body = json.dumps(status_body(code, message)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": code, "headers": headers + (extra_headers or [])})
    await send({"type": "http.response.body", "body": body})


def guarded(app, settings: Settings, metrics: Any = None):
    """Wrap an ASGI ``app``: 401 without the token on mutating calls (when a token is set),
    413 for bodies over ``settings.max_body_bytes``, and count every request in ``metrics``."""
    token = settings.api_token.get_secret_value().encode() if settings.api_token else None
    limit = settings.max_body_bytes

    async def asgi(scope, receive, send):
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        started = time.perf_counter()
        code_seen = {"code": 500}

        async def send_counted(message):
            if message["type"] == "http.response.start":
                code_seen["code"] = message["status"]
            await send(message)

        try:
            await _guarded_call(scope, receive, send_counted)
        finally:
            if metrics is not None:
                route = scope.get("route")
                template = getattr(route, "path", None) or "unmatched"
                metrics.observe_request(scope["method"], template, code_seen["code"], time.perf_counter() - started)

    async def _guarded_call(scope, receive, send):
        headers = dict(scope.get("headers") or [])
        if token is not None and scope["method"] in MUTATING:
            auth = headers.get(b"authorization", b"")
            scheme, _, given = auth.partition(b" ")
            if scheme.lower() != b"bearer" or not secrets.compare_digest(given.strip(), token):
                await _send_status(send, 401, "Unauthorized", [(b"www-authenticate", b'Bearer realm="slaplan"')])
                return
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await _send_status(send, 413, f"the request body is larger than {limit} bytes")
            return
        if scope["method"] in MUTATING:
            body, too_large = await _read_body(receive, limit)
            if too_large:
                await _send_status(send, 413, f"the request body is larger than {limit} bytes")
                return
            receive = _replay(body, receive)
        await app(scope, receive, send)

    return asgi


async def _read_body(receive, limit: int) -> tuple[bytes, bool]:
    """The whole body, or (partial, True) as soon as it passes ``limit`` bytes."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return b"", True
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), False


def _replay(body: bytes, receive):
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
