"""Reading back what a test stored through the ``sessions`` fixture."""

from __future__ import annotations


def stored_status(sessions, uid: str) -> dict:
    """The status of the stored resource ``uid``."""
    from infra.db import session_scope
    from infra.resources import get_resource_by_uid

    with session_scope(sessions) as session:
        return get_resource_by_uid(session, uid).status
