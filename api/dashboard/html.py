"""HTML building blocks: escaping, the page layout and small formatters.

Every value that comes from a user or the database goes through :func:`h`.
"""

from __future__ import annotations

import html
import math
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

STATIC = "/ui/static"
# Bumped when static files change so that browsers do not keep stale copies.
ASSET_VERSION = "2"

STATE_TONE = {
    "Ready": "ok",
    "Completed": "ok",
    "Failed": "bad",
    "DeploymentDeleted": "muted",
    "Pending": "wait",
    "Profiling": "busy",
    "Deploying": "busy",
    "Running": "busy",
}


def h(value: Any) -> str:
    """``value`` as escaped HTML text (None is empty)."""
    return "" if value is None else html.escape(str(value), quote=True)


def q(value: str) -> str:
    """A path segment, percent-encoded."""
    return quote(str(value), safe="")


def state_badge(state: str | None) -> str:
    label = state or "Pending"
    return f'<span class="badge badge-{STATE_TONE.get(label, "muted")}">{h(label)}</span>'


def num(value: Any, digits: int = 1, unit: str = "") -> str:
    """A number for reading: fixed digits, thousands separators, '—' when missing."""
    if value is None or isinstance(value, bool):
        return "—"
    try:
        x = float(value)
    except (TypeError, ValueError):
        return h(value)
    if not math.isfinite(x):
        return "—"
    text = f"{x:,.{digits}f}"
    return f"{text} {unit}" if unit else text


def age(created: datetime, now: datetime | None = None) -> str:
    """How long ago, in the largest sensible unit (``42s``, ``5m``, ``3h``, ``2d``)."""
    seconds = max(0, int(((now or datetime.now(UTC)) - created).total_seconds()))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


TIME_FORMAT = "%Y-%m-%d %H:%M:%S UTC"  # the one way the dashboard shows a point in time


def iso(when: datetime) -> str:
    """``when`` in UTC as RFC 3339, for a ``<time datetime>`` attribute."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _utc(value: datetime | str | None) -> datetime | None:
    """``value`` as an aware UTC datetime (a string in ISO 8601; no zone means UTC), or None."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def timestamp(value: datetime | str | None, *, ago_from: datetime | None = None) -> str:
    """A ``<time>`` element for ``value`` (a datetime or an ISO 8601 string) in :data:`TIME_FORMAT`;
    with ``ago_from``, it reads how long before that it was (``5m ago``) and shows the time on
    hover. A string that is no time is shown as it is; None is empty."""
    when = _utc(value)
    if when is None:
        return h(value)
    shown = when.strftime(TIME_FORMAT)
    if ago_from is None:
        return f'<time datetime="{iso(when)}">{shown}</time>'
    return f'<time datetime="{iso(when)}" title="{shown}">{age(when, ago_from)} ago</time>'


def dl(rows: list[tuple[str, str]]) -> str:
    """A definition list of (term, already-escaped HTML) pairs, skipping empty values."""
    items = "".join(f"<div><dt>{h(term)}</dt><dd>{value}</dd></div>" for term, value in rows if value not in ("", None))
    return f'<dl class="facts">{items}</dl>'


def page(title: str, body: str, *, current: str = "", live: bool = False) -> str:
    """A whole HTML document: header with navigation, ``body`` in ``<main>``."""

    def nav_link(href: str, label: str, key: str) -> str:
        here = ' aria-current="page"' if key == current else ""
        return f'<a href="{href}"{here}>{h(label)}</a>'

    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{h(title)} · slaplan</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="{STATIC}/dashboard.css?v={ASSET_VERSION}">
<script src="{STATIC}/dashboard.js?v={ASSET_VERSION}" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
<a class="brand" href="/">slaplan</a>
<nav aria-label="Main">{nav_link("/", "Requests", "home")}{nav_link("/ui/submit", "Submit", "submit")}{nav_link("/docs", "API", "api")}</nav>
</header>
<main id="main" tabindex="-1"{' data-live-page="1"' if live else ""}>
{body}
</main>
</body>
</html>
"""


def error_page(title: str, message: str) -> str:
    body = f'<h1>{h(title)}</h1><p class="notice notice-bad" role="alert">{h(message)}</p><p><a href="/">Back to all requests</a></p>'
    return page(title, body)
