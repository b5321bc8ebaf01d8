"""Label selectors as kube-apiserver parses and applies them."""

from __future__ import annotations

import pytest

from infra.labels import SelectorError, matches, parse_selector

LABELS = {"app": "llm", "tier": "gold", "replicas": "3", "example.com/team": "infer"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        ("app=llm", True),
        ("app==llm", True),
        ("app=other", False),
        ("app!=other", True),
        ("missing!=x", True),
        ("app,tier", True),
        ("!missing", True),
        ("!app", False),
        ("tier in (gold, silver)", True),
        ("tier in (silver)", False),
        ("tier notin (silver)", True),
        ("missing notin (x)", True),
        ("missing in (x)", False),
        ("example.com/team=infer", True),
        ("replicas>2,replicas<4", True),
        ("replicas>3", False),
        ("app=llm,tier in (bronze)", False),
    ],
)
def test_matches(selector, expected):
    assert matches(parse_selector(selector), LABELS) is expected


@pytest.mark.parametrize("selector", ["a in (b", "a in ()", "=x", "a=b=c", "a,,b", "a>x", "a b"])
def test_rejects_malformed(selector):
    with pytest.raises(SelectorError):
        parse_selector(selector)
