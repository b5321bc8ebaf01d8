"""BenchmarkJobs end to end: the real genai-bench (its own environment) against the engine
emulator, offline, with slaplan's byte-level tokenizer; failures in plain words; the worker."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from infra.db import session_scope
from infra.resources import ResourceCreate, create_resource
from profiler.bench.spec import parse_benchmarkjob
from profiler.bench.results import parse_iteration
from profiler.bench.runner import BenchOutcome, run_benchmarkjob, runner_settings
from procs import MODEL, free_port, start_emulator, stop
from stored import stored_status
from workers import lifecycle, tasks
from paths import ROOT

pytestmark = pytest.mark.slow


def job(url: str, **spec) -> dict:
    body = {
        "endpoint": {"endpoint": {"url": url, "apiFormat": "openai"}},
        "task": "text-to-text",
        "trafficScenarios": ["D(100,20)"],
        "numConcurrency": [1, 4],
        "maxTimePerIteration": 1,
        "maxRequestsPerIteration": 8,
        "outputLocation": {"storageUri": "pvc://results/tiny"},
    }
    body.update(spec)
    return {"apiVersion": "ome.io/v1beta1", "kind": "BenchmarkJob", "metadata": {"name": "tiny"}, "spec": body}


def test_genai_bench_against_the_emulator_matches_the_model(tmp_path):
    if not Path(runner_settings().genai_bench).is_file():
        pytest.skip("genai-bench's environment is missing: run scripts/setup.sh (it installs it) "
                    "or set SLAPLAN_GENAI_BENCH")
    from profiler.model.config import Parallel, ServingConfig
    from profiler.model.estimate import estimate

    # A quarter of the model's speed: the engine's times then dwarf HTTP and client overheads on a
    # busy 2-core machine, and --speed is checked on the way (times scale by 1/speed).
    speed = 0.25
    proc, base = start_emulator("--speed", str(speed))
    try:
        path = tmp_path / "job.yaml"
        # serviceMetadata names vLLM, so genai-bench sends ignore_eos and every answer has the scenario's length
        meta = {"engine": "vLLM", "version": "0.10.0", "gpuType": "A100", "gpuCount": 1}
        path.write_text(yaml.safe_dump(job(base + "/v1", serviceMetadata=meta)))
        run = subprocess.run([sys.executable, "-m", "api.cli", "bench", str(path), "--offline", "--root",
                              str(tmp_path / "root"), "--json"], cwd=ROOT, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=240)
    finally:
        stop(proc)
    assert run.returncode == 0, run.stdout + run.stderr
    out = json.loads(run.stdout)
    assert out["ok"] and "byte-level tokenizer" in out["details"]
    folder = Path(out["experimentDir"])
    assert folder.parent == tmp_path / "root" / "results" / "tiny" and (folder / "experiment_metadata.json").is_file()
    by_c = {r["concurrency"]: r for r in out["results"]}
    assert set(by_c) == {1, 4} and all(r["errors"] == 0 and r["requests"] >= 8 for r in by_c.values())

    def model(c):
        return estimate(ServingConfig(model=MODEL, gpu="a100_sxm", engine=Parallel(tp=1), isl_tokens=100,
                                      osl_tokens=20, concurrency=c))

    one = by_c[1]
    assert one["ttftMs"]["mean"] == pytest.approx(model(1).ttft_ms / speed, rel=0.2)
    assert one["tpotMs"]["mean"] == pytest.approx(model(1).itl_ms / speed, rel=0.15)
    assert by_c[4]["tpotMs"]["mean"] == pytest.approx(model(4).itl_ms / speed, rel=0.25)
    assert by_c[4]["ttftMs"]["mean"] >= one["ttftMs"]["mean"]  # latency grows with load
    assert by_c[4]["e2eMs"]["mean"] >= one["e2eMs"]["mean"]
    assert by_c[4]["requestsPerSecond"] > 2 * one["requestsPerSecond"]  # and so does throughput
    # genai-bench's own files are kept and read the same
    files = sorted(folder.glob("D100_20_text-to-text_num_concurrency_*_time_*s.json"))
    assert len(files) == 2
    parsed = parse_iteration(files[0].name, json.loads(files[0].read_text()))
    assert parsed.mean_output_tokens == 20


def test_answers_end_early_unless_the_job_asks_for_ignore_eos(tmp_path):
    if not Path(runner_settings().genai_bench).is_file():
        pytest.skip("genai-bench's environment is missing: run scripts/setup.sh (it installs it)")
    proc, base = start_emulator("--mean-answer-tokens", "2")  # answers of ~2 tokens unless told otherwise
    try:
        lengths = {}
        for name, params in (("natural", None), ("forced", {"ignore_eos": "true"})):
            spec = job(base, trafficScenarios=["D(40,16)"], numConcurrency=[1], maxRequestsPerIteration=4,
                       additionalRequestParams=params)
            out = run_benchmarkjob(parse_benchmarkjob(spec), name=name,
                                   settings=runner_settings({}, local_root=str(tmp_path), offline=True))
            assert out.ok, out.failure
            lengths[name] = out.results[0].mean_output_tokens
    finally:
        stop(proc)
    assert lengths["forced"] == 16  # ignore_eos reached the server through genai-bench
    assert lengths["natural"] < 8  # the emulated model stopped by itself, and genai-bench counted it


def _settings(tmp_path, **kw):
    # any existing file stands in for genai-bench: these runs fail before starting it
    return runner_settings({}, genai_bench=sys.executable, local_root=str(tmp_path), offline=True, probe_timeout_s=3, **kw)


def test_endpoint_down_is_said_plainly(tmp_path):
    out = run_benchmarkjob(parse_benchmarkjob(job(f"http://127.0.0.1:{free_port()}")), name="x", settings=_settings(tmp_path))
    assert not out.ok and out.failure.startswith("endpoint down") and not out.started


@pytest.mark.parametrize("spec,field", [
    ({"task": "text-to-video"}, "spec.task"),
    ({"trafficScenarios": ["D(0,0)"]}, "spec.trafficScenarios[0]"),
    ({"trafficScenarios": ["E(100)"]}, "spec.trafficScenarios[0]"),  # an embeddings scenario for a chat task
])
def test_what_genai_bench_cannot_run_is_named_before_the_endpoint_is_tried(spec, field, tmp_path):
    out = run_benchmarkjob(parse_benchmarkjob(job(f"http://127.0.0.1:{free_port()}", **spec)), name="x",
                           settings=_settings(tmp_path))
    assert not out.ok and out.failure.startswith(f"{field}: ") and not out.started, out.failure


def test_404_and_unknown_model_and_missing_tokenizer(tmp_path, emulator):
    out = run_benchmarkjob(parse_benchmarkjob(job(emulator + "/nowhere")), name="x", settings=_settings(tmp_path))
    assert not out.ok and out.failure.startswith("404 Not Found")
    named = job(emulator + "/nowhere")
    named["spec"]["endpoint"]["endpoint"]["modelName"] = MODEL
    out = run_benchmarkjob(parse_benchmarkjob(named), name="x", settings=_settings(tmp_path))
    assert not out.ok and out.failure.startswith("404 Not Found at") and "/nowhere/v1/chat/completions" in out.failure
    wrong = job(emulator)
    wrong["spec"]["endpoint"]["endpoint"]["modelName"] = "other/model"
    out = run_benchmarkjob(parse_benchmarkjob(wrong), name="x", settings=_settings(tmp_path))
    assert not out.ok and "no model 'other/model'" in out.failure
    (tmp_path / "empty").mkdir()
    out = run_benchmarkjob(parse_benchmarkjob(job(emulator)), name="x", settings=_settings(tmp_path, tokenizer=str(tmp_path / "empty")))
    assert not out.ok and out.failure.startswith("tokenizer missing")


def test_genai_bench_not_installed(tmp_path):
    settings = runner_settings({}, genai_bench=str(tmp_path / "nope"), local_root=str(tmp_path), offline=True)
    out = run_benchmarkjob(parse_benchmarkjob(job("http://127.0.0.1:9")), name="x", settings=settings)
    assert "genai-bench is not installed" in out.failure


def test_inference_service_without_a_cluster(tmp_path):
    spec = job("http://x")["spec"]
    spec["endpoint"] = {"inferenceService": {"name": "llm", "namespace": "serving"}}
    out = run_benchmarkjob(parse_benchmarkjob({"spec": spec}), name="x", settings=_settings(tmp_path))
    assert not out.ok and "no Kubernetes cluster is configured" in out.failure and "serving/llm" in out.failure


# --------------------------------------------------------------------------- the worker


def _store(sessions, spec) -> str:
    with session_scope(sessions) as s:
        return create_resource(s, ResourceCreate(group="ome.io", version="v1beta1", kind="BenchmarkJob",
                                                 plural="benchmarkjobs", namespace="default", name=f"b-{uuid.uuid4().hex[:6]}",
                                                 spec=spec, status=lifecycle.bench_pending())).uid


def test_worker_runs_a_job_to_completion(sessions, tmp_path):
    from profiler.bench.results import IterationMetrics, Percentiles

    seen = {}

    def runner(spec, *, name, settings, resolver):
        seen["state"] = stored_status(sessions, uid)["state"]  # claimed before the run
        p = Percentiles(mean_ms=80.0, p50_ms=80.0, p90_ms=90.0, p99_ms=99.0)
        m = IterationMetrics(scenario="D(100,20)", concurrency=1, file="f.json", requests=8, errors=0, error_rate=0.0,
                             duration_s=3.0, requests_per_s=2.7, output_tok_s=55.0, input_tok_s=270.0,
                             ttft=p, tpot=p, e2e=p)
        return BenchOutcome(ok=True, details="1 of 1 iteration(s) measured", results=[m],
                            experiment_dir=str(tmp_path / "r"), started=True)

    uid = _store(sessions, job("http://127.0.0.1:1")["spec"])
    assert tasks.process_benchmarkjob(sessions, uid, runner=runner) == "completed"
    status = stored_status(sessions, uid)
    assert seen["state"] == "Running"
    assert status["state"] == "Completed" and status["startTime"] and status["completionTime"]
    assert "failureMessage" not in status and status["resultsLocation"] == str(tmp_path / "r")
    assert status["results"][0]["ttftMs"]["p99"] == 99.0 and status["results"][0]["concurrency"] == 1
    assert tasks.process_benchmarkjob(sessions, uid, runner=runner) == "done"


def test_worker_fails_an_inference_service_job_without_a_cluster(sessions):
    spec = job("http://x")["spec"]
    spec["endpoint"] = {"inferenceService": {"name": "llm", "namespace": "serving"}}
    uid = _store(sessions, spec)
    assert tasks.process_benchmarkjob(sessions, uid) == "failed"
    status = stored_status(sessions, uid)
    assert status["state"] == "Failed" and "no Kubernetes cluster is configured" in status["failureMessage"]
    assert status["details"] and status["completionTime"]
    assert datetime.now(UTC).strftime("%Y") in status["completionTime"]
