"""Kubernetes object shapes: body parsing, metadata rules, rendering stored resources, merge patch."""

from __future__ import annotations

import json
import math
import re
import secrets
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from infra.resources import Resource
    from planner.request import RefusedYAML

YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "application/apply-patch+yaml")
# Matched with ``fullmatch``: ``$`` would also match before a final newline.
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_GENERATED_LENGTH = 5
MAX_DEPTH = 100  # objects and arrays nested in a body; far below where Python's recursion limit bites
_INT64 = range(-(2**63), 2**63)


class BadBody(ValueError):
    """A body that is not a JSON or YAML object."""


UTF8_BOM = b"\xef\xbb\xbf"


def _where(exc: Exception) -> str:
    """What a decoder found wrong, and where (line and column, or byte offset), in a few words."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 at byte {exc.start}"
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno}, column {exc.colno}"
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or "a syntax error"
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else problem


def parse_body(raw: bytes, content_type: str | None, *, array: bool = False) -> Any:
    """The body as an object of plain JSON values, read as YAML or JSON by ``content_type``
    (with ``array``: an array, a JSON patch's operations, is taken too).

    BadBody (the API answers 400) for text that does not parse, a body that is not an object, and
    values JSON cannot carry or that would not survive storage (see ``_check_plain``)."""
    from planner.request import DocumentLoader, DuplicateKey, RefusedYAML, loads_json

    ctype = (content_type or "application/json").split(";")[0].strip().lower()
    kind = "YAML" if ctype in YAML_TYPES else "JSON"
    if raw.startswith(UTF8_BOM):
        raise BadBody(f"the body is not valid {kind}: it starts with a UTF-8 byte order mark (EF BB BF); "
                      "send the text without it")
    try:
        text = raw.decode("utf-8")
        data = yaml.load(text, Loader=DocumentLoader) if kind == "YAML" else loads_json(text)
    except RefusedYAML as exc:
        raise BadBody(_refused("the body", exc)) from None
    except DuplicateKey as exc:
        raise BadBody(f"the body: {exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError, yaml.YAMLError) as exc:
        raise BadBody(f"the body is not valid {kind}: {_where(exc)}") from None
    except RecursionError:
        raise BadBody(f"the body is nested too deeply (at most {MAX_DEPTH} levels)") from None
    except ValueError:  # an integer of more than 4300 digits, a YAML date like 2024-13-45
        raise BadBody(f"the body is not valid {kind}: a number or date in it is out of range") from None
    if not isinstance(data, dict) and not (array and isinstance(data, list)):
        raise BadBody("the body must be an object" + (" or an array" if array else ""))
    _check_plain(data, "", 1)
    return data


class PlainDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    """``yaml.SafeDumper`` (libyaml's emitter where PyYAML has it: the same text, written in C) that
    writes every value out, never an anchor and alias for a value met twice: what slaplan writes,
    the loader that reads manifests and bodies (no aliases) reads back."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def manifests_yaml(objects: list[Any], **options: Any) -> str:
    """``objects`` as a YAML stream, one document each, keys in their order (``options``: yaml.dump's)."""
    return yaml.dump_all(objects, Dumper=PlainDumper, sort_keys=False, **options)


def load_yaml_documents(text: str) -> list[Any]:
    """The non-empty YAML documents of ``text``, each checked as ``parse_body`` checks a body.

    Raises ``yaml.YAMLError`` for text that does not parse and BadBody for the rest."""
    from planner.request import DocumentLoader, RefusedYAML

    try:
        docs = [doc for doc in yaml.load_all(text, Loader=DocumentLoader) if doc is not None]
    except RefusedYAML as exc:
        raise BadBody(_refused("the text", exc)) from None
    except RecursionError:
        raise BadBody(f"the text is nested too deeply (at most {MAX_DEPTH} levels)") from None
    except ValueError:  # an integer or date out of range
        raise BadBody("a number or date in the text is out of range") from None
    for doc in docs:
        _check_plain(doc, "", 1)
    return docs


def _refused(what: str, exc: RefusedYAML) -> str:
    """The message for YAML that ``planner.request.DocumentLoader`` refuses (an alias, a duplicate key),
    which the API and ``slaplan plan`` read alike."""
    mark = exc.problem_mark
    return f"{what}, line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"


def _check_plain(value: Any, path: str, depth: int) -> None:
    """BadBody unless ``value`` is plain JSON: objects with string keys, arrays (at most MAX_DEPTH
    levels of both), strings UTF-8 can encode (no lone surrogates), finite floats, 64-bit integers,
    booleans and null; not YAML's dates, binary data, sets and such (quoted, they are strings).
    ``path`` (``spec.profilingConfig.config.x``) names ``value`` in the message; ``depth`` is its level."""
    where = path or "the body"
    if isinstance(value, dict | list) and depth > MAX_DEPTH:
        raise BadBody(f"{where}: nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise BadBody(f"{where}: keys must be strings, not {type(key).__name__}")
            if not _encodable(key):
                raise BadBody(f"{where}: the key {key!r} is not valid Unicode (it has a lone surrogate)")
            _check_plain(item, f"{path}.{key}" if path else key, depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_plain(item, f"{path}[{i}]", depth + 1)
    else:
        _check_scalar(value, where)


def _check_scalar(value: Any, where: str) -> None:
    """BadBody unless ``value`` is a JSON string, number, boolean or null (see ``_check_plain``)."""
    if isinstance(value, str):
        if not _encodable(value):
            raise BadBody(f"{where}: the string is not valid Unicode (it has a lone surrogate)")
    elif isinstance(value, int) and not isinstance(value, bool):
        if value not in _INT64:
            raise BadBody(f"{where}: the integer is outside the 64-bit range")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise BadBody(f"{where}: {value} is not a number JSON allows (numbers must be finite)")
    elif not isinstance(value, bool) and value is not None:
        raise BadBody(
            f"{where}: a {type(value).__name__} value is not allowed: only strings, numbers, booleans, "
            "null, arrays and objects (quote it to make it a string)"
        )


def _encodable(text: str) -> bool:
    """True unless ``text`` has a lone UTF-16 surrogate (``"\\udfff"``), which UTF-8 cannot encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def generate_name(prefix: Any) -> str:
    """A name from ``metadata.generateName``: the prefix and five random characters; "" for a prefix
    no valid name can start with (``metadata_causes`` reports it)."""
    if not _is_name_prefix(prefix):
        return ""
    return prefix + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(_GENERATED_LENGTH))


def _is_name_prefix(prefix: Any) -> bool:
    """True when every name ``generate_name`` makes from ``prefix`` is a valid subdomain."""
    return isinstance(prefix, str) and is_subdomain(prefix + _GENERATE_ALPHABET[0] * _GENERATED_LENGTH)


def is_subdomain(name: str) -> bool:
    """A DNS-1123 subdomain: what Kubernetes requires of most object names (the rule requests use)."""
    from planner.request.names import is_subdomain as rule  # on use: the API starts without the planner

    return rule(name)


def is_label(name: str) -> bool:
    """A DNS-1123 label (namespaces; the rule requests use)."""
    from planner.request.names import is_label as rule  # on use: the API starts without the planner

    return rule(name)


SHOWN_CHARS = 64  # characters of a user's key repeated in a message; the rest is counted


def _shown(text: str) -> str:
    """``text`` quoted for a message, cut to its first SHOWN_CHARS characters when longer."""
    return repr(text) if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]!r}… ({len(text)} characters)"


def metadata_causes(metadata: dict[str, Any]) -> list[tuple[str, str]]:
    """What is wrong with the user-settable metadata (name or generateName, labels, annotations)."""
    causes = _name_causes(metadata)
    for field in ("labels", "annotations"):
        value = metadata.get(field)
        if value is None:
            continue
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            causes.append((f"metadata.{field}", "Invalid value: must be a map of strings to strings"))
            continue
        for key in value:
            if not _qualified_name_ok(key):
                causes.append((f"metadata.{field}", f"Invalid value: {_shown(key)} is not a valid qualified name"))
        if field == "labels":
            for key, val in value.items():
                if len(val) > 63 or not _LABEL_VALUE.fullmatch(val):
                    causes.append(("metadata.labels", f"Invalid value: the value of {_shown(key)} is not a valid label value"))
        elif sum(len(k) + len(v) for k, v in value.items()) > 256 * 1024:
            causes.append(("metadata.annotations", "Too long: may not be more than 262144 bytes"))
    return causes


def _name_causes(metadata: dict[str, Any]) -> list[tuple[str, str]]:
    """What is wrong with ``metadata.generateName`` or else with ``metadata.name`` (the one given or
    generated: ``generate_name`` makes none from a bad prefix, so that is reported once)."""
    from planner.request.names import MAX_SUBDOMAIN_LENGTH

    prefix = metadata.get("generateName")
    if prefix not in (None, "") and not _is_name_prefix(prefix):
        return [("metadata.generateName", "Invalid value: must be a string that starts a lowercase RFC 1123 "
                 f"subdomain, at most {MAX_SUBDOMAIN_LENGTH - _GENERATED_LENGTH} characters")]
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return [("metadata.name", "Required value: name or generateName is required")]
    if not is_subdomain(name):
        return [("metadata.name", "Invalid value: must be a lowercase RFC 1123 subdomain")]
    return []


def _qualified_name_ok(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and not is_subdomain(prefix):
        return False
    return 0 < len(name) <= 63 and bool(_LABEL_NAME.fullmatch(name))


def render(resource: Resource, version: str | None = None) -> dict[str, Any]:
    """The stored resource as a Kubernetes object (see ``infra.resources.to_object``)."""
    from infra.resources import to_object  # the database's models: not for the CLI's YAML helpers

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
