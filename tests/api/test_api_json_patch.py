"""JSON Patch (RFC 6902) on plain JSON values: the operations and their failures."""

from __future__ import annotations

import pytest

from api.json_patch import PatchError, apply_patch

DOC = {"a": {"b": [1, 2, 3], "c/d": "x", "e~f": True}}


@pytest.mark.parametrize("ops,expected", [
    ([{"op": "add", "path": "/a/b/1", "value": 9}], {"a": {"b": [1, 9, 2, 3], "c/d": "x", "e~f": True}}),
    ([{"op": "add", "path": "/a/b/-", "value": 4}], {"a": {"b": [1, 2, 3, 4], "c/d": "x", "e~f": True}}),
    ([{"op": "remove", "path": "/a/c~1d"}], {"a": {"b": [1, 2, 3], "e~f": True}}),
    ([{"op": "replace", "path": "/a/e~0f", "value": False}], {"a": {"b": [1, 2, 3], "c/d": "x", "e~f": False}}),
    ([{"op": "replace", "path": "/a/b/0", "value": 0}], {"a": {"b": [0, 2, 3], "c/d": "x", "e~f": True}}),
    ([{"op": "move", "from": "/a/c~1d", "path": "/z"}], {"a": {"b": [1, 2, 3], "e~f": True}, "z": "x"}),
    ([{"op": "copy", "from": "/a/b/2", "path": "/a/b/0"}], {"a": {"b": [3, 1, 2, 3], "c/d": "x", "e~f": True}}),
    ([{"op": "test", "path": "/a/b", "value": [1, 2, 3]}], DOC),
])
def test_operations_as_rfc_6902_defines_them(ops, expected):
    assert apply_patch(DOC, ops) == expected
    assert DOC == {"a": {"b": [1, 2, 3], "c/d": "x", "e~f": True}}  # the input is not changed


@pytest.mark.parametrize("ops,says", [
    ([{"op": "test", "path": "/a/b", "value": []}], "the test failed"),
    ([{"op": "remove", "path": "/nope"}], "the path does not exist"),
    ([{"op": "replace", "path": "/a/b/7", "value": 1}], "index 7 is out of range"),
    ([{"op": "add", "path": "/a/b/01", "value": 1}], "not an array index"),
    ([{"op": "add", "path": "a", "value": 1}], "not a JSON pointer"),
    ([{"op": "add", "path": "/a"}], "value is required"),
    ([{"op": "jump", "path": "/a"}], "op must be one of"),
    ([{"op": "move", "from": "/a", "path": "/a/b/0"}], "cannot move a value into itself"),
    ({"op": "add"}, "a list of operations"),
])
def test_a_bad_operation_is_named(ops, says):
    with pytest.raises(PatchError, match=says):
        apply_patch(DOC, ops)
