"""Calibration from measurements, where the truth is known: the engine emulator runs a fixed
factor slower (or faster) than the model, the real genai-bench measures it, and
``fit_deployment`` learns the difference from some concurrencies; the others are held out.

Prints, per emulator speed: the time scale found (genai-bench's own time held apart,
``harness.GENAI_BENCH_MS``) and the sides it was kept on, TTFT and TPOT MdAPE on the fitted points
before and after, and the error of the calibrated (and of the shipped) model on each held-out
concurrency.

    python benchmarks/measured_calibration.py [--gpu l40s] [--slower 1.4] [--fit 1 4 8] [--hold 2 6]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # tests.procs reads its neighbours as top-level modules
SLAPLAN = [sys.executable, "-m", "api.cli"]
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def measure(gpu: str, slower: float, levels: list[int], scenario: str, workdir: Path) -> Path:
    """genai-bench's experiment folder for an emulator ``slower`` × slower than the model."""
    from tests.procs import free_port

    port = free_port()
    emulator = subprocess.Popen([*SLAPLAN, "emulate", "--model", MODEL, "--gpu", gpu, "--port", str(port),
                                 "--speed", str(1 / slower)], cwd=ROOT, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the emulator did not start")
            time.sleep(0.2)
        job = {"apiVersion": "ome.io/v1beta1", "kind": "BenchmarkJob", "metadata": {"name": "calibration"},
               "spec": {"endpoint": {"endpoint": {"url": f"http://127.0.0.1:{port}/v1", "apiFormat": "openai"}},
                        # vLLM named: genai-bench sends ignore_eos, so every answer has the scenario's length
                        "serviceMetadata": {"engine": "vLLM", "version": "0.10.0", "gpuType": "A10", "gpuCount": 1},
                        "task": "text-to-text", "trafficScenarios": [scenario], "numConcurrency": levels,
                        "maxTimePerIteration": 4, "maxRequestsPerIteration": 32,
                        "outputLocation": {"storageUri": f"file://{workdir}/results"}}}
        (workdir / "job.yaml").write_text(yaml.safe_dump(job))
        run = subprocess.run([*SLAPLAN, "bench", str(workdir / "job.yaml"), "--offline", "--json"], cwd=ROOT,
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)
    finally:
        emulator.terminate()
        emulator.wait(15)
    if run.returncode != 0:
        raise RuntimeError(run.stdout + run.stderr)
    return Path(json.loads(run.stdout)["experimentDir"])


def main() -> int:
    from profiler.bench.runner import read_results
    from profiler.model.config import Parallel, ServingConfig
    from profiler.model.estimate import estimate
    from profiler.model.harness import GENAI_BENCH_MS
    from profiler.model.measured import fit_deployment

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="l40s")
    parser.add_argument("--slower", type=float, nargs="+", default=[1.4], help="emulator time factors")
    parser.add_argument("--fit", type=int, nargs="+", default=[1, 4, 8], help="concurrencies fitted")
    parser.add_argument("--hold", type=int, nargs="+", default=[2, 6], help="concurrencies held out")
    parser.add_argument("--scenario", default="D(200,40)")
    args = parser.parse_args()
    deployment = ServingConfig(model=MODEL, gpu=args.gpu, engine=Parallel(tp=1), isl_tokens=1, osl_tokens=1)
    for slower in args.slower:
        with tempfile.TemporaryDirectory(prefix="slaplan-calibration-") as tmp:
            started = time.monotonic()
            folder = measure(args.gpu, slower, sorted(set(args.fit + args.hold)), args.scenario, Path(tmp))
            seconds = time.monotonic() - started
            results, _ = read_results(folder)
        fit = fit_deployment(deployment, [r for r in results if r.concurrency in args.fit], harness_ms=GENAI_BENCH_MS)
        print(f"{MODEL} on {args.gpu}, emulator {slower:g}× the model's times, {args.scenario} "
              f"(measured in {seconds:.0f} s): scale found {fit.scale:.3f}, kept: {fit.times} "
              f"(genai-bench's {GENAI_BENCH_MS:g} ms a request held apart)")
        print(f"  fitted on concurrency {args.fit}: TTFT MdAPE {fit.before.ttft_mdape_pct:.1f}% → "
              f"{fit.after.ttft_mdape_pct:.1f}%, TPOT {fit.before.tpot_mdape_pct:.1f}% → {fit.after.tpot_mdape_pct:.1f}%")
        for r in results:
            if r.concurrency not in args.hold:
                continue
            at = deployment.model_copy(update=dict(isl_tokens=round(r.mean_input_tokens),
                                                   osl_tokens=round(r.mean_output_tokens), concurrency=r.concurrency))
            cal, shipped = estimate(at, params=fit.params), estimate(at)
            err = lambda pred, meas: f"{100 * (pred / meas - 1):+.1f}%"  # noqa: E731
            print(f"  held out, concurrency {r.concurrency}: TTFT {r.ttft.mean_ms:.1f} ms measured, calibrated "
                  f"{err(cal.ttft_ms, r.ttft.mean_ms)} (shipped {err(shipped.ttft_ms, r.ttft.mean_ms)}); TPOT "
                  f"{r.tpot.mean_ms:.2f} ms, calibrated {err(cal.itl_ms, r.tpot.mean_ms)} "
                  f"(shipped {err(shipped.itl_ms, r.tpot.mean_ms)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
