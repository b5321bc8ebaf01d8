"""The local prefill/decode router's handoffs against stand-in engines that record what they are
sent: what each engine receives is what vLLM's and SGLang's disaggregated engines expect."""

from __future__ import annotations

import httpx
import pytest

from infra.disagg_router import VLLM_REMOTE_DECODE, serve_in_thread, start_router
from procs import free_port

pytestmark = pytest.mark.slow


def _engine(role: str, seen: list[dict], status: int = 200):
    """A stand-in engine answering one JSON body (the prefill one with kv_transfer_params)."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def complete(request):
        body = await request.json()
        seen.append(body)
        answer = {"choices": [{"text": role}]}
        if role == "prefill" and body.get("kv_transfer_params"):
            answer["kv_transfer_params"] = {"do_remote_prefill": True, "remote_engine_id": "prefill-1"}
        return JSONResponse(answer if status == 200 else {"error": {"message": "no"}}, status_code=status)

    return Starlette(routes=[Route("/v1/completions", complete, methods=["POST"])])


@pytest.fixture
def unit():
    """Start a router with ``handoff`` in front of two stand-ins; returns (url, prefill seen, decode seen)."""
    stops = []

    def start(handoff: str, prefill_status: int = 200):
        prefill, decode = [], []
        ports = [free_port() for _ in range(3)]
        stops.append(serve_in_thread(_engine("prefill", prefill, prefill_status), "127.0.0.1", ports[0], what="prefill"))
        stops.append(serve_in_thread(_engine("decode", decode), "127.0.0.1", ports[1], what="decode"))
        stops.append(start_router(f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}", "127.0.0.1",
                                  ports[2], handoff=handoff, bootstrap_port=8998))
        return f"http://127.0.0.1:{ports[2]}", prefill, decode

    yield start
    for stop in reversed(stops):
        stop()


BODY = {"model": "m", "prompt": "hello", "max_tokens": 20, "stream": True, "stream_options": {"include_usage": True}}


def test_plain_prefills_one_token_then_decodes_the_request(unit):
    url, prefill, decode = unit("plain")
    answer = httpx.post(f"{url}/v1/completions", json=BODY, timeout=10)
    assert answer.json()["choices"][0]["text"] == "decode"
    assert prefill == [{"model": "m", "prompt": "hello", "max_tokens": 1, "stream": False}] and decode == [BODY]


def test_vllm_passes_the_prefill_engines_kv_transfer_params_to_decode(unit):
    url, prefill, decode = unit("vllm")
    assert httpx.post(f"{url}/v1/completions", json=BODY, timeout=10).status_code == 200
    assert prefill[0]["kv_transfer_params"] == VLLM_REMOTE_DECODE and prefill[0]["max_tokens"] == 1
    assert decode == [{**BODY, "kv_transfer_params": {"do_remote_prefill": True, "remote_engine_id": "prefill-1"}}]


def test_sglang_sends_both_halves_at_once_with_one_bootstrap_room(unit):
    url, prefill, decode = unit("sglang")
    assert httpx.post(f"{url}/v1/completions", json=BODY, timeout=10).json()["choices"][0]["text"] == "decode"
    tags = [{k: b[k] for k in ("bootstrap_host", "bootstrap_port", "bootstrap_room")} for b in (prefill[0], decode[0])]
    assert tags[0] == tags[1] and tags[0]["bootstrap_host"] == "127.0.0.1" and tags[0]["bootstrap_port"] == 8998
    assert prefill[0]["stream"] is False and decode[0]["stream"] is True and decode[0]["max_tokens"] == 20


def test_a_prefill_error_is_relayed_and_nothing_is_decoded(unit):
    url, prefill, decode = unit("vllm", prefill_status=503)
    answer = httpx.post(f"{url}/v1/completions", json=BODY, timeout=10)
    assert answer.status_code == 503 and answer.json()["error"]["message"] == "no" and decode == []
