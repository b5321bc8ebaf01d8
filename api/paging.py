"""List chunking as kube-apiserver does it: ``limit`` and an opaque ``continue`` token.

A token is base64url-encoded JSON naming the resource version of the list's first page and the
key (namespace, name) of the last object sent, and the count of the objects after it as that page
reported it (``remainingItemCount``; counted once, on the first page, and carried on less each
page's objects, so a page's cost does not grow with the list's length); the next page starts after that key, so pages
follow (namespace, name) order with no object listed twice and none skipped that existed
throughout. Every page reports the first page's resource version. A token whose version the
change history no longer reaches (a watch from it would fail too) is answered 410 ``Expired``
with a fresh token that goes on from the same key, as kube-apiserver answers.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from api.errors import ApiError

TOKEN_VERSION = 1


@dataclass(frozen=True)
class Continue:
    """Where a list goes on: after ``key`` (namespace, name), at the first page's ``resource_version``,
    with ``remaining`` objects after it as the page that issued it counted them (None: not known)."""

    resource_version: int
    key: tuple[str, str]
    remaining: int | None = None


def encode(token: Continue) -> str:
    """The opaque token a client sends back as ``continue``."""
    payload = {"v": TOKEN_VERSION, "rv": token.resource_version, "ns": token.key[0], "name": token.key[1]}
    if token.remaining is not None:
        payload["n"] = token.remaining
    raw = json.dumps(payload, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode(text: str, namespace: str | None) -> Continue:
    """The token ``text`` of a list in ``namespace`` (None: all namespaces); 400 naming
    ``continue`` when it is not one this server issued for such a list."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        payload = json.loads(raw)
    except (binascii.Error, ValueError):
        raise _invalid("it is not a token this server issued") from None
    if not isinstance(payload, dict) or payload.get("v") != TOKEN_VERSION:
        raise _invalid("it is not a token this server issued")
    version, ns, name = payload.get("rv"), payload.get("ns"), payload.get("name")
    if not (isinstance(version, int) and not isinstance(version, bool) and version > 0):
        raise _invalid("it names no resource version")
    if not (isinstance(ns, str) and isinstance(name, str)):
        raise _invalid("it names no object")
    remaining = payload.get("n")
    if remaining is not None and not (isinstance(remaining, int) and not isinstance(remaining, bool)
                                      and remaining > 0):
        raise _invalid("its count of the objects left is not a positive integer")
    if namespace is not None and ns != namespace:
        raise _invalid(f'it continues a list of another namespace than "{namespace}"')
    return Continue(resource_version=version, key=(ns, name), remaining=remaining)


def expired(token: Continue, latest: int) -> ApiError:
    """410 Expired for ``token``, carrying a token that goes on from the same key at the ``latest``
    version (the rest of the list then reflects changes made since the first page)."""
    message = (
        f"the continue token is too old: resource version {token.resource_version} is older than the kept "
        "history, so the list cannot go on consistently; start a new list, or go on with the token in this "
        "Status's metadata (objects changed since the first page then appear as they are now)"
    )
    return ApiError(410, message, reason="Expired", metadata={"continue": encode(Continue(latest, token.key))})


def _invalid(why: str) -> ApiError:
    message = f"continue key is not valid: {why}"
    return ApiError(400, message, details={"causes": [{"reason": "FieldValueInvalid", "message": message,
                                                       "field": "continue"}]})
