"""The engine emulator's scheduler: continuous batching timed by the performance model.

One ``Rank`` is one attention rank of an engine (an engine with attention data-parallelism
``dp`` has ``dp`` ranks, each with its own batch). Its loop runs engine steps back to back:

- a step decodes one token for every running sequence and spends the rest of its token budget
  (``max_num_tokens``) on prompt chunks of admitted sequences, first come first served;
- its duration (s) = ``decode_step_s`` for the sequences that emit a token in it (the decoding
  ones plus those whose prefill completes in it) at their mean context, plus the prefill time of
  the prompt chunks it processes, divided by ``speed``. The chunks of one step run as one
  forward pass, as in vLLM or SGLang: k prompts chunked together cost ``prefill_s`` of k prompts
  of their mean length prefilled together (weights streamed once, not k times), shared in
  proportion to the tokens the chunks take;
- a sequence is admitted while the rank holds fewer than ``max_batch`` sequences and their
  reserved KV tokens (prompt + max_tokens) fit its KV cache; the rest wait in a FIFO queue;
- every request first waits the backend's fixed first-token cost (HTTP, tokenization, router).

So at concurrency 1 the time to first token is fixed + prefill + one decode step, and the time
per output token is one decode step, as the model predicts; with more clients, steps carry more
sequences and prompt chunks, so both grow with load; past the batch limit requests queue.

Steps are kept on an ideal clock (each starts when the previous one should have ended), so
event-loop jitter delays a token but does not slow the emulated engine down.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from profiler.emulator.speed import MAX_SPEED, MIN_SPEED

# Upper bounds (s) of the time-to-first-token histogram on /metrics.
TTFT_BUCKETS_S = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
# Above this lag behind the ideal clock (s) the emulator gives up catching up (the host is busy).
_MAX_LAG_S = 0.05


class Timing(BaseModel):
    """How long an engine takes, in seconds: step functions and limits of one attention rank."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    decode_step_s: Callable[[int, float], float] = Field(description="(sequences, mean context tokens) -> s")
    prefill_s: Callable[[float, int], float] = Field(
        description="(prompt tokens, prompts) -> s to prefill that many whole prompts together in one pass")
    fixed_s: float = Field(ge=0, description="per-request cost before scheduling (s)")
    max_batch: int = Field(gt=0, description="running sequences per rank")
    max_num_tokens: int = Field(gt=0, description="tokens per step (decode tokens + prompt chunks)")
    kv_tokens: int = Field(gt=0, description="KV-cache capacity per rank, tokens")
    speed: float = Field(default=1.0, ge=MIN_SPEED, le=MAX_SPEED, allow_inf_nan=False,
                         description=">1 faster than the model, <1 slower")
    prefill_only: bool = False
    skip_prefill: bool = False


@dataclass(eq=False)
class Sequence:
    """One request inside the engine. ``events`` receives token counts, then ``None`` at the end.

    It generates ``output_tokens`` tokens (<= ``max_tokens``, see ``profiler.emulator.length``)
    and ends with ``finish_reason``; its KV reservation is for ``max_tokens``, as the engine
    cannot know in advance where the answer ends."""

    prompt_tokens: int
    max_tokens: int
    arrival: float
    output_tokens: int
    finish_reason: str = "length"
    events: asyncio.Queue = field(default_factory=asyncio.Queue)
    prefilled: int = 0
    generated: int = 0
    first_token_at: float | None = None
    cancelled: bool = False

    @property
    def reserved(self) -> int:
        return self.prompt_tokens + self.max_tokens

    @property
    def decoding(self) -> bool:
        return self.prefilled >= self.prompt_tokens


@dataclass
class Stats:
    """Counters for /metrics (totals since start; times in s)."""

    requests: int = 0
    finished: dict[str, int] = field(default_factory=lambda: {"stop": 0, "length": 0})
    cancelled: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    steps: int = 0
    busy_s: float = 0.0
    ttft_count: int = 0
    ttft_sum_s: float = 0.0
    ttft_buckets: list[int] = field(default_factory=lambda: [0] * len(TTFT_BUCKETS_S))

    def record_ttft(self, seconds: float) -> None:
        self.ttft_count += 1
        self.ttft_sum_s += seconds
        for i, bound in enumerate(TTFT_BUCKETS_S):
            if seconds <= bound:
                self.ttft_buckets[i] += 1


