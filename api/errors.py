"""Errors as Kubernetes ``Status`` objects (``kind: Status``, ``apiVersion: v1``)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger(__name__)
READ_ONLY_SQLSTATE = "25006"  # PostgreSQL: read_only_sql_transaction (a standby, or a read-only database)

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    414: "RequestURITooLong",
    415: "UnsupportedMediaType",
    422: "Invalid",
    431: "RequestHeaderFieldsTooLarge",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """Raised by routes; rendered as a ``Status`` with ``code``, ``reason`` and ``details``."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.details = details
        self.metadata = metadata or {}


def status_body(
    code: int, message: str, reason: str | None = None, details: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> dict:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": metadata or {},
        "status": "Success" if code < 400 else "Failure",
        "message": message,
        "reason": reason or ("" if code < 400 else _REASONS.get(code, "Unknown")),
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def status_response(
    code: int, message: str, reason: str | None = None, details: dict | None = None, headers=None, metadata=None
):
    return JSONResponse(status_body(code, message, reason, details, metadata), status_code=code, headers=headers)


def not_found(plural: str, name: str, group: str) -> ApiError:
    return ApiError(404, f'{plural}.{group} "{name}" not found', details={"name": name, "group": group, "kind": plural})


def already_exists(plural: str, name: str, group: str) -> ApiError:
    return ApiError(
        409,
        f'{plural}.{group} "{name}" already exists',
        reason="AlreadyExists",
        details={"name": name, "group": group, "kind": plural},
    )


def conflict(plural: str, name: str, group: str, message: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {plural}.{group} "{name}": {message}',
        reason="Conflict",
        details={"name": name, "group": group, "kind": plural},
    )


def cause_reason(message: str) -> str:
    """The Kubernetes cause type for a field message."""
    lowered = message.lower()
    if lowered.startswith("required") or lowered == "field required":
        return "FieldValueRequired"
    if lowered.startswith(("unsupported value", "must be one of")):
        return "FieldValueNotSupported"
    if lowered.startswith("forbidden") or "immutable" in lowered:
        return "FieldValueForbidden"
    if lowered.startswith("unknown field"):
        return "FieldValueInvalid"
    return "FieldValueInvalid"


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 Invalid naming each bad field."""
    causes = list(dict.fromkeys(causes))  # the same problem found twice is reported once
    listed = ", ".join(f"{field}: {message}" for field, message in causes)
    return ApiError(
        422,
        f'{kind}.{group} "{name}" is invalid: [{listed}]',
        details={
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [{"reason": cause_reason(m), "message": m, "field": f} for f, m in causes],
        },
    )


def database_problem(exc: DBAPIError) -> str | None:
    """What a 503 says about a database error the service recognises (one that cannot be written,
    or cannot be used at the moment); None for any other. The driver's own words stay out: they
    may name hosts and users."""
    orig = exc.orig
    sqlite_read_only = getattr(orig, "sqlite_errorname", "").startswith("SQLITE_READONLY")
    if sqlite_read_only or getattr(orig, "sqlstate", None) == READ_ONLY_SQLSTATE:
        return "the database cannot be written (it is read-only); try again when it is writable"
    if isinstance(exc, OperationalError):
        return "the database cannot be used at the moment; try again later"
    return None


def install_error_handlers(app: FastAPI) -> None:
    """Every error the app returns, ours or the framework's, is a ``Status``."""

    async def api_error(_request: Request, exc: ApiError):
        return status_response(exc.code, exc.message, exc.reason, exc.details, metadata=exc.metadata)

    async def http_error(_request: Request, exc: StarletteHTTPException):
        message = exc.detail if isinstance(exc.detail, str) else _REASONS.get(exc.status_code, "error")
        return status_response(exc.status_code, message, headers=getattr(exc, "headers", None))

    async def validation_error(_request: Request, exc: RequestValidationError):
        causes = [
            {"reason": "FieldValueInvalid", "message": e.get("msg", ""), "field": ".".join(str(p) for p in e["loc"])}
            for e in exc.errors()
        ]
        return status_response(400, "the request is malformed", details={"causes": causes})

    async def database_error(request: Request, exc: DBAPIError):
        message = database_problem(exc)
        if message is None:
            raise exc  # not one we recognise: the server's own 500, with the traceback in its log
        log.warning("%s %s: %s (%s: %s)", request.method, request.url.path, message, type(exc.orig).__name__, exc.orig)
        return status_response(503, message)

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(DBAPIError, database_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
