"""DGDR documents from text: one or many, YAML or JSON, each checked to be a DGDR we read."""

from __future__ import annotations

import json
from typing import Any

import yaml

from planner.request.errors import Causes, RequestError
from planner.request.loaders import DuplicateKey, load_yaml, loads_json
from planner.request.parse import parse_dgdr
from planner.request.versions import type_causes
from planner.types import PlanRequest

_UNREADABLE = "nested too deeply, or holds a number or date out of range"


def load_documents(text: str, source: str) -> list[dict[str, Any]]:
    """Read one or many DGDR documents from YAML (``---``-separated) or JSON text.

    JSON may be one object or an array of objects. Empty documents are skipped. Each document
    must be a mapping with ``apiVersion`` in :data:`API_VERSIONS` and ``kind``
    ``DynamoGraphDeploymentRequest``; problems of the later documents name them
    ("document 2"). ``source`` (a file name, "<stdin>", …) is only used in messages.
    YAML is read as :class:`DocumentLoader` reads it (``load_yaml``: no aliases, no duplicate keys, no base-60
    numbers). Raises :class:`RequestError`; malformed text reports its 1-based line number.
    """
    docs = [d for d in _parse_text(text, source) if d is not None]
    if not docs:
        raise RequestError([("", "no documents found")], source=source)
    many = len(docs) > 1
    causes: Causes = []
    for i, doc in enumerate(docs, start=1):
        tag = f" (document {i})" if many else ""
        if not isinstance(doc, dict):
            causes.append(("", f"document {i} must be a mapping, got {type(doc).__name__}"))
            continue
        causes.extend((path, msg + tag) for path, msg in type_causes(doc))
    if causes:
        raise RequestError(causes, source=source)
    return docs


def _parse_text(text: str, source: str) -> list[Any]:
    """The documents of ``text`` as parsed, JSON when it starts like JSON, else YAML."""
    if text.lstrip().startswith(("{", "[")):
        try:
            loaded = loads_json(text)
        except json.JSONDecodeError as exc:
            msg = f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            raise RequestError([("", msg)], source=source, line=exc.lineno) from None
        except DuplicateKey as exc:
            raise RequestError([("", f"invalid JSON: {exc}")], source=source) from None
        except (RecursionError, ValueError):
            raise RequestError([("", _UNREADABLE)], source=source) from None
        return loaded if isinstance(loaded, list) else [loaded]
    try:
        return load_yaml(text)
    except (RecursionError, ValueError):
        raise RequestError([("", _UNREADABLE)], source=source) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        where = f" at line {line}, column {mark.column + 1}" if mark is not None else ""
        raise RequestError([("", f"invalid YAML{where}: {problem}")], source=source, line=line) from None


def parse_documents(text: str, source: str) -> list[PlanRequest]:
    """:func:`load_documents` then :func:`parse_dgdr` on each; all problems raised together."""
    docs = load_documents(text, source)
    out: list[PlanRequest] = []
    causes: Causes = []
    for i, doc in enumerate(docs, start=1):
        try:
            out.append(parse_dgdr(doc))
        except RequestError as exc:
            tag = f" (document {i})" if len(docs) > 1 else ""
            causes.extend((p, m + tag) for p, m in exc.causes)
    if causes:
        raise RequestError(causes, source=source)
    return out
