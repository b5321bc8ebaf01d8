"""How long an emulated answer is and why it ends (``finish_reason``), as a real engine decides.

A model ends its answer by sampling its end-of-sequence (EOS) token. The emulator gives every
answer a *natural length*: the number of tokens up to and including that EOS token. An answer
says something first (an empty one is an error to clients such as genai-bench), then has a
constant chance of EOS at each further token: natural length = 1 + a geometric number of
tokens, with mean ``mean_tokens`` in all. The draw is seeded by the server's seed, the
request's own ``seed`` and the prompt text, so the same request always gets the same answer
length, whatever the arrival order.

The request's sampling parameters then decide, as in vLLM:

- ``ignore_eos``: the EOS token is ignored, the answer runs to ``max_tokens`` → ``"length"``;
- ``min_tokens``: EOS cannot come before ``min_tokens`` tokens were generated;
- an answer whose EOS falls within ``max_tokens`` ends there → ``"stop"`` (the EOS token counts
  in ``completion_tokens`` and carries no text); a longer one is cut at ``max_tokens`` →
  ``"length"``.
"""

from __future__ import annotations

import hashlib
import math
from typing import Literal

FinishReason = Literal["stop", "length"]


def natural_length(prompt: str, *, mean_tokens: float, seed: int, request_seed: int | None = None) -> int:
    """Tokens (>= 2: at least one with text, then the EOS token) the model would generate for
    ``prompt`` if nothing stopped it; mean ``mean_tokens`` (>= 2), deterministic in (seed,
    request seed, prompt)."""
    if mean_tokens < 2:
        raise ValueError("mean_tokens: must be at least 2")
    digest = hashlib.blake2b(f"{seed}\0{request_seed}\0{prompt}".encode(), digest_size=8).digest()
    uniform = (int.from_bytes(digest, "big") + 0.5) / 2.0**64  # in (0, 1)
    p_eos = 1.0 / (mean_tokens - 1)  # per token after the first
    if p_eos >= 1.0:
        return 2
    # 1 + the inverse CDF of the geometric distribution on {1, 2, ...}: P(N > n) = (1 - p)^n
    return 1 + max(1, math.ceil(math.log(uniform) / math.log1p(-p_eos)))


def output_plan(natural: int, *, max_tokens: int, min_tokens: int = 0,
                ignore_eos: bool = False) -> tuple[int, FinishReason]:
    """(tokens generated, finish_reason) for an answer of ``natural`` tokens under the request's
    ``max_tokens`` (>= 1), ``min_tokens`` (EOS only after that many tokens) and ``ignore_eos``."""
    if ignore_eos:
        return max_tokens, "length"
    ends = max(natural, min_tokens + 1)
    if ends <= max_tokens:
        return ends, "stop"
    return max_tokens, "length"
