"""Argument types and checks the sub-commands share."""

from __future__ import annotations

import argparse

# The deployment targets a command may name, as planner.manifests.targets.REGISTRY has them (a test
# checks): written out so that registering a command does not import the renderers.
TARGETS = ("dynamo", "ome", "kthena", "kubeai")


def positive(text: str) -> int:
    """An argparse type: a whole number above zero."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text!r}")
    return value


def port(text: str) -> int:
    """An argparse type: a TCP port to listen on, 1-65535."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port from 1 to 65535, got {text!r}")
    return value


def readable_file(text: str) -> str:
    """An argparse type: the path of a file this process can read."""
    import os

    if not os.path.isfile(text) or not os.access(text, os.R_OK):
        raise argparse.ArgumentTypeError(f"not a readable file: {text!r}")
    return text


def given(args: argparse.Namespace, actions) -> list[str]:
    """The options among ``actions`` that ``args`` sets to something other than their default."""
    return [a.option_strings[0] for a in actions if getattr(args, a.dest) != a.default]
