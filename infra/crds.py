"""Offline validation of custom resources against real CustomResourceDefinition schemas.

A CRD's ``openAPIV3Schema`` is a *structural* OpenAPI v3.0 schema with Kubernetes extensions.
``crd_schema`` turns one version of it into a JSON Schema (Draft 7) that rejects what the API
server would reject on create with strict field validation:

- objects with ``properties`` are closed (unknown fields rejected) unless they carry
  ``x-kubernetes-preserve-unknown-fields: true`` or an ``additionalProperties`` schema;
- ``nullable: true`` also admits ``null``; ``x-kubernetes-int-or-string`` admits integer or string;
- OpenAPI 3.0's boolean ``exclusiveMinimum``/``exclusiveMaximum`` become Draft 7 numbers.

The API server applies ``default:`` values before validating, so ``validate`` does too
(``apply_defaults``). CEL rules (``x-kubernetes-validations``) cannot be evaluated generically;
the ones our manifests could break are checked by hand (``CEL_CHECKS``); rules about updates
(``oldSelf``) do not apply to a create and are skipped, as are unknown rules.
"""

from __future__ import annotations

import copy
import functools
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

CRD_DIR_ENV = "SLAPLAN_CRD_DIR"

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Keywords that mean the same in OpenAPI v3.0 and JSON Schema Draft 7 (sub-schemas handled apart).
_PLAIN_KEYWORDS = (
    "type", "enum", "format", "minimum", "maximum", "multipleOf", "minLength", "maxLength",
    "pattern", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
    "required", "default", "const",
)

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


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


def find_crds(api_version: str, kind: str, crd_dir: Path | None = None) -> list[Path]:
    """CRD files in ``crd_dir`` defining ``kind`` in the group and version of ``api_version``."""
    crd_dir = Path(crd_dir) if crd_dir is not None else default_crd_dir()
    group, version = split_api_version(api_version)
    found = []
    for path in _crd_index(str(crd_dir.resolve())).get((group, kind), ()):
        crd = _load_crd_cached(path)
        if any(v.get("name") == version for v in crd["spec"].get("versions", [])):
            found.append(Path(path))
    return found


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

def _starts_with_any(*prefixes: str) -> Callable[[Any], bool]:
    return lambda s: isinstance(s, str) and s.startswith(prefixes)


def _unique_names(items: Any) -> bool:
    names = [i.get("name") for i in items or [] if isinstance(i, dict)]
    return len(names) == len(set(names))


def _unique_names_ci(items: Any) -> bool:
    names = [i["name"].lower() for i in items or [] if isinstance(i, dict) and "name" in i]
    return len(names) == len(set(names))


def _min_le_max(spec: dict) -> bool:
    return "maxReplicas" not in spec or spec.get("minReplicas", 0) <= spec["maxReplicas"]


def _url(spec: dict) -> str:
    return spec.get("url", "")


_MODEL_URL = ("hf://", "pvc://", "ollama://", "s3://", "gs://", "oss://")
_CACHE_URL = ("hf://", "s3://", "gs://", "oss://")

