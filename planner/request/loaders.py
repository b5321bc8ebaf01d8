"""Readers of YAML and JSON text that refuse what would not say what it seems to.

:class:`DocumentLoader` reads ``slaplan plan``'s files, ``slaplan apply``'s manifests and the REST
API's bodies alike.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import Any

import yaml


class DuplicateKey(ValueError):
    """A JSON object that names a key twice: the last would silently replace the first."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(f"duplicate key {key!r}")
        out[key] = value
    return out


def loads_json(text: str) -> Any:
    """``json.loads`` refusing an object with a key given twice (DuplicateKey), as
    :class:`DocumentLoader` refuses it in YAML."""
    return json.loads(text, object_pairs_hook=_unique_keys)


class RefusedYAML(yaml.MarkedYAMLError):
    """YAML that parses but would not say what it seems to: ``problem`` says what, ``problem_mark``
    where (0-based line and column)."""


class DocumentLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` for manifests and API bodies, which refuses (RefusedYAML):

    - aliases (``*name``, also in ``<<: *name``): an alias repeats a whole anchored value, so a few
      hundred bytes of aliases of aliases expand to gigabytes;
    - a key given twice in one mapping: the last would silently replace the first (a second
      ``spec:`` the whole spec);

    and reads plain scalars with a colon, YAML 1.1's base-60 numbers (``isl: 1:30`` = 90), as the
    strings YAML 1.2 (and Kubernetes) read.
    """

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise RefusedYAML(problem=f"a YAML alias (*{event.anchor}): anchors and aliases are not supported, "
                                      "write the value out", problem_mark=event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # ``<<``: merged keys may be overridden
                continue
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):  # the base class refuses it
                continue
            if key in first:
                raise RefusedYAML(problem=f"duplicate key {key!r} (first at line {first[key].start_mark.line + 1})",
                                  problem_mark=key_node.start_mark)
            first[key] = key_node
        return super().construct_mapping(node, deep=deep)

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: tuple[bool, bool]) -> str:
        tag = super().resolve(kind, value, implicit)
        if tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float") and ":" in value:
            return "tag:yaml.org,2002:str"
        return tag
