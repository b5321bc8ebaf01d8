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


class _Refusals:
    """What both loaders refuse or read otherwise while constructing (see DocumentLoader)."""

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


class DocumentLoader(_Refusals, yaml.SafeLoader):
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


class _LibyamlLoader(_Refusals, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """DocumentLoader's reading on libyaml's parser (PyYAML's C extension, when it has one), which
    composes in C: aliases are found afterwards, as nodes reached twice (``_shares_nodes``)."""


def load_yaml(text: str) -> list[Any]:
    """The documents of YAML ``text`` as :class:`DocumentLoader` reads them, with its errors.

    Plain text (printable, no alias, no error) is parsed by libyaml where PyYAML has it, about a
    tenth of the instructions; anything else is read again by DocumentLoader itself, so that what
    is refused, and the message and line that say why, are DocumentLoader's."""
    if yaml.__with_libyaml__ and not yaml.reader.Reader.NON_PRINTABLE.search(text):
        loader = _LibyamlLoader(text)
        try:
            docs = []
            while loader.check_node():
                node = loader.get_node()
                if _shares_nodes(node):
                    break
                docs.append(loader.construct_document(node))
            else:
                return docs
        except (yaml.YAMLError, ValueError, RecursionError):
            pass  # DocumentLoader says what, and where
        finally:
            loader.dispose()
    return list(yaml.load_all(text, Loader=DocumentLoader))


def _shares_nodes(root: yaml.Node) -> bool:
    """Whether a node is reached twice from ``root``: what an alias composes to."""
    seen: set[int] = set()
    todo = [root]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            return True
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            todo += [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            todo += node.value
    return False
