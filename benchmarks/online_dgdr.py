"""Online DGDRs end to end against `slaplan emulate` units: the v1beta1 ``searchStrategy:
thorough`` shape against the v1alpha1 ``online: true`` one, for the same request.

Starts `slaplan serve` (embedded worker, SQLite in a temporary directory) whose online searches
run local emulators ``--speed`` times as fast as the model, measured by the real genai-bench
(``D(100,20)``, each run at one of the default sweep's concurrencies), at most ``--trials`` runs
each (default: the service's 8, so the search's own rule ends it). The request is one
v1beta1 DGDR (Llama-3.1-8B on a100_sxm, 2 GPUs per node, TTFT 1500 ms, ITL 100 ms) and its
conversion to v1alpha1 (``api.conversion.convert_dgdr``: the same PlanRequest). Each round
submits one of each in turn (one at a time, alternating which goes first) and times create →
Ready; it counts the runs (measured points) and units in ``profilingResults.online``.

    .venv/bin/python benchmarks/online_dgdr.py [--rounds 2] [--trials 8] [--speed 0.25]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from service_stack import clean_env, free_port, start_serve  # noqa: E402
from service_stack import stop as stop_serve  # noqa: E402

THOROUGH = {
    "apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeploymentRequest", "metadata": {"name": "thorough"},
    "spec": {"model": "meta-llama/Llama-3.1-8B-Instruct", "backend": "vllm",
             "hardware": {"gpuSku": "a100_sxm", "numGpusPerNode": 2}, "workload": {"isl": 100, "osl": 20},
             "sla": {"ttft": 1500, "itl": 100}, "searchStrategy": "thorough", "autoApply": False},
}
PATH = "/apis/nvidia.com/{version}/namespaces/default/dynamographdeploymentrequests"


def shapes() -> dict[str, dict]:
    """The v1beta1 thorough DGDR and its v1alpha1 conversion, by label."""
    from api.conversion import convert_dgdr

    return {"v1beta1 searchStrategy: thorough": THOROUGH, "v1alpha1 online: true": convert_dgdr(THOROUGH, "v1alpha1")}


def run_one(api: httpx.Client, body: dict, name: str, timeout_s: float) -> dict:
    """Submit ``body`` as ``name``, wait until it is final; seconds to Ready and what it measured."""
    version = body["apiVersion"].split("/")[1]
    path = PATH.format(version=version)
    started = time.monotonic()
    created = api.post(path, json={**body, "metadata": {"name": name}})
    created.raise_for_status()
    while True:
        status = api.get(f"{path}/{name}").json().get("status") or {}
        if status.get("state") in ("Ready", "Failed"):
            break
        if time.monotonic() - started > timeout_s:
            raise SystemExit(f"{name} not final after {timeout_s:g} s: {status.get('state')}")
        time.sleep(0.25)
    seconds = time.monotonic() - started
    if status["state"] != "Ready":
        raise SystemExit(f"{name} failed: {json.dumps(status.get('conditions'))[:2000]}")
    online = json.loads(status["profilingResults"]).get("online") or {}
    measured = [t for t in online.get("trials", []) if t.get("state") == "complete" and t.get("points")]
    return {"seconds": seconds, "trials": len(online.get("trials", [])), "runs": sum(len(t["points"]) for t in measured),
            "units": len({t["unit"] for t in measured}), "profiling": online.get("profiling"),
            "stopped": online.get("stopped")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="DGDRs of each shape")
    parser.add_argument("--trials", type=int, default=8, help="runs measured per DGDR at most")
    parser.add_argument("--speed", type=float, default=0.25, help="emulators' speed against the model")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one DGDR may take")
    args = parser.parse_args(argv)
    results: dict[str, list[dict]] = {label: [] for label in shapes()}
    with tempfile.TemporaryDirectory(prefix="slaplan-online-") as tmp:
        env = {"SLAPLAN_DATABASE_URL": f"sqlite:///{Path(tmp) / 'slaplan.db'}", "SLAPLAN_OFFLINE": "1",
               "SLAPLAN_ONLINE_EMULATOR_SPEED": f"{args.speed:g}", "SLAPLAN_ONLINE_MAX_TRIALS": str(args.trials),
               "SLAPLAN_BENCH_ROOT": str(Path(tmp) / "bench")}
        port = free_port()
        proc = start_serve(Path(tmp), port, [], {**clean_env(Path(tmp)), **env})
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as api:
                for r in range(args.rounds):
                    order = list(shapes().items())
                    for label, body in (order if r % 2 == 0 else order[::-1]):
                        name = f"{body['apiVersion'].split('/')[1]}-{r}"
                        results[label].append(one := run_one(api, body, name, args.timeout))
                        print(f"{label} #{r}: Ready in {one['seconds']:.1f} s, {one['runs']} run(s) of {one['units']} "
                              f"unit(s) in {one['trials']} trial(s) ({one['profiling']}; {one['stopped']})", flush=True)
        finally:
            stop_serve(proc)
    print(f"\n| shape | DGDRs | create → Ready, median (min–max) | runs (units) measured in profilingResults |")
    print("|---|---:|---|---|")
    for label, runs in results.items():
        secs = [r["seconds"] for r in runs]
        print(f"| {label} | {len(runs)} | {statistics.median(secs):.1f} s ({min(secs):.1f}–{max(secs):.1f}) "
              f"| {', '.join('%d (%d)' % (r['runs'], r['units']) for r in runs)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
