"""Loading a script of benchmarks/ as a module, for tests of its functions."""

import importlib.util
import sys

from paths import ROOT


def load(name: str):
    """The module of ``benchmarks/<name>.py``, executed afresh."""
    path = ROOT / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    return module
