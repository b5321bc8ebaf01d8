"""Loading a script of benchmarks/ as a module, for tests of its functions."""

import importlib.util
import sys
from pathlib import Path


def load(name: str):
    """The module of ``benchmarks/<name>.py``, executed afresh."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module
