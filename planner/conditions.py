"""The conditions of a status (``status.conditions``), typed as Kubernetes' ``metav1.Condition``.

Written with ``Condition.of(...).stored()``; read with ``read_conditions(status)``, which leaves
out a condition of another shape (any client may write a status) and keeps the others. Keys of
other controllers' conditions that slaplan does not read are ignored.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.stored import Items, Stored

__all__ = ["MAX_MESSAGE", "Condition", "read_conditions"]

MAX_MESSAGE = 32768  # the Condition schema's maxLength


class Condition(Stored):
    """One aspect of where the object stands: ``type`` (e.g. Profiling), whether it holds
    (``status``), a CamelCase ``reason``, a ``message`` for people, and since when."""

    model_config = ConfigDict(extra="ignore")

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str
    last_transition_time: str = Field(alias="lastTransitionTime", description="RFC 3339, UTC")
    observed_generation: int | None = Field(default=None, alias="observedGeneration",
                                            description="the spec generation the condition was set for")

    @classmethod
    def of(cls, ctype: str, status: Literal["True", "False", "Unknown"], reason: str, message: str, *, now: str,
           generation: int) -> Condition:
        """The condition, its message cut to ``MAX_MESSAGE`` characters."""
        if len(message) > MAX_MESSAGE:
            message = message[: MAX_MESSAGE - 3] + "..."
        return cls(type=ctype, status=status, reason=reason, message=message, last_transition_time=now,
                   observed_generation=generation)

    def stored(self) -> dict[str, Any]:
        """The condition as the status stores it (camelCase)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class _Conditions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    conditions: Items[Condition] = ()


def read_conditions(status: Any) -> tuple[Condition, ...]:
    """The readable conditions of ``status`` (a status object as stored; () when it is not one)."""
    return _Conditions.model_validate(status).conditions if isinstance(status, dict) else ()
