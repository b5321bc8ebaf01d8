"""The web dashboard: server-rendered pages (escaped f-strings), hand-drawn SVG charts and a
little vanilla JavaScript, served by the API itself (nothing to start, nothing fetched from
elsewhere)."""
