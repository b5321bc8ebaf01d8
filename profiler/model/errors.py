"""Errors the performance model raises; each names the field at fault."""

from __future__ import annotations


class ModelError(ValueError):
    """A configuration the model cannot evaluate; ``field`` names the input at fault."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class UnknownName(ModelError):
    """A catalog lookup that failed; the message lists the known names."""

    def __init__(self, field: str, name: str, known: list[str]):
        super().__init__(field, f"unknown {field} {name!r}; known: {', '.join(known)}")


class Infeasible(ModelError):
    """A configuration that cannot run, e.g. weights that do not fit in GPU memory."""
