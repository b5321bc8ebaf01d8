"""JSON Patch (RFC 6902, ``application/json-patch+json``), as ``kubectl patch --type json`` sends it,
and kubectl itself when it moves an object's managed fields from client-side to server-side apply."""

from __future__ import annotations

import copy
from typing import Any

OPS = ("add", "remove", "replace", "move", "copy", "test")


class PatchError(ValueError):
    """An operation that is malformed or cannot be carried out; the message names it."""


def _tokens(pointer: Any, where: str) -> list[str]:
    """The reference tokens of a JSON Pointer (RFC 6901): ``/a~1b/0`` → ``["a/b", "0"]``."""
    if not isinstance(pointer, str) or (pointer and not pointer.startswith("/")):
        raise PatchError(f"{where}: not a JSON pointer: {pointer!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _index(container: list, token: str, where: str, *, append: bool) -> int:
    if append and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"{where}: not an array index: {token!r}")
    index = int(token)
    if index > len(container) - (0 if append else 1):
        raise PatchError(f"{where}: index {index} is out of range")
    return index


def _parent(doc: Any, tokens: list[str], where: str) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, where, append=False)]
        else:
            raise PatchError(f"{where}: the path does not exist")
    return node


def _get(doc: Any, tokens: list[str], where: str) -> Any:
    if not tokens:
        return doc
    parent, last = _parent(doc, tokens, where), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, where, append=False)]
    raise PatchError(f"{where}: the path does not exist")


def _add(doc: Any, tokens: list[str], value: Any, where: str) -> Any:
    if not tokens:
        return value
    parent, last = _parent(doc, tokens, where), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, where, append=True), value)
    else:
        raise PatchError(f"{where}: the path does not exist")
    return doc


def _remove(doc: Any, tokens: list[str], where: str) -> Any:
    if not tokens:
        raise PatchError(f"{where}: cannot remove the whole document")
    parent, last = _parent(doc, tokens, where), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, where, append=False)]
    else:
        raise PatchError(f"{where}: the path does not exist")
    return doc


def apply_patch(doc: Any, operations: Any) -> Any:
    """``doc`` (not changed) with ``operations`` applied in order; PatchError naming the first one
    that is malformed, fails its ``test`` or names a path that is not there."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch is a list of operations")
    doc = copy.deepcopy(doc)
    for i, op in enumerate(operations):
        where = f"operation {i}"
        if not isinstance(op, dict) or op.get("op") not in OPS:
            raise PatchError(f"{where}: op must be one of {', '.join(OPS)}")
        where = f"operation {i} ({op['op']} {op.get('path')!r})"
        tokens = _tokens(op.get("path"), where)
        if op["op"] in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"{where}: value is required")
        if op["op"] == "add":
            doc = _add(doc, tokens, copy.deepcopy(op["value"]), where)
        elif op["op"] == "remove":
            doc = _remove(doc, tokens, where)
        elif op["op"] == "replace":
            _get(doc, tokens, where)  # must exist
            doc = _add(_remove(doc, tokens, where), tokens, copy.deepcopy(op["value"]), where) if tokens else op["value"]
        elif op["op"] == "test":
            if _get(doc, tokens, where) != op["value"]:
                raise PatchError(f"{where}: the test failed")
        else:  # move, copy
            source = _tokens(op.get("from"), where)
            value = copy.deepcopy(_get(doc, source, where))
            if op["op"] == "move":
                if tokens[:len(source)] == source and tokens != source:
                    raise PatchError(f"{where}: cannot move a value into itself")
                doc = _remove(doc, source, where)
            doc = _add(doc, tokens, value, where)
    return doc
