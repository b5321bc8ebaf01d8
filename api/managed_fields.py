"""Field ownership, as kube-apiserver keeps it for server-side apply (``metadata.managedFields``).

Every write names a manager: ``?fieldManager=`` (required for an apply), else the client's
User-Agent up to its first ``/`` (``kubectl``, ``OpenAPI-Generator``), as kube-apiserver does.
The fields a manager owns are the leaves it set in ``metadata.labels``, ``metadata.annotations``
and ``spec``: a leaf is a value that is not an object (lists are atomic, as in a CRD without
list-type markers), or an empty object. ``status`` is not tracked (only workers write it).

- An update (create, PUT, merge patch) moves every field whose value it changes to the manager's
  ``Update`` entry, taking it from whoever owned it.
- An apply (``application/apply-patch+yaml``) sets the fields of its configuration. A field
  another entry owns whose value it would change is a conflict: 409 naming each field, unless
  ``force=true``, which takes the field over. A field the manager applied before and no longer
  applies is removed from the object, unless another entry owns it too. The manager's ``Apply``
  entry becomes exactly the configuration's fields; a field applied at the value it already has
  is shared with its other owners.
- An apply as ``kubectl`` (``kubectl apply --server-side``) takes over, without a conflict, the
  fields of the object's last-applied configuration (``kubectl apply`` before, client-side).
- A write whose body sets ``metadata.managedFields`` to something other than what is stored
  replaces them (``[{}]`` clears them), as in Kubernetes.
Paths are compared in the shape of the version a request is made at; entries keep the apiVersion
they were made at (slaplan does not convert them between a DGDR's two versions).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from api import errors
from api.conversion import ANNOTATION as CONVERSION_ANNOTATION
from api.errors import ApiError
from api.objects import merge_patch
from infra.resources import ManagedFieldsEntry

Path = tuple[str, ...]
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"  # client-side apply's record
SERVER_SIDE_KUBECTL = "kubectl"  # the manager of ``kubectl apply --server-side`` unless told otherwise
CLIENT_SIDE_KUBECTL = "kubectl-client-side-apply"  # the manager of ``kubectl apply``
MAX_MANAGER_CHARS = 128  # kube-apiserver's limit on a fieldManager
UNTRACKED_ANNOTATIONS = frozenset({CONVERSION_ANNOTATION})  # written by the server, owned by none
_ABSENT = object()


def manager_of(field_manager: str | None, user_agent: str | None) -> str:
    """The manager a write is recorded for: ``field_manager``, else the User-Agent's product
    (up to its first ``/``, at most 128 characters), else ``unknown``. 422 naming ``fieldManager``
    for one that is too long or not printable ASCII."""
    if field_manager is not None:
        if len(field_manager) > MAX_MANAGER_CHARS or not (field_manager.isascii() and field_manager.isprintable()):
            raise _invalid_manager(f"Invalid value: must be printable ASCII of at most {MAX_MANAGER_CHARS} characters")
        return field_manager
    product = (user_agent or "").split("/", 1)[0].strip()[:MAX_MANAGER_CHARS]
    return product if product.isascii() and product.isprintable() and product else "unknown"


def _invalid_manager(message: str) -> ApiError:
    return errors.invalid("PatchOptions", "meta.k8s.io", "", [("fieldManager", message)])


def leaves(obj: dict[str, Any]) -> frozenset[Path]:
    """The tracked fields ``obj`` sets (see the module's docstring); a ``null`` sets nothing."""
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    found: set[Path] = set()
    for key in ("labels", "annotations"):
        values = metadata.get(key)
        if isinstance(values, dict):
            found |= {("metadata", key, k) for k, v in values.items()
                      if v is not None and not (key == "annotations" and k in UNTRACKED_ANNOTATIONS)}
    if isinstance(obj.get("spec"), dict):
        _collect(obj["spec"], ("spec",), found)
    return frozenset(found)


def _collect(value: Any, path: Path, found: set[Path]) -> None:
    if isinstance(value, dict) and value:
        for key, child in value.items():
            if child is not None:
                _collect(child, (*path, key), found)
    else:
        found.add(path)


def value_at(obj: Any, path: Path) -> Any:
    """The value at ``path`` in ``obj``, or a marker for absent."""
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return _ABSENT
        obj = obj[key]
    return obj


def _overlaps(path: Path, owned: frozenset[Path]) -> bool:
    """Whether ``owned`` holds ``path``, a field inside it, or a field it is inside."""
    return any(p[:len(path)] == path or path[:len(p)] == p for p in owned)


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """``paths`` in the FieldsV1 form: nested ``f:<key>`` objects, ``{}`` at each leaf."""
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for key in path:
            node = node.setdefault(f"f:{key}", {})
    return tree


def from_fields_v1(tree: dict[str, Any], prefix: Path = ()) -> frozenset[Path]:
    """The leaf paths of a FieldsV1 tree (``.`` members and keys not of the ``f:`` kind name the
    object itself, as a leaf)."""
    found: set[Path] = set()
    children = {k: v for k, v in tree.items() if k.startswith("f:")}
    if prefix and (not children or "." in tree):
        found.add(prefix)
    for key, child in children.items():
        found |= from_fields_v1(child if isinstance(child, dict) else {}, (*prefix, key[2:]))
    return frozenset(found)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry(manager: str, operation: str, api_version: str, paths: frozenset[Path]) -> ManagedFieldsEntry:
    return ManagedFieldsEntry(manager=manager, operation=operation, api_version=api_version, time=_now(),
                              fields_v1=to_fields_v1(paths))


def _without(entries: tuple[ManagedFieldsEntry, ...], drop) -> list[ManagedFieldsEntry]:
    """``entries`` less the fields ``drop(entry, paths)`` names; entries left with none are gone."""
    kept = []
    for entry in entries:
        paths = from_fields_v1(entry.fields_v1)
        gone = drop(entry, paths)
        if not gone:
            kept.append(entry)
        elif paths - gone:
            kept.append(entry.model_copy(update={"fields_v1": to_fields_v1(paths - gone)}))
    return kept


def _changed(before: dict[str, Any], after: dict[str, Any]) -> frozenset[Path]:
    return frozenset(p for p in leaves(before) | leaves(after) if value_at(before, p) != value_at(after, p))


def created(manager: str, operation: str, api_version: str, obj: dict[str, Any]) -> tuple[ManagedFieldsEntry, ...]:
    """The managed fields of an object ``manager`` just created (by an ``Update`` or an ``Apply``)."""
    paths = leaves(obj)
    return (_entry(manager, operation, api_version, paths),) if paths else ()


def updated(entries: tuple[ManagedFieldsEntry, ...], manager: str, api_version: str,
            before: dict[str, Any], after: dict[str, Any]) -> tuple[ManagedFieldsEntry, ...]:
    """``entries`` after ``manager`` changed ``before`` into ``after`` by an update."""
    changed = _changed(before, after)
    if not changed:
        return entries
    now_set = changed & leaves(after)
    mine = next((e for e in entries if (e.manager, e.operation) == (manager, "Update")), None)
    others = _without(tuple(e for e in entries if e is not mine), lambda _e, paths: paths & changed)
    owned = (from_fields_v1(mine.fields_v1) - changed if mine else frozenset()) | now_set
    return (*others, _entry(manager, "Update", api_version, owned)) if owned else tuple(others)


class ApplyConflict(Exception):
    """An apply would change fields other managers own: ``conflicts`` lists (manager, apiVersion, path)."""

    def __init__(self, conflicts: list[tuple[str, str, Path]]):
        super().__init__(f"{len(conflicts)} conflict(s)")
        self.conflicts = conflicts


def applied(entries: tuple[ManagedFieldsEntry, ...], manager: str, api_version: str, current: dict[str, Any],
            config: dict[str, Any], *, force: bool) -> tuple[tuple[ManagedFieldsEntry, ...], dict[str, Any]]:
    """(the managed fields, the object) after ``manager`` applies ``config`` to ``current`` (merged
    in as a merge patch: objects field by field). Raises ApplyConflict unless ``force``."""
    config_paths = leaves(config)
    mine = next((e for e in entries if (e.manager, e.operation) == (manager, "Apply")), None)
    others = tuple(e for e in entries if e is not mine)
    differing = frozenset(p for p in config_paths if value_at(current, p) != value_at(config, p))
    conflicts = [(e.manager, e.api_version, p) for e in others for p in sorted(differing)
                 if _overlaps(p, from_fields_v1(e.fields_v1))]
    if conflicts and not force and not _upgrades_client_side_apply(manager, current, conflicts):
        raise ApplyConflict(conflicts)
    if conflicts:  # forced: the fields change hands
        taken = {p for _m, _v, p in conflicts}
        others = tuple(_without(others, lambda _e, paths: {q for q in paths if _overlaps(q, frozenset(taken))}))
    still_owned = frozenset().union(*(from_fields_v1(e.fields_v1) for e in others))
    dropped = [p for p in (from_fields_v1(mine.fields_v1) if mine else frozenset()) - config_paths
               if not _overlaps(p, still_owned) and not _overlaps(p, config_paths)]
    obj = current
    for path in dropped:
        obj = _removed(obj, path)
    obj = merge_patch(obj, config)
    mine_now = (_entry(manager, "Apply", api_version, config_paths),) if config_paths else ()
    return (*others, *mine_now), obj


def _upgrades_client_side_apply(manager: str, current: dict[str, Any], conflicts) -> bool:
    """Whether an apply by kubectl's default manager takes over what ``kubectl apply`` (client-side)
    set without conflicts, as Kubernetes lets it: every conflict is with client-side apply's
    manager, on a field of the object's last-applied configuration (the annotation it keeps)."""
    if manager != SERVER_SIDE_KUBECTL:
        return False
    text = value_at(current, ("metadata", "annotations", LAST_APPLIED))
    try:
        last = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return False
    fields = leaves(last) if isinstance(last, dict) else frozenset()
    return all(m == CLIENT_SIDE_KUBECTL and _overlaps(p, fields) for m, _v, p in conflicts)


def _removed(obj: dict[str, Any], path: Path, *, top: bool = True) -> dict[str, Any]:
    """``obj`` without the field at ``path``, nor the objects that leaves empty (``spec`` and
    ``metadata`` themselves stay); copied along the path, other values shared."""
    if len(path) == 1:
        return {k: v for k, v in obj.items() if k != path[0]}
    child = obj.get(path[0])
    if not isinstance(child, dict):
        return obj
    rest = _removed(child, path[1:], top=False)
    if not rest and not top:
        return {k: v for k, v in obj.items() if k != path[0]}
    return {**obj, path[0]: rest}


def conflict_error(conflicts: list[tuple[str, str, Path]], plural: str, group: str, name: str) -> ApiError:
    """409 Conflict as kube-apiserver answers an apply that conflicts: one cause per field."""
    fields = [(m, v, "." + ".".join(p)) for m, v, p in conflicts]
    lines = [f'conflict with "{m}" using {v}: {f}' for m, v, f in fields]
    message = (f"Apply failed with {len(lines)} conflict{'s' if len(lines) > 1 else ''}: " + "\n".join(lines))
    causes = [{"reason": "FieldManagerConflict", "message": f'conflict with "{m}" using {v}', "field": f}
              for m, v, f in fields]
    return ApiError(409, message, details={"name": name, "group": group, "kind": plural, "causes": causes})


def given_entries(metadata: dict[str, Any], kind: str, group: str, name: str) -> tuple[ManagedFieldsEntry, ...] | None:
    """The ``metadata.managedFields`` a body sets (``[{}]``: none), or None when it sets none. 422
    naming the field when an entry is not one."""
    from pydantic import ValidationError

    given = metadata.get("managedFields")
    if given is None:
        return None
    if not isinstance(given, list):
        raise errors.invalid(kind, group, name, [("metadata.managedFields", "Invalid value: must be a list")])
    if given == [{}]:
        return ()
    try:
        return tuple(ManagedFieldsEntry.model_validate(e) for e in given)
    except ValidationError as exc:
        where = ".".join(str(x) for x in exc.errors()[0]["loc"])
        raise errors.invalid(kind, group, name, [(f"metadata.managedFields[{where}]",
                                                 f"Invalid value: {exc.errors()[0]['msg']}")]) from None
