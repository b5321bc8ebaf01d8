"""Which stored calibration a planning command used, or why none: looked up in the database
(``api.commands.database``) and said in the command's output and in plan.json, so that a stored
fit never changes an answer unannounced. The settings (pydantic) and SQLAlchemy are loaded only when
there is a database to read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import argparse

    from infra.calibrations import Calibration

Key = tuple[str, str, str]  # (model, gpu, backend) as a request names them


class Calibrations(NamedTuple):
    """What a planning command found in the database: the calibrations by request key, where it
    looked, and why nothing could be read (None: read, or no database there)."""

    database: str
    exists: bool
    found: dict[Key, Calibration]
    problem: str | None = None

    def used(self, key: Key) -> Calibration | None:
        """The calibration a request with ``key`` is planned with, if any."""
        return self.found.get(key)

    def line(self, key: Key) -> str:
        """One line saying which calibration a request with ``key`` used, or why none."""
        cal = self.used(key)
        if cal is not None:
            return f"calibration: {cal.summary()}; from {self.database}"
        if self.problem:
            return f"calibration: none, the shipped parameters ({self.problem})"
        if not self.exists:
            return f"calibration: none, the shipped parameters (no database at {self.database})"
        model, gpu, backend = key
        return f"calibration: none stored for {model} on {gpu} ({backend}) in {self.database}; the shipped parameters"

    def document(self, key: Key) -> dict[str, Any]:
        """plan.json's ``calibration``: the database looked in and the calibration used (None: none)."""
        cal = self.used(key)
        used = None if cal is None else {
            "model": cal.model, "gpu": cal.gpu, "backend": cal.backend, "points": cal.fit.points,
            "source": cal.source, "calibrated_at": cal.calibrated_at.isoformat(), "summary": cal.summary()}
        doc: dict[str, Any] = {"database": self.database, "database_exists": self.exists, "used": used}
        if self.problem:
            doc["problem"] = self.problem
        return doc


def read_calibrations(args: argparse.Namespace, keys: list[Key]) -> Calibrations:
    """The stored calibrations of ``keys`` in the command's database (``--db``, SLAPLAN_DATABASE_URL
    or the per-user file); with no database there, neither the settings nor SQLAlchemy are loaded."""
    from api.commands.database import command_database_url, command_settings
    from infra.database_url import database_exists, database_label

    url = command_database_url(args)
    if not database_exists(url):
        return Calibrations(database_label(url), exists=False, found={})
    from infra.calibrations import read_calibrations as read

    settings = command_settings(args)
    found, problem = read(settings, keys)
    return Calibrations(settings.database_label, exists=True, found=found, problem=problem)
