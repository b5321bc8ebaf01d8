"""An OpenAI-compatible HTTP server whose token timing follows the performance model.

Endpoints: ``POST /v1/chat/completions`` and ``POST /v1/completions`` (streaming as server-sent
events, with ``stream_options.include_usage``, or one JSON body), ``GET /v1/models``,
``GET /metrics`` (Prometheus text, vLLM's metric names), ``GET /health``.

Requests are scheduled by ``profiler.emulator.engine`` (continuous batching, a batch limit, a
queue). Prompt tokens are counted as UTF-8 bytes / ``chars_per_token`` (1.0 by default, which
is exactly what slaplan's byte-level tokenizer counts). Answer lengths follow
``profiler.emulator.length``: ``max_tokens`` (or ``max_completion_tokens``), ``ignore_eos`` and
``min_tokens`` are honoured; otherwise an answer ends at its sampled end-of-sequence token with
``finish_reason`` ``"stop"``, or is cut at ``max_tokens`` with ``"length"``. An emulator playing
the prefill or decode role of a disaggregated unit also plays vLLM's KV-connector handoff
(``kv_transfer_params``, see ``_kv_transfer``) and SGLang's bootstrap handoff (the prefill role
answers ``GET /rooms/{room}``, also on ``serve``'s ``bootstrap_port``; see
``profiler.emulator.bootstrap``), so the local router's ``vllm`` and ``sglang`` handoffs run
without GPUs.
"""


import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from profiler.emulator.bootstrap import Rooms, await_prefill, bootstrap_of, room_answer
from profiler.emulator.engine import TTFT_BUCKETS_S, Engine, Sequence, count_tokens, token_text
from profiler.emulator.length import natural_length, output_plan

DEFAULT_MAX_TOKENS = 256
DEFAULT_ANSWER_TOKENS = 256


class EmulatorSettings(BaseModel):
    """What the server calls itself and how it counts tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    served_model_name: str
    chars_per_token: float = Field(default=1.0, gt=0, allow_inf_nan=False, description="prompt bytes per token")
    default_max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, gt=0)
    mean_answer_tokens: float = Field(default=DEFAULT_ANSWER_TOKENS, ge=2, allow_inf_nan=False,
                                      description="mean natural answer length, tokens (EOS included)")
    seed: int = Field(default=0, description="seeds the answer lengths")
    bootstrap_timeout_s: float = Field(default=60.0, gt=0, allow_inf_nan=False,
                                       description="how long a room's KV cache is waited for (s)")
    description: str = ""


def _error(status: int, message: str, kind: str = "BadRequestError"):
    from fastapi.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": status}},
                        status_code=status, headers={"Cache-Control": "no-store"})


def _text_of(content: Any) -> str:
    """The text of a chat message's content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _prompt_text(body: dict[str, Any], chat: bool) -> str | None:
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return None
        return "".join(_text_of(m.get("content")) for m in messages if isinstance(m, dict))
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        return "".join(p if isinstance(p, str) else " " * len(p) for p in prompt)
    return prompt if isinstance(prompt, str) else None


class Sampling(BaseModel):
    """The request fields that decide an answer's length."""

    model_config = ConfigDict(frozen=True)

    max_tokens: int
    min_tokens: int = 0
    ignore_eos: bool = False
    seed: int | None = None


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _sampling(body: dict[str, Any], default_max_tokens: int) -> Sampling | str:
    """The request's length fields, or an error message naming the bad field."""
    field = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = body.get(field)
    if max_tokens is None:
        max_tokens = default_max_tokens
    elif not _integer(max_tokens) or max_tokens < 1:
        return f"{field}: must be a positive integer"
    min_tokens = body.get("min_tokens")
    min_tokens = 0 if min_tokens is None else min_tokens
    if not _integer(min_tokens) or min_tokens < 0:
        return "min_tokens: must be a non-negative integer"
    if min_tokens > max_tokens:
        return f"min_tokens: must be less than or equal to {field}={max_tokens}, got {min_tokens}"
    ignore_eos = body.get("ignore_eos", False)
    if not isinstance(ignore_eos, bool):
        return "ignore_eos: must be a boolean"
    seed = body.get("seed")
    if seed is not None and not _integer(seed):
        return "seed: must be an integer"
    return Sampling(max_tokens=max_tokens, min_tokens=min_tokens, ignore_eos=ignore_eos, seed=seed)


