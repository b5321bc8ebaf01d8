"""Caveats of a BenchmarkJob's run, as warnings for its page.

The runner (``profiler.bench.runner`` and ``profiler.bench.command``) writes what it ran and the
choices it made into ``status.details``, joined with ``"; "``. The notes that change what the
numbers mean, or that may make a run fail, are recognised here by their wording and told in
words for the user. Its other notes (where the endpoint and tokenizer came from, defaulted
scenarios and concurrency levels, the backend picked for ``ignore_eos``) are shown elsewhere on
the page or change nothing the user has to act on.
"""

from __future__ import annotations

import re
from typing import Any

CAVEATS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"slaplan's own byte-level\s+tokenizer"),
     "Lengths were counted in bytes, not in the model's tokens: the model's tokenizer was not available "
     "(no Hugging Face Hub and not in the local cache), so slaplan's byte-level tokenizer was used. The "
     "scenarios' input and output lengths and the tokens/s figures are UTF-8 bytes. Give the worker the "
     "model's tokenizer (SLAPLAN_BENCH_TOKENIZER, or access to the Hub) to measure in real tokens."),
    (re.compile(r"no API key configured: sent a placeholder key"),
     "No API key was configured, so a placeholder key was sent. That is fine for an endpoint that checks "
     "none; for one that does, set SLAPLAN_BENCH_API_KEY where the worker runs."),
    (re.compile(r"modelName not given: using (?P<model>.+?), the first model the endpoint lists"),
     "spec.endpoint.endpoint.modelName is not set: the model measured is {model}, the first one the "
     "endpoint lists. Set modelName when the endpoint serves more than one."),
    (re.compile(r"(?:^|; )(?P<wanted>[^;]+?) already held results: writing to (?P<folder>[^;]+)"),
     "The result folder {wanted} already held an earlier run's results: this run's files are in {folder}."),
)


def caveats(details: Any) -> list[str]:
    """The warnings for a BenchmarkJob whose ``status.details`` is ``details``, in plain text
    (none unless it is the runner's text)."""
    if not isinstance(details, str):
        return []
    return [text.format(**match.groupdict()) for pattern, text in CAVEATS if (match := pattern.search(details))]
