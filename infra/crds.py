"""Offline validation of custom resources against real CustomResourceDefinition schemas.

A CRD's ``openAPIV3Schema`` is a *structural* OpenAPI v3.0 schema with Kubernetes extensions.
``crd_schema`` turns one version of it into a JSON Schema (Draft 7) that rejects what the API
server would reject on create with strict field validation:

- objects with ``properties`` are closed (unknown fields rejected) unless they carry
  ``x-kubernetes-preserve-unknown-fields: true`` or an ``additionalProperties`` schema;
- ``nullable: true`` also admits ``null``; ``x-kubernetes-int-or-string`` admits integer or string;
- OpenAPI 3.0's boolean ``exclusiveMinimum``/``exclusiveMaximum`` become Draft 7 numbers.

The API server applies ``default:`` values before validating, so ``validate`` does too
(``apply_defaults``). CEL rules (``x-kubernetes-validations``) are then evaluated as the API
server does on create, by a CEL runtime with Kubernetes' extensions (``infra.k8s_cel``):
transition rules (``oldSelf``) do not apply to a create unless ``optionalOldSelf`` asks for them
with an empty ``oldSelf``; a rule the runtime cannot compile is an error naming it, never
skipped. ``cel_rules`` lists every rule of a CRD with what is done with it.
"""

from __future__ import annotations

import copy
import functools
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from infra.k8s_cel import CelCompileError, CelEvalError, compile_rule, evaluate

CRD_DIR_ENV = "SLAPLAN_CRD_DIR"

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Keywords that mean the same in OpenAPI v3.0 and JSON Schema Draft 7 (sub-schemas handled apart).
_PLAIN_KEYWORDS = (
    "type", "enum", "format", "minimum", "maximum", "multipleOf", "minLength", "maxLength",
    "pattern", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
    "required", "default", "const",
)

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


CrdDirs = Path | Sequence[Path]  # one folder of CRD files, or several searched together


class CRDNotFound(LookupError):
    """No CRD in the directory defines the object's group, kind and version."""


# --------------------------------------------------------------------------- loading

def load_crd(path: str | Path) -> dict:
    """Parse one CRD file (YAML; the first document that is a CustomResourceDefinition)."""
    with open(path, encoding="utf-8") as fh:
        docs = list(yaml.load_all(fh, Loader=_LOADER))
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
            return doc
    raise ValueError(f"{Path(path).name}: no CustomResourceDefinition in file")


@functools.lru_cache(maxsize=None)
def _load_crd_cached(path: str) -> dict:
    return load_crd(path)


def default_crd_dir() -> Path:
    """``$SLAPLAN_CRD_DIR`` if set, else ``shared/crds`` beside the repository root."""
    env = os.environ.get(CRD_DIR_ENV)
    if env:
        return Path(env)
    repo_root = Path(__file__).resolve().parent.parent
    return repo_root.parent / "shared" / "crds"


_HEAD_GROUP = re.compile(r"^\s+group:\s*['\"]?([\w.\-]+)", re.M)
_HEAD_KIND = re.compile(r"^\s+names:\s*\n(?:\s+.*\n)*?\s+kind:\s*['\"]?(\w+)", re.M)


def _crd_identity(path: Path) -> tuple[str, str] | None:
    """(group, kind) of a CRD file, read from its head without parsing the whole file."""
    with open(path, encoding="utf-8") as fh:
        head = fh.read(8192)
    if "CustomResourceDefinition" not in head:
        return None
    group, kind = _HEAD_GROUP.search(head), _HEAD_KIND.search(head)
    if group and kind:
        return group.group(1), kind.group(1)
    crd = _load_crd_cached(str(path))  # unusual layout: parse it all
    return crd["spec"]["group"], crd["spec"]["names"]["kind"]


@functools.lru_cache(maxsize=None)
def _crd_index(crd_dir: str) -> dict[tuple[str, str], tuple[str, ...]]:
    index: dict[tuple[str, str], list[str]] = {}
    for path in sorted(Path(crd_dir).glob("*.y*ml")):
        ident = _crd_identity(path)
        if ident:
            index.setdefault(ident, []).append(str(path))
    return {k: tuple(v) for k, v in index.items()}


def split_api_version(api_version: str) -> tuple[str, str]:
    """``"ome.io/v1beta1"`` → ``("ome.io", "v1beta1")``; core ``"v1"`` → ``("", "v1")``."""
    group, _, version = api_version.rpartition("/")
    return group, version


def _folders(crd_dir: CrdDirs | None) -> tuple[Path, ...]:
    """The folders ``crd_dir`` names (``default_crd_dir()`` when None)."""
    if crd_dir is None:
        return (default_crd_dir(),)
    if isinstance(crd_dir, (str, Path)):
        return (Path(crd_dir),)
    return tuple(Path(d) for d in crd_dir)


