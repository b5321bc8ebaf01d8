"""What the golden test compares: the planner's answer for every example request and the
performance model's predictions for a fixed sample of the measured calibration rows.

``collect()`` computes it from the code as it is; ``tests/golden.json`` holds it as recorded.
Re-record deliberately, after a change that is meant to move predictions or manifests:

    .venv/bin/python tests/golden.py

For each example DGDR (``examples/*.yaml``): the chosen plan and its aggregated alternative as the
status stores them, the margin, the reason and how many candidates were evaluated, and the
manifest text of every target of the one registry (``planner.manifests.targets.REGISTRY``) at
every API version it renders. For the calibration CSV (``../shared/data``, beside the checkout):
``SAMPLE_ROWS`` rows drawn with ``SAMPLE_SEED``, each with the model's outputs (shipped
parameters) at full precision, or the error that row gives.
"""

from __future__ import annotations

import csv
import json
import math
import random
import sys
from typing import Any

from paths import ROOT, SHARED

GOLDEN = ROOT / "tests" / "golden.json"
EXAMPLES = ROOT / "examples"
CALIBRATION_CSV = SHARED / "data" / "measured_serving_calibration.csv"
SAMPLE_ROWS = 200
SAMPLE_SEED = 36
OUTPUTS = ("ttft_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_ms", "output_tok_s_per_gpu", "tok_s_per_user",
           "requests_per_s", "decode_batch", "saturated")
# Each target at each API version it renders, as render_target's keyword arguments.
RENDERINGS = {"dynamo": ({"dynamo_version": "v1alpha1"}, {"dynamo_version": "v1beta1"}),
              "ome": ({},), "kubeai": ({},),
              "kthena": ({"kthena_group": "workload.volcano.sh"}, {"kthena_group": "workload.serving.volcano.sh"})}


def example_answers() -> dict[str, Any]:
    """Per example file and request name: the plan's numbers and every target's manifest text."""
    from planner import plan
    from planner.manifests.targets import REGISTRY
    from planner.request import parse_documents
    from planner.results import ProfilingResults

    assert set(RENDERINGS) == set(REGISTRY), "a target of the registry is not recorded"
    out: dict[str, Any] = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for request in parse_documents(path.read_text(encoding="utf-8"), path.name):
            results = ProfilingResults.of(plan(request))
            doc = results.stored()
            out[f"{path.name}/{request.name}"] = {
                "plan": {key: doc.get(key) for key in ("feasible", "chosen", "aggregatedAlternative", "margin",
                                                       "reason", "evaluated")},
                "manifests": _manifests(results, request),
            }
    return out


def _manifests(results: Any, request: Any) -> dict[str, str]:
    """``target [options]`` → the YAML text written for it (or the error it gives)."""
    from api.objects import manifests_yaml
    from planner.manifests.targets import render_target

    out = {}
    for target, variants in RENDERINGS.items():
        for options in variants:
            label = " ".join([target, *options.values()])
            try:
                objects, notes = render_target(results, request, target, **options)
            except ValueError as exc:
                out[label] = f"error: {exc}"
                continue
            out[label] = manifests_yaml(objects) + "".join(f"# {note}\n" for note in notes)
    return out


def calibration_rows() -> list[dict[str, str]]:
    """The fixed sample of rows of the calibration CSV, in file order."""
    with CALIBRATION_CSV.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    picked = sorted(random.Random(SAMPLE_SEED).sample(range(len(rows)), min(SAMPLE_ROWS, len(rows))))
    return [rows[i] for i in picked]


def row_estimates(rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Each row's identity and the model's outputs for it (or its error), shipped parameters;
    every row is evaluated on its own, so one row's answer never depends on the sample."""
    from profiler.model.dataset import row_prepared
    from profiler.model.estimate import evaluate
    from profiler.model.params import shipped_params

    params = shipped_params()
    out = []
    for row in rows:
        key = {k: row[k] for k in ("model", "gpu", "backend", "mode", "isl", "osl", "concurrency", "num_gpus")}
        try:
            prepared, _notes = row_prepared(row)
        except Exception as exc:  # a row the model refuses: its message is part of the answer
            out.append({"row": key, "error": f"{type(exc).__name__}: {exc}"})
            continue
        result = evaluate([prepared], params)
        out.append({"row": key, "estimate": {name: _number(result[name][0]) for name in OUTPUTS}})
    return out


def _number(value: Any) -> Any:
    """A model output as JSON holds it exactly: floats by their repr, infinities as text."""
    value = value.item() if hasattr(value, "item") else value
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def collect(*, with_rows: bool) -> dict[str, Any]:
    """The golden document of the code as it is (``with_rows``: include the calibration sample)."""
    doc: dict[str, Any] = {"examples": example_answers()}
    if with_rows:
        doc["calibration"] = {"seed": SAMPLE_SEED, "rows": row_estimates(calibration_rows())}
    return doc


def record() -> None:
    if not CALIBRATION_CSV.exists():
        raise SystemExit(f"the calibration CSV is not beside the checkout ({CALIBRATION_CSV.name}): nothing recorded")
    GOLDEN.write_text(json.dumps(collect(with_rows=True), indent=1, allow_nan=False) + "\n", encoding="utf-8")
    print(f"recorded {GOLDEN.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    record()
