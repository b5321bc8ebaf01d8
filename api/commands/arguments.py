"""Argument types and checks the sub-commands share."""

from __future__ import annotations

import argparse

# The deployment targets a command may name, as planner.manifests.targets.REGISTRY has them (a test
# checks): written out so that registering a command does not import the renderers.
TARGETS = ("dynamo", "ome", "kthena", "kubeai")
# Kthena's API groups of ModelServing, as REGISTRY["kthena"].groups has them (a test checks), the
# default first: the seed's group (fixed replicas), then the current one (which can autoscale).
KTHENA_GROUPS = ("workload.volcano.sh", "workload.serving.volcano.sh")


def kthena_group_problem(group: str) -> str | None:
    """What is wrong with ``group`` as a Kthena API group (None: nothing), for an error that names
    the field: ``kthenaGroup`` in the API, ``--kthena-group`` in the CLI."""
    if group in KTHENA_GROUPS:
        return None
    return f"must be one of {', '.join(KTHENA_GROUPS)}, not {group!r}"


def kthena_group(text: str) -> str:
    """An argparse type: a Kthena API group (``KTHENA_GROUPS``)."""
    problem = kthena_group_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


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
