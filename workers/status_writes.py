"""A worker's writes of a resource's status, guarded by the resource version it read."""

from __future__ import annotations

from typing import Any

from infra.db import SessionFactory, session_scope, statement_sessions
from infra.resources import Conflict, NotFound, Resource, update_status


def save_status(sessions: SessionFactory, resource: Resource, status: dict[str, Any]) -> Resource:
    """Write ``status``; raises Conflict when the resource changed since it was read, NotFound when gone.

    One statement, committed as it runs on PostgreSQL (``infra.db.statement_sessions``): a worker,
    niced below the API, never holds the version counter every writer waits for while it is off
    the CPU between its write and its commit."""
    with session_scope(statement_sessions(sessions)) as session:
        return update_status(session, status, uid=resource.uid, expected_version=resource.resource_version)


def finish(sessions: SessionFactory, resource: Resource, status: dict[str, Any], outcome: str) -> str:
    """Write a final ``status`` and return ``outcome``, or "superseded" when the resource changed or went."""
    try:
        save_status(sessions, resource, status)
    except (Conflict, NotFound):
        return "superseded"
    return outcome