# Rule text (whitespace collapsed) → predicate on ``self``. Covers the create-time rules of the
# KubeAI, Kthena and Dynamo CRDs that a rendered manifest could plausibly break.
CEL_CHECKS: dict[str, Callable[[Any], bool]] = {
    # KubeAI Model
    "size(self.metadata.name) <= 40":
        lambda o: len(o.get("metadata", {}).get("name", "")) <= 40,
    'self.startsWith("hf://") || self.startsWith("pvc://") || self.startsWith("ollama://") || '
    'self.startsWith("s3://") || self.startsWith("gs://") || self.startsWith("oss://")':
        _starts_with_any(*_MODEL_URL),
    'self.startsWith("hf://") || self.startsWith("s3://") || self.startsWith("gs://") || '
    'self.startsWith("oss://")':
        _starts_with_any(*_CACHE_URL),
    '!has(self.cacheProfile) || self.url.startsWith("hf://") || self.url.startsWith("s3://") || '
    'self.url.startsWith("gs://") || self.url.startsWith("oss://")':
        lambda s: "cacheProfile" not in s or _url(s).startswith(_CACHE_URL),
    '!self.url.startsWith("gs://") || has(self.cacheProfile)':
        lambda s: not _url(s).startswith("gs://") or "cacheProfile" in s,
    '!self.url.startsWith("oss://") || has(self.cacheProfile)':
        lambda s: not _url(s).startswith("oss://") or "cacheProfile" in s,
    "!has(self.maxReplicas) || self.minReplicas <= self.maxReplicas": _min_le_max,
    '!has(self.adapters) || self.engine == "VLLM"':
        lambda s: "adapters" not in s or s.get("engine") == "VLLM",
    "self.startsWith('/') && !self.contains(':')":
        lambda p: isinstance(p, str) and p.startswith("/") and ":" not in p,
    "!has(self.files) || self.files.size() <= 1 || "
    "!self.files.exists(f, self.files.filter(other, other.path == f.path).size() > 1)":
        lambda s: len({f.get("path") for f in s.get("files", [])}) == len(s.get("files", [])),
    # Kthena ModelServing
    "self.all(x, self.exists_one(y, y.name == x.name))": _unique_names,
    # Dynamo DynamoGraphDeployment
    "self.all(c1, !has(c1.name) || self.filter(c2, has(c2.name) && "
    "c2.name.lowerAscii() == c1.name.lowerAscii()).size() == 1)": _unique_names_ci,
    'has(self.image) && self.image != ""': lambda c: bool(c.get("image")),
    'self.name == "main" || (has(self.image) && self.image != "")':
        lambda c: c.get("name") == "main" or bool(c.get("image")),
    "has(self.configMapRef) != has(self.config)":
        lambda s: ("configMapRef" in s) != ("config" in s),
    "!has(self.create) || self.create == false || "
    "(has(self.size) && has(self.storageClass) && has(self.volumeAccessMode))":
        lambda s: not s.get("create") or all(k in s for k in ("size", "storageClass", "volumeAccessMode")),
    "!has(self.minAvailable) || (has(self.replicas) && self.replicas == 0) || "
    "self.minAvailable <= (has(self.replicas) ? self.replicas : 1)":
        lambda s: "minAvailable" not in s or s.get("replicas") == 0
        or s["minAvailable"] <= s.get("replicas", 1),
    "self.filter(c, has(c.type) && c.type == 'epp').size() <= 1":
        lambda cs: sum(1 for c in cs or [] if c.get("type") == "epp") <= 1,
}


# Where a rule's failure is reported when it is declared on an ancestor of the field it checks.
_CEL_FIELD = {"size(self.metadata.name) <= 40": "metadata.name"}


def _normalize_rule(rule: str) -> str:
    return " ".join(rule.split())


def _cel_errors(obj: Any, schema: dict, path: str) -> Iterator[str]:
    """Check the known CEL rules of ``schema`` (the CRD's OpenAPI schema) over ``obj``."""
    for rule in schema.get("x-kubernetes-validations") or []:
        text = _normalize_rule(rule.get("rule", ""))
        check = CEL_CHECKS.get(text)
        if check is None or "oldSelf" in text:
            continue
        try:
            ok = check(obj)
        except (AttributeError, KeyError, TypeError):
            ok = False
        if not ok:
            field = rule.get("fieldPath", "").lstrip(".") or _CEL_FIELD.get(text, "")
            where = _join(path, field) if field else path
            yield f"{where or '<root>'}: {rule.get('message') or 'failed rule ' + text}"
    if isinstance(obj, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if name in obj:
                yield from _cel_errors(obj[name], sub, _join(path, name))
        add = schema.get("additionalProperties")
        if isinstance(add, dict):
            for key, value in obj.items():
                if key not in (schema.get("properties") or {}):
                    yield from _cel_errors(value, add, _join(path, key))
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            yield from _cel_errors(item, schema["items"], f"{path}[{i}]")


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


def validate(obj: dict, crd_dir: Path | None = None) -> list[str]:
    """Human-readable errors of a custom resource against its CRD(s); empty when valid.

    The CRD is chosen by the object's ``apiVersion`` and ``kind`` among the files of
    ``crd_dir`` (default: ``default_crd_dir()``). When several files define that version (e.g.
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
        where = crd_dir if crd_dir is not None else default_crd_dir()
        raise CRDNotFound(f"no CRD for {kind} {api_version} in {Path(where).name}/")
    errors = []
    for path in files:
        errors += [f"{path.name}: {e}" for e in validate_against(obj, path)]
    return errors
