"""Oversized and malformed request heads, sent to a real `slaplan serve` over a raw socket: a Status
answer (414, 431, 400) and a clean close, never a connection reset."""

from __future__ import annotations

import json
import socket

import pytest
from procs import start_serve, stop

from api.http_protocol import MAX_HEAD_BYTES, MAX_REQUEST_LINE_BYTES, head_refusal


def test_head_refusal_measures_the_line_and_the_head_as_they_arrive():
    line = b"GET /" + b"a" * (MAX_REQUEST_LINE_BYTES - 5)  # exactly the limit, not yet ended
    assert head_refusal(line) is None
    assert head_refusal(line + b"a")[0] == 414  # one byte more, before its end has arrived
    assert head_refusal(b"\r\n\r\n" + line + b" HTTP/1.1\r\n")[0] == 414  # blank lines before do not count
    fields = b"GET / HTTP/1.1\r\n" + b"x: y\r\n" * (MAX_HEAD_BYTES // 6)
    assert head_refusal(fields[:MAX_HEAD_BYTES]) is None
    assert head_refusal(fields)[0] == 431
    # a body after a head that fits is not the head's
    assert head_refusal(b"POST / HTTP/1.1\r\ncontent-length: 99999\r\n\r\n" + b"{" * 99999) is None


def _exchange(port: int, request: bytes) -> bytes:
    """Send ``request`` whole, then read until the server closes; ConnectionResetError if it resets."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(request)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
        return answer


def _status(answer: bytes) -> tuple[str, dict, dict]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *fields = head.decode("ascii").split("\r\n")
    headers = dict(f.lower().split(": ", 1) for f in fields)
    return status_line, headers, json.loads(body)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    url, procs = start_serve(tmp_path_factory.mktemp("limits"))
    yield int(url.rsplit(":", 1)[1])
    for proc in procs:
        stop(proc)


@pytest.mark.slow
def test_a_one_megabyte_request_line_is_a_414_status_and_a_clean_close(served):
    answer = _exchange(served, b"GET /apis?" + b"a" * 1_000_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    line, headers, body = _status(answer)
    assert line == "HTTP/1.1 414 URI Too Long" and headers["connection"] == "close"
    assert (body["kind"], body["status"], body["code"], body["reason"]) == ("Status", "Failure", 414, "RequestURITooLong")
    assert str(MAX_REQUEST_LINE_BYTES) in body["message"]


@pytest.mark.slow
def test_oversized_header_fields_are_a_431_status(served):
    # sent in one piece as well as more than h11 would buffer: both are refused alike
    answer = _exchange(served, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n")
    line, _headers, body = _status(answer)
    assert line == "HTTP/1.1 431 Request Header Fields Too Large"
    assert (body["code"], body["reason"]) == (431, "RequestHeaderFieldsTooLarge")


@pytest.mark.slow
def test_a_malformed_request_is_a_400_status(served):
    line, _headers, body = _status(_exchange(served, b"GET / HTTP/1.1\r\nno colon here\r\n\r\n"))
    assert line.startswith("HTTP/1.1 400 ") and body["code"] == 400
    assert body["message"].startswith("the request is not valid HTTP/1.1")


@pytest.mark.slow
def test_requests_within_the_limits_are_served(served):
    target = b"/healthz?" + b"a" * (MAX_REQUEST_LINE_BYTES - 100)
    answer = _exchange(served, b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"ok")


@pytest.mark.slow
def test_over_https_an_oversized_request_line_is_a_414_too(tmp_path):
    import ssl

    from certificates import self_signed

    cert, key = self_signed(tmp_path)
    url, procs = start_serve(tmp_path, tls=(cert, key))
    try:
        context = ssl.create_default_context(cafile=str(cert))
        with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=30) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(b"GET /apis?" + b"a" * 1_000_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                answer = b""
                while chunk := s.recv(65536):
                    answer += chunk
    finally:
        for proc in procs:
            stop(proc)
    line, _headers, body = _status(answer)
    assert line == "HTTP/1.1 414 URI Too Long" and body["code"] == 414
