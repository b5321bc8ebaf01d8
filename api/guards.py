"""ASGI guards in front of the app: the Host a request names, writes only from the server's own
pages (see ``api.origins``) and with the bearer token when one is set (or on loopback), JSON or
YAML write bodies of bounded size, and request metrics."""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from api.errors import status_body
from api.objects import YAML_TYPES
from api.origins import cross_origin, host_allowed, is_loopback, served_hosts
from infra.settings import Settings

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Probes and scrapers address the pod by its IP: these reads answer under any Host.
ANY_HOST_READS = frozenset({"/healthz", "/readyz", "/metrics"})
PROBES = frozenset({"/healthz", "/readyz"})  # answered without the token even when reads need it
BAD_HOST = "the Host header names a host this server does not answer to (SLAPLAN_ALLOWED_HOSTS lists those it does)"
UNAUTHENTICATED_WRITE = (
    "Forbidden: this server listens on a non-loopback address and has no API token, so anyone who can reach it "
    "could write: set SLAPLAN_API_TOKEN, or SLAPLAN_ALLOW_UNAUTHENTICATED_WRITES=true to allow it"
)


async def _send_status(send, code: int, message: str, extra_headers: list | None = None) -> None:
    body = json.dumps(status_body(code, message)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": code, "headers": headers + (extra_headers or [])})
    await send({"type": "http.response.body", "body": body})


def body_type_accepted(content_type: str) -> bool:
    """Whether a write body of this Content-Type is read: JSON (``application/json`` and the
    ``+json`` patch types) or YAML, as kube-apiserver reads them; no type at all is JSON, as there
    (the ``kubernetes`` client sends none on create). The types a page of another site can send
    without asking first (text/plain, form encodings) are not among them."""
    media = content_type.split(";")[0].strip().lower()
    json_type = media in ("", "application/json") or (media.startswith("application/") and media.endswith("+json"))
    return json_type or media in YAML_TYPES


def guarded(app, settings: Settings, metrics: Any = None, *, listen_host: str = "127.0.0.1"):
    """Wrap an ASGI ``app``: 400 for a Host not among ``settings.allowed_hosts`` (or
    ``listen_host``), 403 for a write from another origin, 401 without the token on mutating calls
    (when a token is set; on every call but the probes when ``settings.require_token_for_reads``),
    403 for a write without one when ``listen_host`` is not loopback (unless
    ``settings.allow_unauthenticated_writes``), 413 for bodies over ``settings.max_body_bytes``,
    415 for a write body that is not JSON or YAML; and count every request in ``metrics``."""
    token = settings.api_token.get_secret_value().encode() if settings.api_token else None
    limit = settings.max_body_bytes
    hosts = served_hosts(settings.allowed_hosts, listen_host)
    open_writes = token is not None or is_loopback(listen_host) or settings.allow_unauthenticated_writes
    closed_reads = settings.require_token_for_reads

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

    def refusal(method: str, path: str, headers: dict[str, str]) -> tuple[int, str, list] | None:
        """(status code, message, extra headers) refusing a request by its method, path and
        (lower-case) headers alone, or None to go on."""
        writes = method in MUTATING
        if not (path in ANY_HOST_READS and not writes) and not host_allowed(headers.get("host", ""), hosts):
            return 400, BAD_HOST, []
        where = cross_origin(headers, settings.trusted_origins) if writes else None
        if where is not None:
            return 403, (f"Forbidden: writes from another origin are refused ({where}); "
                         "SLAPLAN_TRUSTED_ORIGINS lists origins whose pages may write"), []
        if token is not None and (writes or (closed_reads and path not in PROBES)):
            scheme, _, given = headers.get("authorization", "").encode("latin-1").partition(b" ")
            if scheme.lower() != b"bearer" or not secrets.compare_digest(given.strip(), token):
                return 401, "Unauthorized", [(b"www-authenticate", b'Bearer realm="slaplan"')]
        if writes and not open_writes:
            return 403, UNAUTHENTICATED_WRITE, []
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            return 413, f"the request body is larger than {limit} bytes", []
        return None

    async def _guarded_call(scope, receive, send):
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        refused = refusal(scope["method"], scope["path"], headers)
        if refused is not None:
            await _send_status(send, *refused)
            return
        if scope["method"] in MUTATING:
            body, too_large = await _read_body(receive, limit)
            if too_large:
                await _send_status(send, 413, f"the request body is larger than {limit} bytes")
                return
            content_type = headers.get("content-type", "")
            if body.strip() and not body_type_accepted(content_type):
                await _send_status(send, 415, f'the body\'s media type "{content_type}" is not supported: send '
                                              "application/json or application/yaml")
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