def find_crds(api_version: str, kind: str, crd_dir: CrdDirs | None = None) -> list[Path]:
    """CRD files in ``crd_dir`` (a folder or several) defining ``kind`` in the group and version
    of ``api_version``."""
    group, version = split_api_version(api_version)
    found = []
    for folder in _folders(crd_dir):
        for path in _crd_index(str(folder.resolve())).get((group, kind), ()):
            crd = _load_crd_cached(path)
            if any(v.get("name") == version for v in crd["spec"].get("versions", [])):
                found.append(Path(path))
    return found


def plural(api_version: str, kind: str, crd_dir: CrdDirs | None = None) -> str:
    """The resource name (``spec.names.plural``) of ``kind`` at ``api_version``; raises
    ``CRDNotFound`` when no CRD in ``crd_dir`` defines it."""
    files = find_crds(api_version, kind, crd_dir)
    if not files:
        raise CRDNotFound(f"no CRD for {kind} {api_version}")
    return _load_crd_cached(str(files[-1]))["spec"]["names"]["plural"]


def published_version(api_version: str, kind: str, crd_dir: CrdDirs | None = None) -> dict | None:
    """The ``spec.versions[]`` entry (``schema.openAPIV3Schema``, ``additionalPrinterColumns``, …)
    for ``kind`` at ``api_version`` in the last CRD file by name that defines it (the newer release
    of a project whose files are named by date), or None when none does."""
    files = find_crds(api_version, kind, crd_dir)
    if not files:
        return None
    _, version = split_api_version(api_version)
    crd = _load_crd_cached(str(files[-1]))
    return next(v for v in crd["spec"]["versions"] if v.get("name") == version)


# --------------------------------------------------------------------------- conversion

def _version_schema(crd: dict, version: str) -> dict:
    for v in crd["spec"].get("versions", []):
        if v.get("name") == version:
            schema = (v.get("schema") or {}).get("openAPIV3Schema")
            if schema is None:  # pre-v1 CRDs kept one schema for all versions
                schema = (crd["spec"].get("validation") or {}).get("openAPIV3Schema", {})
            return schema
    raise CRDNotFound(f"{crd['metadata']['name']} has no version {version!r}")


def convert_schema(node: dict) -> dict:
    """One OpenAPI v3.0 structural schema node (and its children) as JSON Schema Draft 7."""
    out: dict[str, Any] = {k: node[k] for k in _PLAIN_KEYWORDS if k in node}

    for key in ("minimum", "maximum"):  # OpenAPI 3.0 boolean exclusivity → Draft 7 numbers
        excl = "exclusiveM" + key[1:]
        if node.get(excl) is True and key in node:
            out[excl] = out.pop(key)

    if node.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
        out.pop("anyOf", None)
    for key in ("anyOf", "allOf", "oneOf"):
        if key in node and not node.get("x-kubernetes-int-or-string"):
            out[key] = [convert_schema(s) for s in node[key]]
    if "not" in node:
        out["not"] = convert_schema(node["not"])

    props = dict(node.get("properties") or {})
    if node.get("x-kubernetes-embedded-resource"):
        for name, sub in (("apiVersion", {"type": "string"}), ("kind", {"type": "string"}),
                          ("metadata", {"type": "object"})):
            props.setdefault(name, sub)
    if props:
        out["properties"] = {name: convert_schema(sub) for name, sub in props.items()}
    add = node.get("additionalProperties")
    if isinstance(add, dict):
        out["additionalProperties"] = convert_schema(add)
    elif isinstance(add, bool):
        out["additionalProperties"] = add
    elif props and not node.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    if isinstance(node.get("items"), dict):
        out["items"] = convert_schema(node["items"])

    if node.get("nullable"):
        t = out.get("type")
        if isinstance(t, str):
            out["type"] = [t, "null"]
        elif isinstance(t, list) and "null" not in t:
            out["type"] = [*t, "null"]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    return out


def crd_schema(crd: dict, version: str) -> dict:
    """JSON Schema (Draft 7) of one served version of ``crd``."""
    schema = convert_schema(_version_schema(crd, version))
    schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    return schema


# --------------------------------------------------------------------------- defaults

def apply_defaults(obj: Any, schema: dict) -> Any:
    """A copy of ``obj`` with the schema's ``default:`` values filled in where absent.

    As the API server does: a property's default applies when its parent object is present;
    defaults inside list items and maps apply to every element. Works on the CRD's OpenAPI
    schema or on the converted JSON Schema.
    """
    return _fill_defaults(copy.deepcopy(obj), schema)


