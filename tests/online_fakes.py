"""Stand-ins for online searches without deployments: a target that runs every unit, and
measurements from the performance model with other parameters (a known truth)."""

from __future__ import annotations

from planner import online as search
from profiler.bench.standin import model_iterations
from profiler.hub import load_model
from profiler.model.params import shipped_params


class Everywhere:
    """A target that can run every unit (measurements come from ``model_measure``)."""

    def supports(self, unit):
        return None


def truth_params() -> dict[str, float]:
    """A deployment unevenly slower than the shipped model: slow links, heavy steps, slower HBM."""
    p = dict(shipped_params())
    p["eff_link"] *= 0.5
    p["step_ms_vllm"] *= 2.0
    p["eff_hbm"] *= 0.8
    return p


def model_measure(truth: dict[str, float], calls: list[tuple[str, int]], model: str):
    """A measurement function: ``model`` with ``truth`` parameters at the run's clients, as a
    genai-bench iteration; ``calls`` records the runs measured, (unit key, clients)."""
    arch = load_model(model)[0]

    def measure(unit, clients, req, name):
        calls.append((search.unit_key(unit), clients))
        points = search.predict({"u": unit}, req, (clients,), truth, arch)["u"]
        return model_iterations(points, req.isl_tokens, req.osl_tokens, name), f"/results/{name}", None

    return measure
