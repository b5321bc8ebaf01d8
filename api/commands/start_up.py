"""The garbage collector during a short command's start-up, in the program (``api.cli.program``).

Start-up (the imports of numpy, pydantic and the planner, and their schemas) allocates hundreds of
thousands of objects that live until the process ends; the collector's passes over them while they
load, and over them again at each full pass later, find nothing to free (about 2% of ``plan``'s
instructions). ``hold`` stops collection for a command that ends the process at once;
``loaded`` (called by the command when its libraries are loaded) moves every object so far out
of the collector's reach (``gc.freeze``) and collects again from there. Neither changes a
process that did not ``hold``: a caller of ``api.cli.main`` in-process keeps its collector as it was."""

from __future__ import annotations

import gc

_held = False  # whether hold() stopped the collector and loaded() has not restarted it


def hold() -> None:
    """Stop collection until ``loaded`` (the program does this for an ``ends_at_once`` command)."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def loaded() -> None:
    """The command's libraries are loaded: when ``hold`` stopped the collector, freeze the objects
    so far and collect again; otherwise nothing."""
    global _held
    if _held:
        gc.freeze()
        gc.enable()
        _held = False
