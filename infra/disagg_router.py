"""A local frontend for a disaggregated unit: each request is prefilled on one engine, then
decoded on another, behind one OpenAI-compatible endpoint (as Dynamo's frontend routes them).

``POST /v1/chat/completions`` and ``/v1/completions`` go through the unit's ``handoff`` (one of
``HANDOFFS``, how its engines pass a request's KV cache along), then to the decode engine, whose
answer (streamed or not) is relayed byte for byte:

- ``plain``: the request goes to the prefill engine with ``max_tokens: 1`` (no streaming) and,
  once that answers, unchanged to the decode engine (slaplan's emulators ``--mode prefill`` and
  ``--mode decode``);
- ``vllm``: the same, with ``kv_transfer_params: {do_remote_decode: true}`` on the prefill request;
  the ``kv_transfer_params`` the prefill engine answers with (where its KV blocks are) go with the
  decode request (vLLM with a KV connector such as NixlConnector, ``--kv-transfer-config``);
- ``sglang``: the request goes to both engines at once, tagged with the prefill engine's bootstrap
  host and port and a random room number that pairs the two halves (SGLang
  ``--disaggregation-mode prefill|decode``; the decode engine waits for the KV cache itself).

``GET /v1/models`` and ``/health`` are the decode engine's. Used by
``infra.deploy_targets.LocalTarget``; it runs in a thread of the worker.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

STREAM_FIELDS = ("stream", "stream_options", "max_completion_tokens")
# What vLLM's KV connectors read on a prefill request whose KV cache another engine decodes from.
VLLM_REMOTE_DECODE = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                      "remote_block_ids": None, "remote_host": None, "remote_port": None}


@dataclass(frozen=True)
class Engines:
    """The unit's two engines as the router reaches them (``client``: an ``httpx.AsyncClient``)."""

    client: Any
    prefill_url: str
    decode_url: str
    bootstrap_port: int | None = None  # the prefill engine's side port (SGLang's bootstrap server)


# A handoff: (engines, path, request body) -> the decode request's body and a prefill still under
# way (or None), or the prefill engine's error response to relay.
Handoff = Callable[[Engines, str, dict], Awaitable[Any]]


def _one_token(body: dict) -> dict:
    """``body`` as a non-streamed request for one token (the prefill half)."""
    return {**{k: v for k, v in body.items() if k not in STREAM_FIELDS}, "max_tokens": 1, "stream": False}


def _relayed(answer) -> Any:
    from starlette.responses import Response

    return Response(answer.content, status_code=answer.status_code, media_type=answer.headers.get("content-type"))


async def _plain(engines: Engines, path: str, body: dict) -> Any:
    prefilled = await engines.client.post(engines.prefill_url + path, json=_one_token(body))
    return (body, None) if prefilled.status_code == 200 else _relayed(prefilled)


async def _vllm(engines: Engines, path: str, body: dict) -> Any:
    prefilled = await engines.client.post(engines.prefill_url + path,
                                          json={**_one_token(body), "kv_transfer_params": VLLM_REMOTE_DECODE})
    if prefilled.status_code != 200:
        return _relayed(prefilled)
    params = prefilled.json().get("kv_transfer_params")
    return ({**body, "kv_transfer_params": params} if params else body), None


async def _sglang(engines: Engines, path: str, body: dict) -> Any:
    tagged = {**body, "bootstrap_host": urlsplit(engines.prefill_url).hostname,
              "bootstrap_port": engines.bootstrap_port, "bootstrap_room": secrets.randbits(63)}
    prefill = {**{k: v for k, v in tagged.items() if k != "stream_options"}, "stream": False}
    return tagged, asyncio.ensure_future(engines.client.post(engines.prefill_url + path, json=prefill))


HANDOFFS: dict[str, Handoff] = {"plain": _plain, "vllm": _vllm, "sglang": _sglang}


def router_app(prefill_url: str, decode_url: str, *, handoff: str = "plain", bootstrap_port: int | None = None):
    """The Starlette app routing to the engines at ``prefill_url`` and ``decode_url`` (bases)
    with ``handoff`` (a key of ``HANDOFFS``)."""
    import httpx
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    if handoff not in HANDOFFS:
        raise ValueError(f"handoff: unknown {handoff!r}; one of {', '.join(HANDOFFS)}")
    hand_over = HANDOFFS[handoff]
    engines: Engines | None = None  # its client is made in the server's own event loop

    @asynccontextmanager
    async def lifespan(app):
        nonlocal engines
        async with httpx.AsyncClient(timeout=None) as client:
            engines = Engines(client, prefill_url, decode_url, bootstrap_port)
            yield

    async def relay_get(request: Request) -> Response:
        return _relayed(await engines.client.get(decode_url + request.url.path))

    async def generate(request: Request) -> Response:
        handed = await hand_over(engines, request.url.path, await request.json())
        if isinstance(handed, Response):
            return handed
        body, prefilling = handed
        client = engines.client
        answer = await client.send(client.build_request("POST", decode_url + request.url.path, json=body), stream=True)

        async def relay():
            try:
                async for chunk in answer.aiter_raw():
                    yield chunk
            finally:
                await answer.aclose()
                if prefilling is not None:
                    await prefilling

        return StreamingResponse(relay(), status_code=answer.status_code, media_type=answer.headers.get("content-type"))

    routes = [Route("/v1/models", relay_get), Route("/health", relay_get),
              Route("/v1/chat/completions", generate, methods=["POST"]),
              Route("/v1/completions", generate, methods=["POST"])]
    return Starlette(routes=routes, lifespan=lifespan)


def start_router(prefill_url: str, decode_url: str, host: str, port: int, *, handoff: str = "plain",
                 bootstrap_port: int | None = None) -> Callable[[], None]:
    """Serve the router on ``host:port`` in a daemon thread; returns a function that stops it."""
    app = router_app(prefill_url, decode_url, handoff=handoff, bootstrap_port=bootstrap_port)
    return serve_in_thread(app, host, port, what="the local prefill/decode router")


def serve_in_thread(app, host: str, port: int, *, what: str) -> Callable[[], None]:
    """Serve the ASGI ``app`` on ``host:port`` in a daemon thread until the returned function is
    called; raises RuntimeError naming ``what`` when it does not start within 20 s."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name=f"asgi-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"{what} did not start on {host}:{port}")
        time.sleep(0.02)

    def stop() -> None:
        server.should_exit = True
        thread.join(10)

    return stop
