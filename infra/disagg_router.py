"""A local frontend for a disaggregated unit: each request is prefilled on one engine, then
decoded on another, behind one OpenAI-compatible endpoint (as Dynamo's frontend routes them).

``POST /v1/chat/completions`` and ``/v1/completions``: the request goes to the prefill engine
with ``max_tokens: 1`` (no streaming) and, once that answers, unchanged to the decode engine,
whose answer (streamed or not) is relayed byte for byte. ``GET /v1/models`` and ``/health``
are the decode engine's. Used by ``infra.deploy_targets.LocalTarget`` with emulators started
``--mode prefill`` and ``--mode decode``; it runs in a thread of the worker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import asynccontextmanager


def router_app(prefill_url: str, decode_url: str):
    """The Starlette app routing to the engines at ``prefill_url`` and ``decode_url`` (bases)."""
    import httpx
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    client: httpx.AsyncClient | None = None  # made in the server's own event loop

    @asynccontextmanager
    async def lifespan(app):
        nonlocal client
        client = httpx.AsyncClient(timeout=None)
        yield
        await client.aclose()

    async def relay_get(request: Request) -> Response:
        answer = await client.get(decode_url + request.url.path)
        return Response(answer.content, status_code=answer.status_code, media_type=answer.headers.get("content-type"))

    async def generate(request: Request) -> Response:
        body = await request.json()
        first = {k: v for k, v in body.items() if k not in ("stream", "stream_options", "max_completion_tokens")}
        prefilled = await client.post(prefill_url + request.url.path, json={**first, "max_tokens": 1, "stream": False})
        if prefilled.status_code != 200:
            return Response(prefilled.content, status_code=prefilled.status_code,
                            media_type=prefilled.headers.get("content-type"))
        answer = await client.send(client.build_request("POST", decode_url + request.url.path, json=body), stream=True)

        async def relay():
            try:
                async for chunk in answer.aiter_raw():
                    yield chunk
            finally:
                await answer.aclose()

        return StreamingResponse(relay(), status_code=answer.status_code, media_type=answer.headers.get("content-type"))

    routes = [Route("/v1/models", relay_get), Route("/health", relay_get),
              Route("/v1/chat/completions", generate, methods=["POST"]),
              Route("/v1/completions", generate, methods=["POST"])]
    return Starlette(routes=routes, lifespan=lifespan)


def start_router(prefill_url: str, decode_url: str, host: str, port: int) -> Callable[[], None]:
    """Serve the router on ``host:port`` in a daemon thread; returns a function that stops it."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(router_app(prefill_url, decode_url), host=host, port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name=f"disagg-router-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"the local prefill/decode router did not start on {host}:{port}")
        time.sleep(0.02)

    def stop() -> None:
        server.should_exit = True
        thread.join(10)

    return stop
