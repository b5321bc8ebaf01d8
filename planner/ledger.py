"""The ledger of an online search: where its trials are asked for, told and listed, shared by every
worker searching the same DGDR. A Protocol: Optuna's RDB storage implements it
(``infra.studies.StudyLedger``); the search (``planner.online_loop``) sees only this.

A trial is one run: one unit deployed and benchmarked at one concurrency. States: ``waiting`` (enqueued, nobody asked for it
yet), ``running`` (a worker is measuring it), ``complete`` (measured; ``value`` is its score),
``fail`` (could not be measured, or its worker was lost) and ``pruned`` (asked for, then dropped
unmeasured).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

TrialState = Literal["waiting", "running", "complete", "fail", "pruned"]
Outcome = Literal["complete", "fail", "pruned"]


@dataclass(frozen=True)
class LedgerTrial:
    """One trial as the ledger holds it. ``unit``: the unit's key and ``concurrency`` the run's
    closed-loop clients (None while waiting; ``concurrency`` also in trials of searches that
    measured a unit's whole sweep at once); ``value``: the score once complete; ``attrs``: what the
    search recorded on it."""

    number: int
    state: TrialState
    unit: str | None
    value: float | None
    attrs: Mapping[str, Any]
    concurrency: int | None = None


class Ledger(Protocol):
    """The trials of one search."""

    @property
    def name(self) -> str:
        """What the ledger is called where it is stored (shown with the results)."""

    def trials(self) -> list[LedgerTrial]:
        """Every trial, by number."""

    def started(self, clock: Callable[[], float]) -> float:
        """When the search started (s since the epoch): the first worker records ``clock()``."""

    def fail_stale(self) -> None:
        """Fail the running trials of workers that stopped reporting (each retried once, waiting)."""

    def enqueue(self, unit: str, concurrency: int) -> None:
        """Add a waiting trial: ``unit`` at ``concurrency`` clients."""

    def ask(self, units: Sequence[str], concurrency: Sequence[int]) -> LedgerTrial:
        """A new running trial, of a waiting trial's run if there is one, else of one of ``units``
        at one of ``concurrency``."""

    def set_attrs(self, number: int, attrs: Mapping[str, Any]) -> None:
        """Record ``attrs`` on trial ``number``."""

    def tell(self, number: int, outcome: Outcome, value: float | None = None) -> None:
        """End trial ``number``: complete with its score ``value``, failed or pruned."""

    def keep_alive(self, number: int) -> AbstractContextManager[None]:
        """While the block runs, trial ``number``'s worker reports that it is alive."""