class Rank:
    """One attention rank: a waiting queue, a running batch and the step loop."""

    def __init__(self, timing: Timing, stats: Stats, clock: Callable[[], float] = time.monotonic):
        self.timing = timing
        self.stats = stats
        self.clock = clock
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    @property
    def load(self) -> int:
        return len(self.waiting) + len(self.running)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def enqueue(self, seq: Sequence) -> None:
        self.waiting.append(seq)
        self._wake.set()

    def _admit(self) -> None:
        reserved = sum(s.reserved for s in self.running)
        while self.waiting and len(self.running) < self.timing.max_batch:
            head = self.waiting[0]
            if head.cancelled:
                self.waiting.popleft()
                continue
            if self.running and reserved + head.reserved > self.timing.kv_tokens:
                break  # wait for KV memory to free up
            self.waiting.popleft()
            if self.timing.skip_prefill:
                head.prefilled = head.prompt_tokens
            self.running.append(head)
            reserved += head.reserved

    def plan_step(self) -> tuple[float, list[Sequence], dict[Sequence, int]]:
        """The next step: its duration (s), the sequences that emit a token, and prompt tokens
        processed per sequence."""
        t = self.timing
        self.running = [s for s in self.running if not s.cancelled]
        self._admit()
        decoding = [s for s in self.running if s.decoding]
        budget = max(0, t.max_num_tokens - len(decoding))
        chunks: dict[Sequence, int] = {}
        completing: list[Sequence] = []
        for s in self.running:
            if s.decoding or budget <= 0:
                continue
            take = min(s.prompt_tokens - s.prefilled, budget)
            budget -= take
            chunks[s] = take
            if s.prefilled + take >= s.prompt_tokens:
                completing.append(s)
        prefill = 0.0
        if chunks:
            prompts = sum(s.prompt_tokens for s in chunks)
            prefill = t.prefill_s(prompts / len(chunks), len(chunks)) * sum(chunks.values()) / prompts
        emitting = decoding + completing
        decode = 0.0
        if emitting:
            context = sum(s.prompt_tokens + s.generated for s in emitting) / len(emitting)
            decode = t.decode_step_s(len(emitting), context)
        return (decode + prefill) / t.speed, emitting, chunks

    def finish_step(self, emitting: list[Sequence], chunks: dict[Sequence, int], now: float) -> None:
        """Apply a step that ended at ``now``: advance prompts, hand out tokens, retire sequences."""
        for s, take in chunks.items():
            s.prefilled += take
        for s in emitting:
            if s.cancelled:
                continue
            s.generated += 1
            self.stats.generated_tokens += 1
            if s.first_token_at is None:
                s.first_token_at = now
                self.stats.record_ttft(now - s.arrival)
            s.events.put_nowait(1)
            if s.generated >= s.output_tokens:
                s.events.put_nowait(None)
                self.stats.finished[s.finish_reason] = self.stats.finished.get(s.finish_reason, 0) + 1
        self.running = [s for s in self.running if not s.cancelled and s.generated < s.output_tokens]

    async def _loop(self) -> None:
        ideal = self.clock()
        while True:
            if not self.waiting and not self.running:
                self._wake.clear()
                await self._wake.wait()
                ideal = self.clock()
            duration, emitting, chunks = self.plan_step()
            if not emitting and not chunks:
                # nothing runnable (e.g. everything cancelled): wait for new work
                self.running = [s for s in self.running if not s.cancelled]
                if not self.running:
                    continue
                await asyncio.sleep(0.001)
                continue
            now = self.clock()
            start = ideal if now - ideal < _MAX_LAG_S else now
            ideal = start + duration
            delay = ideal - self.clock()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                await asyncio.sleep(0)
            self.stats.steps += 1
            self.stats.busy_s += duration
            self.finish_step(emitting, chunks, ideal)


class Engine:
    """All attention ranks of one emulated engine; requests go to the least-loaded rank."""

    def __init__(self, timing: Timing, ranks: int = 1, clock: Callable[[], float] = time.monotonic):
        self.timing = timing
        self.stats = Stats()
        self.clock = clock
        self.ranks = [Rank(timing, self.stats, clock) for _ in range(max(1, ranks))]

    def start(self) -> None:
        for rank in self.ranks:
            rank.start()

    async def stop(self) -> None:
        for rank in self.ranks:
            await rank.stop()

    @property
    def waiting(self) -> int:
        return sum(len(r.waiting) for r in self.ranks)

    @property
    def running(self) -> int:
        return sum(len(r.running) for r in self.ranks)

    def fits(self, prompt_tokens: int, max_tokens: int) -> bool:
        """Whether one request can ever be scheduled (its KV tokens fit one rank)."""
        return prompt_tokens + max_tokens <= self.timing.kv_tokens

    async def submit(self, prompt_tokens: int, max_tokens: int, output_tokens: int | None = None,
                     finish_reason: str = "length") -> Sequence:
        """Admit a request after the fixed per-request cost; its ``events`` then yield tokens.

        It generates ``output_tokens`` (default and at most ``max_tokens``; 1 on a prefill-only
        engine) and ends with ``finish_reason``."""
        max_tokens = max(1, max_tokens)
        out = max_tokens if output_tokens is None else max(1, min(output_tokens, max_tokens))
        if self.timing.prefill_only:
            out, finish_reason = 1, ("stop" if finish_reason == "stop" and out == 1 else "length")
        seq = Sequence(prompt_tokens=max(1, prompt_tokens), max_tokens=max_tokens, arrival=self.clock(),
                       output_tokens=out, finish_reason=finish_reason)
        self.stats.requests += 1
        self.stats.prompt_tokens += seq.prompt_tokens
        fixed = self.timing.fixed_s / self.timing.speed
        if fixed > 0:
            await asyncio.sleep(fixed)
        min(self.ranks, key=lambda r: r.load).enqueue(seq)
        return seq

    def cancel(self, seq: Sequence) -> None:
        if not seq.cancelled and seq.generated < seq.output_tokens:
            seq.cancelled = True
            self.stats.cancelled += 1


def count_tokens(text: str, chars_per_token: float) -> int:
    """Prompt tokens of ``text``: UTF-8 bytes / ``chars_per_token``, rounded up (1.0 matches
    the byte-level tokenizer slaplan ships)."""
    return max(1, math.ceil(len(text.encode("utf-8")) / chars_per_token))


def token_text(index: int, chars_per_token: float) -> str:
    """The text of output token ``index``: one letter per token for the byte-level tokenizer,
    else a short word of about ``chars_per_token`` characters."""
    letter = chr(ord("a") + index % 26)
    width = max(1, round(chars_per_token))
    return letter if width == 1 else " " + letter * (width - 1)
