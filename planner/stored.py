"""The base of values stored in a status document, and the reading of a document part by part.

Stored values are written with ``model_dump(mode="json", by_alias=True)`` (camelCase keys, units
in the names) and read back with ``model_validate``. Any client may write a status, so a reader
that shows what it can wraps the parts it reads on their own in :data:`Part` (a part of another
shape reads as None) and lists of independent items in :data:`Items` (an item of another shape
is left out); inside one part or item the model is read whole or not at all.
"""


from functools import cache
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, ValidatorFunctionWrapHandler, WrapValidator, \
    model_validator

__all__ = ["Items", "Part", "Stored"]

T = TypeVar("T")


class Stored(BaseModel):
    """A value stored in a status document: either spelling (field name or alias) reads back.
    Computed fields are written for readers and ignored when read back."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True)

    @model_validator(mode="before")
    @classmethod
    def _drop_computed(cls, data: Any) -> Any:
        computed = _computed_keys(cls)
        if computed and isinstance(data, dict):
            return {k: v for k, v in data.items() if k not in computed}
        return data


@cache
def _computed_keys(model: type[Stored]) -> frozenset[str]:
    """The keys ``model`` writes for its computed fields (read once per model: validation is hot)."""
    return frozenset(f.alias or name for name, f in model.model_computed_fields.items())


def _none_if_invalid(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    try:
        return handler(value)
    except ValidationError:
        return None


def _valid_items(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    try:
        return handler(value)
    except ValidationError as exc:
        if not isinstance(value, (list, tuple)):
            return ()
        bad = {e["loc"][0] for e in exc.errors() if e["loc"]}
        try:
            return handler([item for i, item in enumerate(value) if i not in bad])
        except ValidationError:
            return ()


Part = Annotated[T | None, WrapValidator(_none_if_invalid)]
"""A part read on its own: None when absent or of another shape."""

Items = Annotated[tuple[T, ...], WrapValidator(_valid_items)]
"""A list read item by item: the items of another shape left out; () when the list itself is not one."""
