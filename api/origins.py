"""Where a request comes from: the Host it names and, for a write, the page that sent it.

DNS rebinding: a page on evil.example whose name is made to resolve to 127.0.0.1 reaches a
server on loopback with ``Host: evil.example``, and reads the answers as its own; so a Host the
settings do not name is refused. Cross-site writes: any page can make a browser send a POST
without asking first (a form, or ``fetch`` with a text/plain body); browsers say where it comes
from in ``Sec-Fetch-Site`` and ``Origin``, and a write from another origin is refused, as Go's
``net/http.CrossOriginProtection`` refuses it. Clients that are not browsers (kubectl, the
``kubernetes`` client, curl) send neither header and are not affected.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Mapping
from urllib.parse import urlsplit

# Sec-Fetch-Site values of requests a page of this origin (or the user, typing a URL) made.
SAME_ORIGIN_FETCH = frozenset({"same-origin", "none"})
UNSPECIFIED_HOSTS = frozenset({"", "0.0.0.0", "::"})  # listen on every interface


def host_name(host: str) -> str:
    """The name of a Host header value, lower-case, without port or IPv6 brackets
    (``[::1]:8080`` → ``::1``, ``Example.com:80`` → ``example.com``)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() and ":" not in name else host


def host_allowed(host: str, allowed: Collection[str]) -> bool:
    """Whether the Host header value ``host`` names one of ``allowed`` (``*``: any)."""
    return "*" in allowed or (bool(host) and host_name(host) in allowed)


def is_loopback(host: str) -> bool:
    """Whether a listen address (``127.0.0.1``, ``::1``, ``localhost``) is reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host_name(host)).is_loopback
    except ValueError:  # a name other than localhost: it may resolve to any interface
        return False


def served_hosts(allowed: Collection[str], listen_host: str) -> frozenset[str]:
    """The Host names to answer: ``allowed``, and the address the server listens on when that is
    one address (a client connecting to it by its address names it), not every interface."""
    own = () if listen_host in UNSPECIFIED_HOSTS else (host_name(listen_host),)
    return frozenset((*allowed, *own))


def cross_origin(headers: Mapping[str, str], trusted: Collection[str]) -> str | None:
    """Why a write with these (lower-case) ``headers`` is refused as coming from a page of
    another origin, or None. A trusted origin may always write; otherwise ``Sec-Fetch-Site``
    decides when the browser sent it, else ``Origin`` must name the request's own Host; a
    request with neither is not from a browser page."""
    origin = headers.get("origin", "")
    if origin and origin.lower().rstrip("/") in trusted:
        return None
    site = headers.get("sec-fetch-site", "").lower()
    if site:
        return None if site in SAME_ORIGIN_FETCH else f"Sec-Fetch-Site: {site}"
    if not origin:
        return None
    return None if _origin_host(origin) == headers.get("host", "").lower() else f"Origin: {origin}"


def _origin_host(origin: str) -> str:
    """The host[:port] of an Origin header value, lower-case; "" for ``null`` or one that is no URL."""
    try:
        return urlsplit(origin.strip()).netloc.lower()
    except ValueError:
        return ""
