"""Kubernetes object shapes: body parsing, metadata rules, rendering stored resources, merge patch."""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

import yaml

from infra.resources import Resource, to_object

YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "application/apply-patch+yaml")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


class BadBody(ValueError):
    """A body that is not a JSON or YAML object."""


def parse_body(raw: bytes, content_type: str | None) -> dict[str, Any]:
    ctype = (content_type or "application/json").split(";")[0].strip().lower()
    try:
        text = raw.decode("utf-8")
        data = yaml.safe_load(text) if ctype in YAML_TYPES else json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError, yaml.YAMLError) as exc:
        kind = "YAML" if ctype in YAML_TYPES else "JSON"
        raise BadBody(f"the body is not valid {kind}: {type(exc).__name__}") from None
    if not isinstance(data, dict):
        raise BadBody("the body must be an object")
    return data


def generate_name(prefix: str) -> str:
    return prefix + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))


def is_subdomain(name: str) -> bool:
    """A DNS-1123 subdomain: what Kubernetes requires of most object names."""
    return len(name) <= 253 and bool(_SUBDOMAIN.match(name))


def is_label(name: str) -> bool:
    """A DNS-1123 label (namespaces)."""
    return len(name) <= 63 and bool(re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name))


def metadata_causes(metadata: dict[str, Any]) -> list[tuple[str, str]]:
    """What is wrong with the user-settable metadata (name, labels, annotations)."""
    causes: list[tuple[str, str]] = []
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        causes.append(("metadata.name", "Required value: name or generateName is required"))
    elif not is_subdomain(name):
        causes.append(("metadata.name", "Invalid value: must be a lowercase RFC 1123 subdomain"))
    for field in ("labels", "annotations"):
        value = metadata.get(field)
        if value is None:
            continue
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            causes.append((f"metadata.{field}", "Invalid value: must be a map of strings to strings"))
            continue
        for key in value:
            if not _qualified_name_ok(key):
                causes.append((f"metadata.{field}", f"Invalid value: {key!r} is not a valid qualified name"))
        if field == "labels":
            for key, val in value.items():
                if len(val) > 63 or not _LABEL_VALUE.match(val):
                    causes.append(("metadata.labels", f"Invalid value: the value of {key!r} is not a valid label value"))
        elif sum(len(k) + len(v) for k, v in value.items()) > 256 * 1024:
            causes.append(("metadata.annotations", "Too long: may not be more than 262144 bytes"))
    return causes


def _qualified_name_ok(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and not is_subdomain(prefix):
        return False
    return 0 < len(name) <= 63 and bool(_LABEL_NAME.match(name))


def render(resource: Resource, version: str | None = None) -> dict[str, Any]:
    """The stored resource as a Kubernetes object (see ``infra.resources.to_object``)."""
    return to_object(resource, version)


def dig(d: Any, *keys: str) -> Any:
    """``d[k1][k2]…``, or None when a level is absent or not an object."""
    for key in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out
