"""Kubernetes object-name rules (DNS-1123), one copy for requests and for the API's objects."""

from __future__ import annotations

import re

MAX_SUBDOMAIN_LENGTH = 253  # characters of a DNS-1123 subdomain (most object names)
MAX_LABEL_LENGTH = 63  # characters of a DNS-1123 label (namespaces)

# Matched with ``fullmatch``: ``$`` would also match before a final newline.
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL_RE = re.compile(_LABEL)
_SUBDOMAIN_RE = re.compile(rf"{_LABEL}(\.{_LABEL})*")


def is_subdomain(name: str) -> bool:
    """A DNS-1123 subdomain: what Kubernetes requires of most object names."""
    return len(name) <= MAX_SUBDOMAIN_LENGTH and bool(_SUBDOMAIN_RE.fullmatch(name))


def is_label(name: str) -> bool:
    """A DNS-1123 label: what Kubernetes requires of namespaces."""
    return len(name) <= MAX_LABEL_LENGTH and bool(_LABEL_RE.fullmatch(name))


def dns_subdomain(name: str) -> str:
    """``name`` when it is a DNS-1123 subdomain, else ValueError saying what one is (a validator)."""
    return _required(name, is_subdomain(name), "subdomain: lowercase letters, digits, '-' and '.'",
                     MAX_SUBDOMAIN_LENGTH)


def dns_label(name: str) -> str:
    """``name`` when it is a DNS-1123 label, else ValueError saying what one is (a validator)."""
    return _required(name, is_label(name), "label: lowercase letters, digits and '-'", MAX_LABEL_LENGTH)


def _required(name: str, ok: bool, what: str, max_length: int) -> str:
    if not ok:
        raise ValueError(f"must be a DNS-1123 {what}, starting and ending with a letter or digit, "
                         f"at most {max_length} characters")
    return name