def _kv_transfer(body: dict[str, Any], engine: Engine, engine_id: str) -> dict[str, Any] | str | None:
    """vLLM's KV-connector handoff as an emulator playing a role reads it: a prefill engine asked
    (``kv_transfer_params.do_remote_decode``) to keep its KV cache for a remote decode answers
    where it is; a decode engine takes ``kv_transfer_params`` only when they name that remote
    prefill. Returns the parameters to answer with, an error message naming the field, or None."""
    params = body.get("kv_transfer_params")
    if params is None:
        return None
    if not isinstance(params, dict):
        return "kv_transfer_params: must be an object"
    if engine.timing.prefill_only and params.get("do_remote_decode"):
        return {"do_remote_prefill": True, "do_remote_decode": False, "remote_engine_id": engine_id,
                "remote_block_ids": [0], "remote_host": None, "remote_port": None}
    if engine.timing.skip_prefill and not (params.get("do_remote_prefill") and params.get("remote_engine_id")):
        return "kv_transfer_params: a decode engine needs the prefill engine's do_remote_prefill and remote_engine_id"
    return None


def create_app(engine: Engine, settings: EmulatorSettings):
    """The FastAPI application serving ``engine`` (started and stopped with the app)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

    rooms = Rooms()  # the prefill role's finished bootstrap rooms
    bootstrap_client = None  # the decode role's client for the prefill engine's bootstrap server

    @asynccontextmanager
    async def lifespan(_app):
        nonlocal bootstrap_client
        import httpx

        engine.start()
        try:
            if engine.timing.skip_prefill:
                async with httpx.AsyncClient(timeout=settings.bootstrap_timeout_s + 10) as bootstrap_client:
                    yield
            else:
                yield
        finally:
            await engine.stop()

    app = FastAPI(title="slaplan engine emulator", lifespan=lifespan, docs_url=None, redoc_url=None)
    created = int(time.time())
    engine_id = uuid.uuid4().hex  # names this engine's KV cache to a remote decode engine

    @app.get("/health")
    async def health():
        return PlainTextResponse("ok")

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{
            "id": settings.served_model_name, "object": "model", "created": created,
            "owned_by": "slaplan-emulator", "root": settings.served_model_name,
            "max_model_len": engine.timing.kv_tokens,
        }]}

    @app.get("/rooms/{room}")
    async def room(room: int):
        """SGLang's bootstrap server on a prefill engine: answers once ``room``'s KV cache is ready."""
        if not engine.timing.prefill_only:
            return _error(404, "bootstrap rooms are served by a prefill engine only", "NotFoundError")
        status, body = await room_answer(rooms, room, settings.bootstrap_timeout_s)
        return JSONResponse(body, status_code=status)

    @app.get("/metrics")
    async def metrics():
        return PlainTextResponse(_metrics_text(engine, settings.served_model_name),
                                 media_type="text/plain; version=0.0.4")

    async def complete(request: Request, chat: bool):
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            return _error(400, "the request body is not valid JSON")
        if not isinstance(body, dict):
            return _error(400, "the request body must be a JSON object")
        model = body.get("model")
        if model is not None and model != settings.served_model_name:
            return _error(404, f"The model `{model}` does not exist.", "NotFoundError")
        text = _prompt_text(body, chat)
        if text is None:
            return _error(400, "messages: a non-empty list is required" if chat else "prompt: a string is required")
        sampling = _sampling(body, settings.default_max_tokens)
        if isinstance(sampling, str):
            return _error(400, sampling)
        max_tokens = sampling.max_tokens
        kv_transfer = _kv_transfer(body, engine, engine_id)
        if isinstance(kv_transfer, str):
            return _error(400, kv_transfer)
        tag = bootstrap_of(body)
        if isinstance(tag, str):
            return _error(400, tag)
        prompt_tokens = count_tokens(text, settings.chars_per_token)
        if not engine.fits(prompt_tokens, max_tokens):
            return _error(400, f"This model's maximum context length is {engine.timing.kv_tokens} tokens; "
                               f"the request needs {prompt_tokens + max_tokens} ({prompt_tokens} in the prompt, "
                               f"{max_tokens} to generate).")
        n = body.get("n", 1)
        if n != 1:
            return _error(400, "n: only 1 is supported")
        natural = natural_length(text, mean_tokens=settings.mean_answer_tokens, seed=settings.seed,
                                 request_seed=sampling.seed)
        tokens, reason = output_plan(natural, max_tokens=max_tokens, min_tokens=sampling.min_tokens,
                                     ignore_eos=sampling.ignore_eos)
        if tag is not None and engine.timing.skip_prefill:
            missing = await await_prefill(bootstrap_client, tag)
            if missing:
                return _error(502, missing, "BootstrapError")
        seq = await engine.submit(prompt_tokens, max_tokens, tokens, reason)
        prefilled = (lambda: rooms.finish(tag.room)) if tag is not None and engine.timing.prefill_only else None
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        name = settings.served_model_name
        if body.get("stream"):
            options = body.get("stream_options") or {}
            usage = bool(options.get("include_usage")) if isinstance(options, dict) else False
            return StreamingResponse(_stream(engine, seq, rid, name, chat, usage, settings.chars_per_token, prefilled),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        try:
            count = await _collect(seq)
        except asyncio.CancelledError:
            engine.cancel(seq)
            raise
        if prefilled:
            prefilled()
        content = "".join(_token_text(seq, i, settings.chars_per_token) for i in range(count))
        choice: dict[str, Any] = ({"index": 0, "message": {"role": "assistant", "content": content},
                                   "logprobs": None, "finish_reason": seq.finish_reason} if chat else
                                  {"index": 0, "text": content, "logprobs": None, "finish_reason": seq.finish_reason})
        answer = {"id": rid, "object": "chat.completion" if chat else "text_completion",
                  "created": int(time.time()), "model": name, "choices": [choice], "usage": _usage(seq, count)}
        return JSONResponse({**answer, "kv_transfer_params": kv_transfer} if kv_transfer else answer)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await complete(request, chat=True)

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await complete(request, chat=False)

    return app


def _usage(seq: Sequence, completion: int) -> dict[str, int]:
    return {"prompt_tokens": seq.prompt_tokens, "completion_tokens": completion,
            "total_tokens": seq.prompt_tokens + completion}


def _token_text(seq: Sequence, index: int, chars_per_token: float) -> str:
    """The text of output token ``index``; the end-of-sequence token has none."""
    if seq.finish_reason == "stop" and index == seq.output_tokens - 1:
        return ""
    return token_text(index, chars_per_token)


async def _collect(seq: Sequence) -> int:
    count = 0
    while (event := await seq.events.get()) is not None:
        count += event
    return count


def _chunk(rid: str, name: str, chat: bool, text: str | None, finish: str | None, first: bool) -> str:
    if chat:
        delta: dict[str, Any] = {} if text is None else {"content": text}
        if first:
            delta = {"role": "assistant", **delta}
        choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        kind = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}
        kind = "text_completion"
    payload = {"id": rid, "object": kind, "created": int(time.time()), "model": name, "choices": [choice]}
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n"


async def _stream(engine: Engine, seq: Sequence, rid: str, name: str, chat: bool, usage: bool,
                  chars_per_token: float, finished: Callable[[], None] | None = None) -> AsyncIterator[str]:
    """One SSE event per token; the last token's event carries ``finish_reason`` (an
    end-of-sequence token's event has empty text); then the usage event (no choices) when asked
    for, then ``[DONE]``. A client that goes away frees its slot. ``finished`` is called once
    the last token is out."""
    count = 0
    done = False
    try:
        while (event := await seq.events.get()) is not None:
            for _ in range(event):
                text = _token_text(seq, count, chars_per_token)
                count += 1
                finish = seq.finish_reason if count >= seq.output_tokens else None
                yield _chunk(rid, name, chat, text, finish, count == 1)
        done = True
        if finished:
            finished()
        if usage:
            payload = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                       "created": int(time.time()), "model": name, "choices": [], "usage": _usage(seq, count)}
            yield f"data: {json.dumps(payload, separators=(',', ':'))}\n\n"
        yield "data: [DONE]\n\n"
    finally:
        if not done:
            engine.cancel(seq)


def _metrics_text(engine: Engine, name: str) -> str:
    """Prometheus exposition text with vLLM's metric names for the few that apply."""
    s = engine.stats
    label = f'model_name="{name}"'
    lines = [
        "# HELP vllm:num_requests_running Requests in the running batch.", "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{label}}} {engine.running}",
        "# HELP vllm:num_requests_waiting Requests waiting to be scheduled.", "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{label}}} {engine.waiting}",
        "# HELP vllm:prompt_tokens_total Prompt tokens processed.", "# TYPE vllm:prompt_tokens_total counter",
        f"vllm:prompt_tokens_total{{{label}}} {s.prompt_tokens}",
        "# HELP vllm:generation_tokens_total Tokens generated.", "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{label}}} {s.generated_tokens}",
        "# HELP vllm:request_success_total Requests finished.", "# TYPE vllm:request_success_total counter",
        *(f'vllm:request_success_total{{{label},finished_reason="{reason}"}} {count}'
          for reason, count in sorted(s.finished.items())),
        "# HELP slaplan_emulator_requests_total Requests received.", "# TYPE slaplan_emulator_requests_total counter",
        f"slaplan_emulator_requests_total{{{label}}} {s.requests}",
        "# HELP slaplan_emulator_cancelled_total Requests abandoned by their clients.",
        "# TYPE slaplan_emulator_cancelled_total counter",
        f"slaplan_emulator_cancelled_total{{{label}}} {s.cancelled}",
        "# HELP slaplan_emulator_steps_total Engine steps run.", "# TYPE slaplan_emulator_steps_total counter",
        f"slaplan_emulator_steps_total{{{label}}} {s.steps}",
        "# HELP slaplan_emulator_busy_seconds_total Emulated engine time spent in steps.",
        "# TYPE slaplan_emulator_busy_seconds_total counter",
        f"slaplan_emulator_busy_seconds_total{{{label}}} {s.busy_s:.6f}",
        "# HELP vllm:time_to_first_token_seconds Time to first token.",
        "# TYPE vllm:time_to_first_token_seconds histogram",
    ]
    for bound, count in zip(TTFT_BUCKETS_S, s.ttft_buckets):
        lines.append(f'vllm:time_to_first_token_seconds_bucket{{{label},le="{bound}"}} {count}')
    lines.append(f'vllm:time_to_first_token_seconds_bucket{{{label},le="+Inf"}} {s.ttft_count}')
    lines.append(f"vllm:time_to_first_token_seconds_count{{{label}}} {s.ttft_count}")
    lines.append(f"vllm:time_to_first_token_seconds_sum{{{label}}} {s.ttft_sum_s:.6f}")
    return "\n".join(lines) + "\n"


def serve(app, host: str, port: int, *, bootstrap_port: int | None = None, log_level: str = "warning") -> None:
    """Run ``app`` with uvicorn on ``host``:``port`` (and ``bootstrap_port``, where a decode
    engine looks for a prefill engine's bootstrap server) until interrupted."""
    import socket

    import uvicorn

    sockets = []
    for number in (port, bootstrap_port):
        if number is None:
            continue
        family, kind, proto, _, address = socket.getaddrinfo(host, number, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sockets.append(sock)
    uvicorn.Server(uvicorn.Config(app, log_level=log_level, access_log=False)).run(sockets=sockets)
