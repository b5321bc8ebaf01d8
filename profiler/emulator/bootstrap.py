"""SGLang's prefill/decode handoff as emulators playing the two roles perform it.

An SGLang router sends each request to both engines at once, tagged with the prefill engine's
host, its bootstrap port and a random room number (``bootstrap_host``, ``bootstrap_port``,
``bootstrap_room``). The prefill engine computes the prompt's KV cache and serves it under that
room from its bootstrap server; the decode engine asks that server for the room and starts
decoding once the cache is there.

Here the prefill emulator marks a room ready when its one-token prefill of a tagged request is
done (``Rooms``) and answers ``GET /rooms/{room}`` once the room is ready (404 after a timeout),
on its own port and on ``--bootstrap-port``; the decode emulator waits on that
(``await_prefill``) before it submits the request. No KV bytes move: the wait is the handoff.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

from pydantic import BaseModel, ConfigDict

READY_ROOMS_KEPT = 10_000  # finished rooms remembered for a decode request still on its way
MAX_ROOM = 2**64 - 1  # SGLang's rooms are unsigned 64-bit numbers


class Bootstrap(BaseModel):
    """Where a decode engine finds a tagged request's KV cache."""

    model_config = ConfigDict(frozen=True)

    host: str
    port: int
    room: int


def bootstrap_of(body: dict[str, Any]) -> Bootstrap | str | None:
    """The request's bootstrap tag, None when it has none, or an error message naming the field."""
    if body.get("bootstrap_room") is None:
        return None
    room, host, port = body.get("bootstrap_room"), body.get("bootstrap_host"), body.get("bootstrap_port")
    if not isinstance(room, int) or isinstance(room, bool) or not 0 <= room <= MAX_ROOM:
        return "bootstrap_room: must be an integer from 0 to 2**64 - 1"
    if not isinstance(host, str) or not host:
        return "bootstrap_host: the prefill engine's host is required with bootstrap_room"
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        return "bootstrap_port: the prefill engine's bootstrap port (1-65535) is required with bootstrap_room"
    return Bootstrap(host=host, port=port, room=room)


class Rooms:
    """Rooms whose prefill is done, and the decode requests waiting for them (one event loop)."""

    def __init__(self, kept: int = READY_ROOMS_KEPT):
        self._ready: OrderedDict[int, None] = OrderedDict()
        self._waiting: dict[int, asyncio.Event] = {}
        self._kept = kept

    def finish(self, room: int) -> None:
        """Mark ``room``'s KV cache ready (the oldest ready rooms are forgotten past ``kept``)."""
        self._ready[room] = None
        while len(self._ready) > self._kept:
            self._ready.popitem(last=False)
        if (event := self._waiting.get(room)) is not None:
            event.set()

    async def wait(self, room: int, timeout_s: float) -> bool:
        """Whether ``room`` is ready within ``timeout_s`` seconds."""
        if room in self._ready:
            return True
        event = self._waiting.setdefault(room, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            if self._waiting.get(room) is event:
                del self._waiting[room]


async def room_answer(rooms: Rooms, room: int, timeout_s: float) -> tuple[int, dict[str, Any]]:
    """What the bootstrap server answers ``GET /rooms/{room}`` with: (HTTP status, JSON body)."""
    if not 0 <= room <= MAX_ROOM:
        return 400, {"error": "room: must be an integer from 0 to 2**64 - 1"}
    if await rooms.wait(room, timeout_s):
        return 200, {"room": room, "ready": True}
    return 404, {"error": f"room {room}: no prefill finished within {timeout_s:g} s"}


async def await_prefill(client, tag: Bootstrap) -> str | None:
    """Wait until the prefill engine named by ``tag`` has the room's KV cache (``client``: an
    ``httpx.AsyncClient``); None when it has, else a message naming the field."""
    import httpx

    host = f"[{tag.host}]" if ":" in tag.host else tag.host
    try:
        answer = await client.get(f"http://{host}:{tag.port}/rooms/{tag.room}")
    except httpx.HTTPError as exc:
        return f"bootstrap_port: the prefill engine's bootstrap server at {tag.host}:{tag.port} is unreachable ({exc})"
    if answer.status_code != 200:
        return f"bootstrap_room: the prefill engine has no KV cache for room {tag.room}"
    return None
