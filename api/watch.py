"""``?watch=true`` on list endpoints: a stream of newline-delimited JSON ``WatchEvent``s, as
kube-apiserver serves them.

Events come from the recorded history of changes (``infra.events``), polled from the
database, so changes written by any process (an embedded worker's child, a ``slaplan
worker`` elsewhere) appear. Without ``resourceVersion`` (or with ``0``), or with
``sendInitialEvents=true``, the stream starts with an ADDED event per matching object (then,
with bookmarks allowed, a BOOKMARK annotated ``k8s.io/initial-events-end``, as streaming
lists expect); with a version, it carries every change after it, or a single ERROR event with
a 410 ``Expired`` Status when the history no longer reaches back that far. A field selector (``metadata.name``, ``metadata.namespace``) and a label selector are
applied to each change: an object that starts matching the labels arrives as ADDED and one
that stops matching as DELETED. ``allowWatchBookmarks`` adds BOOKMARK events
(only ``metadata.resourceVersion``) after a quiet minute and just before the stream ends at
``timeoutSeconds``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from api.errors import status_body
from api.field_selector import Requirement as FieldRequirement
from api.field_selector import fields_match
from infra import events
from infra import resources as repo
from infra.labels import Requirement, matches

POLL_S = 0.25  # how often the history is read, seconds
BOOKMARK_EVERY_S = 60.0  # quiet time after which a BOOKMARK is sent, seconds
DEFAULT_TIMEOUT_S = 1800  # a watch without timeoutSeconds ends after this, seconds (clients re-watch)
MAX_TIMEOUT_S = (2**63 - 1) // 10**9  # the most seconds a Kubernetes (Go) duration holds
PAGE = 500  # changes read per poll at most

Present = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class WatchRequest:
    """What to watch: a kind in one namespace (or all), a parsed selector, where to start."""

    group: str
    plural: str
    api_version: str
    kind: str
    namespace: str | None
    selector: tuple[Requirement, ...]
    fields: tuple[FieldRequirement, ...]  # field selector (metadata.name / metadata.namespace)
    resource_version: int | None  # None or 0: from now
    send_initial: bool  # start with an ADDED event per current object
    timeout_s: float
    bookmarks: bool


def _line(kind: str, obj: dict[str, Any]) -> bytes:
    return (json.dumps({"type": kind, "object": obj}, separators=(",", ":")) + "\n").encode()


def _event_type(change: events.Change, selector: tuple[Requirement, ...]) -> str | None:
    """What a watcher with ``selector`` sees of ``change`` (None: nothing)."""
    now = matches(selector, change.labels)
    if change.type != "MODIFIED" or change.prior_labels is None:
        return change.type if now else None
    before = matches(selector, change.prior_labels)
    if now and before:
        return "MODIFIED"
    if now:
        return "ADDED"
    return "DELETED" if before else None


def _start(sessions, watch: WatchRequest) -> tuple[int, list[dict[str, Any]], dict[str, int], int]:
    """(version to stream after, initial objects, their versions by uid, the version the history
    was compacted through when the requested one is older than that, else 0)."""
    with sessions() as session:
        latest = events.latest_version(session)  # read first: nothing committed after it is missed
        if not watch.send_initial:
            if not watch.resource_version:
                return latest, [], {}, 0  # from now on
            compacted = events.compacted_through(session)
            return watch.resource_version, [], {}, compacted if watch.resource_version < compacted else 0
        items = repo.list_resources(session, watch.group, watch.plural, watch.namespace, watch.selector)
    objects = [obj for obj in map(repo.to_object, items) if fields_match(watch.fields, obj)]
    return latest, objects, {r.uid: r.resource_version for r in items}, 0


def _poll(sessions, watch: WatchRequest, after: int) -> tuple[int, list[events.Change]]:
    """Changes committed after ``after``, and the version they bring the watcher to."""
    with sessions() as session:
        upto = events.latest_version(session)
        found = events.changes(session, watch.group, watch.plural, watch.namespace, after=after, upto=upto, limit=PAGE)
    if len(found) == PAGE:  # more to read: the next poll continues from the last one read
        upto = found[-1].version
    return upto, found


async def stream(sessions, watch: WatchRequest, present: Present) -> AsyncIterator[bytes]:
    """The events of ``watch`` as NDJSON lines; objects pass through ``present`` (conversion)."""
    deadline = time.monotonic() + watch.timeout_s
    after, initial, listed, compacted = await run_in_threadpool(_start, sessions, watch)
    if compacted:
        message = f"too old resource version: {watch.resource_version} (the history starts after {compacted})"
        yield _line("ERROR", status_body(410, message, reason="Expired"))
        return
    for obj in initial:
        yield _line("ADDED", present(obj))
    if watch.send_initial and watch.bookmarks:
        yield _bookmark(watch, after, {"k8s.io/initial-events-end": "true"})
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        upto, found = await run_in_threadpool(_poll, sessions, watch, after)
        for change in found:
            uid = change.object["metadata"]["uid"]
            if change.version <= listed.get(uid, 0) or not fields_match(watch.fields, change.object):
                continue  # already in the initial list, or not selected
            kind = _event_type(change, watch.selector)
            if kind is not None:
                yield _line(kind, present(change.object))
                quiet_since = time.monotonic()
        after = max(after, upto)
        if watch.bookmarks and time.monotonic() - quiet_since >= BOOKMARK_EVERY_S:
            yield _bookmark(watch, after)
            quiet_since = time.monotonic()
        if not found:
            await asyncio.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
    if watch.bookmarks:
        yield _bookmark(watch, after)


def _bookmark(watch: WatchRequest, version: int, annotations: dict[str, str] | None = None) -> bytes:
    metadata: dict[str, Any] = {"resourceVersion": str(version)}
    if annotations:
        metadata["annotations"] = annotations
    return _line("BOOKMARK", {"apiVersion": watch.api_version, "kind": watch.kind, "metadata": metadata})


def watch_response(sessions, watch: WatchRequest, present: Present) -> StreamingResponse:
    return StreamingResponse(stream(sessions, watch, present), media_type="application/json")
