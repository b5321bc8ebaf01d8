"""The HTTP/1.1 connection ``slaplan serve`` runs: uvicorn's h11 protocol with bounded request heads.

uvicorn answers a request head h11 cannot parse with a plain-text 400 and closes the socket at
once; with the rest of an oversized head still unread, the kernel then resets the connection and
the client sees ``ECONNRESET`` instead of an answer. Here a request line over
``MAX_REQUEST_LINE_BYTES`` is answered ``414 URI Too Long``, a head (request line and header
fields) over ``MAX_HEAD_BYTES`` ``431 Request Header Fields Too Large``, and any other malformed
request 400, each with a Kubernetes ``Status`` body; then the connection is closed the way
servers close after an error (a lingering close): the answer is sent and the sending side shut,
whatever the client still sends is read and dropped until it closes too (asyncio then closes the
transport) or ``LINGER_S`` pass.
"""

from __future__ import annotations

import json
import sys
from http import HTTPStatus

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_REQUEST_LINE_BYTES = 16 * 1024  # method, target and version; a URL longer than this is refused (414)
MAX_HEAD_BYTES = 64 * 1024  # request line and every header field; more is refused (431)
PHRASES = {414: "URI Too Long"}  # RFC 9110's; Python's http module still has RFC 2616's "Request-URI Too Long"
LINGER_S = 2.0  # after a refusal, how long what the client still sends is read and dropped


def head_refusal(buffer: bytes) -> tuple[int, str] | None:
    """(status, message) when the start of a request in ``buffer`` (the bytes received since the
    last request, possibly incomplete) is already too large; None while it fits."""
    start = len(buffer) - len(buffer.lstrip(b"\r\n"))  # blank lines before a request are ignored
    line_end = buffer.find(b"\n", start)
    line = (line_end if line_end >= 0 else len(buffer)) - start
    if line > MAX_REQUEST_LINE_BYTES:
        return 414, f"the request line is longer than {MAX_REQUEST_LINE_BYTES} bytes"
    head_end = buffer.find(b"\r\n\r\n", start)
    head = (head_end if head_end >= 0 else len(buffer)) - start
    if head > MAX_HEAD_BYTES:
        return 431, f"the request line and header fields are longer than {MAX_HEAD_BYTES} bytes"
    return None


def refusal_bytes(code: int, message: str) -> bytes:
    """A complete HTTP/1.1 response with a ``Status`` body that closes the connection."""
    from api.errors import status_body

    body = json.dumps(status_body(code, message)).encode()
    head = (f"HTTP/1.1 {code} {PHRASES.get(code) or HTTPStatus(code).phrase}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode("ascii") + body


class BoundedH11Protocol(H11Protocol):
    """uvicorn's ``H11Protocol``, refusing oversized and malformed request heads with a Status and a
    lingering close (see the module's docstring); pass it as ``uvicorn.run(..., http=...)``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.refused = False

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return  # read and dropped: the answer is on its way
        if self.conn.their_state is h11.IDLE:
            refusal = head_refusal(self.conn.trailing_data[0] + data)
            if refusal is not None:
                self.refuse(*refusal)
                return
        super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        """uvicorn calls this while handling h11's ``RemoteProtocolError``; that error's own status
        (431 for a head h11 would not buffer, 501 for a transfer coding it does not know) is kept."""
        error = sys.exc_info()[1]
        code = getattr(error, "error_status_hint", 400)
        self.refuse(code, f"the request is not valid HTTP/1.1: {error}" if error is not None else msg)

    def refuse(self, code: int, message: str) -> None:
        """Answer ``code`` and close without a reset: shut the sending side, drop what arrives."""
        self.logger.warning("refused a request with %d: %s", code, message)
        self.refused = True
        self._unset_keepalive_if_required()
        self.transport.write(refusal_bytes(code, message))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_S, self.transport.close)