def _fill_defaults(obj: Any, schema: dict) -> Any:
    if isinstance(obj, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if name not in obj and "default" in sub:
                obj[name] = copy.deepcopy(sub["default"])
            if name in obj:
                obj[name] = _fill_defaults(obj[name], sub)
        add = schema.get("additionalProperties")
        if isinstance(add, dict):
            props = schema.get("properties") or {}
            for key in obj:
                if key not in props:
                    obj[key] = _fill_defaults(obj[key], add)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [_fill_defaults(item, schema["items"]) for item in obj]
    return obj


# --------------------------------------------------------------------------- CEL rules

EVALUATED, NOT_APPLICABLE, UNEVALUABLE = "evaluated", "not applicable", "unevaluable"


@dataclass(frozen=True)
class CelRule:
    """One CEL rule (``x-kubernetes-validations``) of a CRD and how a create is checked against it.

    ``status`` is ``EVALUATED``; ``NOT_APPLICABLE`` for a transition rule (it reads ``oldSelf``
    and has no ``optionalOldSelf``), which the API server runs on updates only; or
    ``UNEVALUABLE`` when it does not compile here, ``reason`` saying why. ``crd`` is the file's
    name; ``path`` the schema path the rule is declared at (``spec.services.*.sharedMemory``,
    ``spec.components[*]``; ``<root>`` for the object).
    """

    crd: str
    version: str
    path: str
    rule: str
    status: str
    reason: str = ""


@functools.lru_cache(maxsize=None)
def _rule_program(rule: str, optional_old_self: bool) -> tuple[str, Any, str]:
    """(status, compiled program or None, reason) of one rule on create."""
    try:
        return EVALUATED, compile_rule(rule), ""
    except CelCompileError as err:
        create_error = str(err)
    try:
        compile_rule(rule, old_self=True)
    except CelCompileError:
        return UNEVALUABLE, None, create_error
    if not optional_old_self:
        return NOT_APPLICABLE, None, "transition rule (oldSelf): checked on update only"
    try:  # on create an optionalOldSelf rule sees oldSelf as an empty optional
        return EVALUATED, compile_rule(f"cel.bind(oldSelf, optional.none(),\n{rule}\n)"), ""
    except CelCompileError as err:
        return UNEVALUABLE, None, str(err)


def _schema_children(schema: dict) -> Iterator[tuple[str, dict]]:
    """(path suffix, sub-schema) of each place below ``schema`` a value can be."""
    for name, sub in (schema.get("properties") or {}).items():
        yield f".{name}", sub
    if isinstance(schema.get("additionalProperties"), dict):
        yield ".*", schema["additionalProperties"]
    if isinstance(schema.get("items"), dict):
        yield "[*]", schema["items"]


def _schema_rules(schema: dict, path: str) -> Iterator[tuple[str, dict]]:
    """(schema path, rule) of every CEL rule in ``schema`` and below it."""
    for rule in schema.get("x-kubernetes-validations") or []:
        yield path or "<root>", rule
    for suffix, sub in _schema_children(schema):
        yield from _schema_rules(sub, f"{path}{suffix}".lstrip("."))


def cel_rules(crd_path: str | Path) -> list[CelRule]:
    """Every CEL rule of every version of one CRD file, with its status on create."""
    path = Path(crd_path)
    crd = _load_crd_cached(str(path.resolve()))
    out = []
    for version in crd["spec"].get("versions", []):
        schema = _version_schema(crd, version["name"])
        for where, spec in _schema_rules(schema, ""):
            text = spec.get("rule", "")
            status, _, reason = _rule_program(text, bool(spec.get("optionalOldSelf")))
            out.append(CelRule(path.name, version["name"], where, text, status, reason))
    return out


def _rule_message(spec: dict, obj: Any) -> str:
    """The message of a failed rule: its ``messageExpression``, else ``message``, as the API server."""
    default = spec.get("message") or f"failed rule: {spec.get('rule', '')}"
    expression = spec.get("messageExpression")
    if not expression:
        return default
    try:
        text = evaluate(compile_rule(expression), obj)
    except (CelCompileError, CelEvalError) as err:
        return f"{default} (messageExpression not evaluated: {err})"
    return text if isinstance(text, str) and text.strip() else default


def _rule_error(obj: Any, spec: dict, path: str) -> str | None:
    """The error of ``obj`` against one rule declared at ``path``; None when it holds or does not apply."""
    text = spec.get("rule", "")
    status, program, reason = _rule_program(text, bool(spec.get("optionalOldSelf")))
    field = spec.get("fieldPath", "").lstrip(".")
    where = (_join(path, field) if field else path) or "<root>"
    if status == NOT_APPLICABLE:
        return None
    if status == UNEVALUABLE:
        return f"{where}: CEL rule {text!r} could not be evaluated: {reason}"
    try:
        result = evaluate(program, obj)
    except CelEvalError as err:
        return f"{where}: {err} evaluating rule {text!r}"
    if result is True:
        return None
    if result is not False:
        return f"{where}: rule {text!r} gave {result!r}, not a bool"
    return f"{where}: {_rule_message(spec, obj)}"


def _value_children(obj: Any, schema: dict) -> Iterator[tuple[str | int, Any, dict]]:
    """(key, value, sub-schema) of each value in ``obj`` that ``schema`` describes."""
    if isinstance(obj, dict):
        props = schema.get("properties") or {}
        add = schema.get("additionalProperties")
        for key, value in obj.items():
            sub = props[key] if key in props else add
            if isinstance(sub, dict):
                yield key, value, sub
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            yield i, item, schema["items"]


def _cel_errors(obj: Any, schema: dict, path: str) -> Iterator[str]:
    """Errors of ``obj`` against the CEL rules of ``schema`` (the CRD's OpenAPI schema) and below."""
    for spec in schema.get("x-kubernetes-validations") or []:
        error = _rule_error(obj, spec, path)
        if error:
            yield error
    for key, value, sub in _value_children(obj, schema):
        where = f"{path}[{key}]" if isinstance(key, int) else _join(path, key)
        yield from _cel_errors(value, sub, where)


# --------------------------------------------------------------------------- validation

def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def format_path(parts: Any) -> str:
    """``["spec", "roles", 0, "name"]`` → ``"spec.roles[0].name"``."""
    out = ""
    for part in parts:
        out = f"{out}[{part}]" if isinstance(part, int) else _join(out, str(part))
    return out


@functools.lru_cache(maxsize=None)
def _validator(path: str, version: str):
    import jsonschema  # imported on first use, not at module import

    checker = jsonschema.FormatChecker()
    for name, (lo, hi) in _INT_RANGES.items():
        checker.checks(name)(lambda v, lo=lo, hi=hi: not isinstance(v, int) or lo <= v <= hi)
    crd = _load_crd_cached(path)
    return jsonschema.Draft7Validator(crd_schema(crd, version), format_checker=checker)


def _schema_errors(obj: dict, path: str, version: str) -> list[str]:
    errors = []
    for err in _validator(path, version).iter_errors(obj):
        where = format_path(err.absolute_path)
        if err.validator == "additionalProperties" and err.validator_value is False:
            known = set(err.schema.get("properties") or {})
            errors += [f"{_join(where, k)}: unknown field" for k in err.instance if k not in known]
        elif err.validator == "required":
            missing = [k for k in err.validator_value if k not in err.instance]
            errors += [f"{_join(where, k)}: required field missing" for k in missing]
        else:
            errors.append(f"{where or '<root>'}: {err.message}")
    return errors


def _metadata_errors(obj: dict) -> list[str]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return ["metadata: required object missing"]
    name = meta.get("name")
    if not name and not meta.get("generateName"):
        return ["metadata.name: required field missing"]
    if name and (len(name) > 253 or not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", name)):
        return [f"metadata.name: {name!r} is not a valid DNS-1123 subdomain"]
    return []


def validate_against(obj: dict, crd_path: str | Path) -> list[str]:
    """Errors of ``obj`` against one CRD file (its version taken from ``obj['apiVersion']``)."""
    path = str(Path(crd_path).resolve())
    _, version = split_api_version(obj.get("apiVersion", ""))
    crd = _load_crd_cached(path)
    openapi = _version_schema(crd, version)
    obj = apply_defaults(obj, openapi)
    errors = _metadata_errors(obj) + _schema_errors(obj, path, version)
    errors += list(_cel_errors(obj, openapi, ""))
    return errors


def validate(obj: dict, crd_dir: CrdDirs | None = None) -> list[str]:
    """Human-readable errors of a custom resource against its CRD(s); empty when valid.

    The CRD is chosen by the object's ``apiVersion`` and ``kind`` among the files of
    ``crd_dir`` (a folder or several; default: ``default_crd_dir()``). When several files define that version (e.g.
    two releases of a project), the object is checked against each and every error is prefixed
    with the file's name. Raises ``CRDNotFound`` when no file defines it.
    """
    if not isinstance(obj, dict):
        return ["<root>: not an object"]
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not api_version or not kind:
        return ["<root>: apiVersion and kind are required"]
    files = find_crds(api_version, kind, crd_dir)
    if not files:
        where = ", ".join(f"{folder.name}/" for folder in _folders(crd_dir))
        raise CRDNotFound(f"no CRD for {kind} {api_version} in {where}")
    errors = []
    for path in files:
        errors += [f"{path.name}: {e}" for e in validate_against(obj, path)]
    return errors
