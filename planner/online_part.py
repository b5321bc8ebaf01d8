"""``online``, the part of a plan's results an online search fills (``planner.online_results``),
as a field type whose module is imported only when a value is there: an offline plan (``slaplan
plan``) never builds the search's seven stored models.

Typed ``OnlineSearch | None`` for readers of the code; validated as ``OnlineSearch`` (a mapping
read back, an instance kept) and written by its own ``model_dump`` with the options of the
document being written, so a document reads and writes as if the field were ``OnlineSearch``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import PlainSerializer, PlainValidator, SerializationInfo

__all__ = ["OnlinePart"]


def _read(value: Any) -> Any:
    if value is None:
        return None
    from planner.online_results import OnlineSearch

    return OnlineSearch.model_validate(value)


def _write(value: Any, info: SerializationInfo) -> Any:
    if value is None:
        return None
    return value.model_dump(mode=info.mode, by_alias=info.by_alias, exclude_none=info.exclude_none,
                            exclude_unset=info.exclude_unset, exclude_defaults=info.exclude_defaults,
                            round_trip=info.round_trip)


if TYPE_CHECKING:
    from planner.online_results import OnlineSearch

    OnlinePart = OnlineSearch | None
else:
    OnlinePart = Annotated[Any, PlainValidator(_read), PlainSerializer(_write)]
