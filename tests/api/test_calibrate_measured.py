"""``slaplan calibrate --from-benchmarks``: the real genai-bench measures an emulator 2× slower
than the model, the calibration learns it from those results and later plans (CLI and service)
use it; bad input is refused by name with nothing stored."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from infra import migrate
from infra.calibrations import list_calibrations, save_calibration
from infra.db import make_engine, make_session_factory, session_scope
from infra.resources import ResourceCreate, create_resource, get_resource_by_uid
from infra.settings import load_settings
from procs import MODEL, SLAPLAN, start_emulator, stop
from profiler.bench.runner import read_results, runner_settings
from profiler.model.config import Parallel, ServingConfig
from profiler.model.estimate import estimate
from profiler.model.measured import Point, calibration_key, fit_deployment
from paths import ROOT

pytestmark = pytest.mark.slow

# 2×, not a few tens of percent: a host hiccup of a few hundred ms on one of the few requests at
# concurrency 1 must not look like a difference in shape between the loads the fit compares.
SLOWER = 2.0
HELD_OUT = 2
GPU = "l40s"  # slower steps than an A100: engine times dwarf the client's overheads on a busy machine
DEPLOYMENT = ServingConfig(model=MODEL, gpu=GPU, engine=Parallel(tp=1), isl_tokens=1, osl_tokens=1)
DGDR = """apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeploymentRequest
metadata: {name: small}
spec:
  model: meta-llama/Llama-3.1-8B-Instruct
  backend: vllm
  hardware: {gpuSku: l40s, totalGpus: 1}
  workload: {isl: 200, osl: 40, concurrency: 1}
  sla: {ttft: 5000, itl: 200}
"""


def slaplan(*args: str, db: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, SLAPLAN_DATABASE_URL=f"sqlite:///{db}")
    return subprocess.run([*SLAPLAN, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=300)


def stored(db: Path):
    engine = make_engine(load_settings({}, database_url=f"sqlite:///{db}"))
    try:
        with session_scope(make_session_factory(engine)) as session:
            return list_calibrations(session)
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> Path:
    """The experiment folder of a real genai-bench run against an emulator ``SLOWER`` times slower than the model."""
    if not Path(runner_settings().genai_bench).is_file():
        pytest.skip("genai-bench's environment is missing: run scripts/setup.sh (it installs it) "
                    "or set SLAPLAN_GENAI_BENCH")
    tmp = tmp_path_factory.mktemp("slow")
    proc, base = start_emulator("--speed", str(1 / SLOWER), gpu=GPU)
    try:
        job = {"apiVersion": "ome.io/v1beta1", "kind": "BenchmarkJob", "metadata": {"name": "slow"},
               "spec": {"endpoint": {"endpoint": {"url": base + "/v1", "apiFormat": "openai"}},
                        # vLLM named: genai-bench sends ignore_eos, so every answer has the scenario's length
                        "serviceMetadata": {"engine": "vLLM", "version": "0.10.0", "gpuType": "A10", "gpuCount": 1},
                        "task": "text-to-text", "trafficScenarios": ["D(200,24)"], "numConcurrency": [1, HELD_OUT, 4],
                        "maxTimePerIteration": 8, "maxRequestsPerIteration": 24,
                        "outputLocation": {"storageUri": "pvc://results/slow"}}}
        (tmp / "job.yaml").write_text(yaml.safe_dump(job))
        run = slaplan("bench", str(tmp / "job.yaml"), "--offline", "--root", str(tmp / "root"), "--json",
                      db=tmp / "unused.db")
    finally:
        stop(proc)
    assert run.returncode == 0, run.stdout + run.stderr
    return Path(json.loads(run.stdout)["experimentDir"])


def test_calibration_learns_a_slower_deployment_and_later_plans_use_it(measured, tmp_path):
    # Fit on concurrency 1 and 4; concurrency 2 is held out.
    fit_dir = tmp_path / "fit"
    shutil.copytree(measured, fit_dir, ignore=shutil.ignore_patterns(f"*_num_concurrency_{HELD_OUT}_*"))
    db = tmp_path / "s.db"
    run = slaplan("calibrate", "--from-benchmarks", str(fit_dir), "--model", "llama-3.1-8b", "--gpu", GPU, db=db)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "TTFT" in run.stdout and "TPOT" in run.stdout and "stored" in run.stdout
    [cal] = stored(db)
    assert (cal.model, cal.gpu, cal.backend) == calibration_key(MODEL, GPU, "vllm")
    assert cal.fit.points == 2 and str(fit_dir) in cal.source and cal.deployment["engine"]["tp"] == 1
    # the slowdown is found and kept on both sides (every time of the emulator is SLOWER x the model's),
    # genai-bench's own time held apart, and each metric's error on the fitted points drops
    assert cal.fit.before.tpot_mdape_pct > 30 and SLOWER / 1.3 < cal.fit.scale < SLOWER * 1.3
    kept = {metric for side, metric in (("prefill", "ttft"), ("decode", "tpot")) if cal.fit.sides[side] > 1.0}
    assert kept == {"ttft", "tpot"} and cal.fit.harness_ms > 0
    for metric in kept:
        assert getattr(cal.fit.after, f"{metric}_mdape_pct") < getattr(cal.fit.before, f"{metric}_mdape_pct")
    # the held-out concurrency is predicted no worse than by the shipped model, and better in what was kept
    results, _ = read_results(measured)
    [held] = [r for r in results if r.concurrency == HELD_OUT]
    at = DEPLOYMENT.model_copy(update=dict(isl_tokens=round(held.mean_input_tokens),
                                           osl_tokens=round(held.mean_output_tokens), concurrency=HELD_OUT))
    calibrated, shipped = estimate(at, params=cal.params), estimate(at)
    for metric, measured_ms, attr in (("ttft", held.ttft.mean_ms, "ttft_ms"), ("tpot", held.tpot.mean_ms, "itl_ms")):
        error = lambda e: abs(getattr(e, attr) / measured_ms - 1)  # noqa: E731
        assert error(calibrated) < error(shipped) if metric in kept else error(calibrated) <= error(shipped), metric

    # a later plan of the same model, GPU and backend uses it and says so
    (tmp_path / "small.yaml").write_text(DGDR)
    plans = {}
    for name, database in (("calibrated", db), ("shipped", tmp_path / "none.db")):
        run = slaplan("plan", str(tmp_path / "small.yaml"), "--out", str(tmp_path / name), "--quiet", db=database)
        assert run.returncode == 0, run.stdout + run.stderr
        plans[name] = json.loads((tmp_path / name / "small.plan.json").read_text())
    notes = plans["calibrated"]["results"]["assumptions"]
    assert any(n.startswith("calibrated on 2 measured point(s)") for n in notes)
    assert not any("calibrated" in n for n in plans["shipped"]["results"]["assumptions"])
    assert not (tmp_path / "none.db").exists()  # reading never creates the default database
    # one L40S at concurrency 1: the shipped plan predicts less than was measured there, the calibrated
    # one no less (the calibration it reads was stored)
    [one] = [r for r in results if r.concurrency == 1]
    assert plans["shipped"]["predicted"]["itl_ms"] < 0.85 * one.tpot.mean_ms
    assert plans["calibrated"]["predicted"]["itl_ms"] >= plans["shipped"]["predicted"]["itl_ms"]
    assert plans["calibrated"]["predicted"]["ttft_ms"] > plans["shipped"]["predicted"]["ttft_ms"]


def test_a_benchmarkjob_manifest_leads_to_its_results(measured, tmp_path):
    root = measured.parent.parent.parent  # <root>/results/slow/<experiment>
    job = yaml.safe_load((root.parent / "job.yaml").read_text())
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    db = tmp_path / "s.db"
    run = slaplan("calibrate", "--from-benchmarks", str(tmp_path / "job.yaml"), "--root", str(root),
                  "--model", MODEL, "--gpu", GPU, db=db)
    assert run.returncode == 0, run.stdout + run.stderr
    [cal] = stored(db)
    assert cal.fit.points == 3 and cal.source == str(measured)


@pytest.mark.parametrize("case", ["unknown model", "empty folder", "missing path", "other model", "no gpu", "zero tp"])
def test_invalid_input_is_named_and_nothing_is_stored(measured, tmp_path, case):
    (tmp_path / "empty").mkdir()
    args, expected = {
        "unknown model": ([str(measured), "--model", "no/such-model", "--gpu", GPU], "error: --model: "),
        "empty folder": ([str(tmp_path / "empty"), "--model", MODEL, "--gpu", GPU],
                         f"error: --from-benchmarks: {tmp_path / 'empty'} holds no genai-bench result files"),
        "missing path": ([str(tmp_path / "nope"), "--model", MODEL, "--gpu", GPU],
                         f"error: --from-benchmarks: {tmp_path / 'nope'} does not exist"),
        "other model": ([str(measured), "--model", "Qwen/Qwen3-32B", "--gpu", GPU],
                        f"error: --model: 'Qwen/Qwen3-32B' does not match {measured}"),
        "no gpu": ([str(measured), "--model", MODEL], "error: --gpu: required"),
        "zero tp": ([str(measured), "--model", MODEL, "--gpu", GPU, "--tp", "0"],
                    "slaplan calibrate: error: argument --tp: must be a positive whole number"),
    }[case]
    db = tmp_path / "s.db"
    run = slaplan("calibrate", "--from-benchmarks", *args, db=db)
    assert run.returncode == 2 and run.stderr.strip().splitlines()[-1].startswith(expected), run.stderr
    assert not db.exists()


def test_the_service_plans_with_the_stored_calibration(tmp_path):
    from workers import lifecycle, tasks

    settings = load_settings({}, database_url=f"sqlite:///{tmp_path / 'w.db'}")
    migrate.upgrade(settings)
    engine = make_engine(settings)
    sessions = make_session_factory(engine)
    try:
        slow = [Point(isl_tokens=200, osl_tokens=40, concurrency=c,
                      ttft_ms=estimate(DEPLOYMENT.model_copy(update=dict(isl_tokens=200, osl_tokens=40, concurrency=c))).ttft_ms * 2,
                      tpot_ms=estimate(DEPLOYMENT.model_copy(update=dict(isl_tokens=200, osl_tokens=40, concurrency=c))).itl_ms * 2)
                for c in (1, 4)]
        fit = fit_deployment(DEPLOYMENT, slow)
        uids = {}
        with session_scope(sessions) as s:
            save_calibration(s, calibration_key(MODEL, GPU, "vllm"), fit, deployment={}, source="a test")
            for name, gpu in (("calibrated", GPU), ("other-gpu", "h100_sxm")):
                spec = yaml.safe_load(DGDR)["spec"] | {"hardware": {"gpuSku": gpu, "totalGpus": 1}}
                uids[name] = create_resource(s, ResourceCreate(
                    group="nvidia.com", version="v1beta1", kind="DynamoGraphDeploymentRequest",
                    plural="dynamographdeploymentrequests", namespace="default", name=f"{name}-{uuid.uuid4().hex[:6]}",
                    spec=spec, status=lifecycle.dgdr_pending(1, datetime.now(UTC)))).uid
        results = {}
        for name, uid in uids.items():
            assert tasks.process_dgdr(sessions, uid) == "ready"
            with session_scope(sessions) as s:
                results[name] = json.loads(get_resource_by_uid(s, uid).status["profilingResults"])
        assert any(a.startswith("calibrated on 2 measured point(s) of a test") for a in results["calibrated"]["assumptions"])
        assert not any("calibrated" in a for a in results["other-gpu"]["assumptions"])
    finally:
        engine.dispose()


def store_synthetic(db: Path) -> None:
    """Store a calibration of MODEL on GPU (vllm) fitted to one made-up point, source "a test"."""
    settings = load_settings({}, database_url=f"sqlite:///{db}")
    migrate.upgrade(settings)
    engine = make_engine(settings)
    try:
        points = [Point(isl_tokens=200, osl_tokens=40, concurrency=1, ttft_ms=150.0, tpot_ms=30.0)]
        with session_scope(make_session_factory(engine)) as s:
            save_calibration(s, calibration_key(MODEL, GPU, "vllm"), fit_deployment(DEPLOYMENT, points),
                             deployment={}, source="a test")
    finally:
        engine.dispose()


def test_stored_calibrations_are_listed_and_forgotten(tmp_path):
    db = tmp_path / "s.db"
    store_synthetic(db)
    listed = slaplan("calibrate", "--list-calibrations", db=db)
    assert listed.returncode == 0 and "meta-llama/Llama-3.1-8B on l40s (vllm): calibrated on 1 measured point(s) of a test" in listed.stdout
    unknown = slaplan("calibrate", "--forget", "--model", "no/such-model", "--gpu", GPU, db=db)
    assert unknown.returncode == 2 and unknown.stderr.startswith("error: --model: ")
    forgot = slaplan("calibrate", "--forget", "--model", "llama-3.1-8b", "--gpu", GPU, db=db)
    assert forgot.returncode == 0 and forgot.stdout.startswith("forgot meta-llama/Llama-3.1-8B on l40s (vllm)")
    again = slaplan("calibrate", "--forget", "--model", "llama-3.1-8b", "--gpu", GPU, db=db)
    assert again.returncode == 1 and "no calibration stored" in again.stdout
    assert stored(db) == [] and "no calibrations stored" in slaplan("calibrate", "--list-calibrations", db=db).stdout


@pytest.mark.parametrize("database", ["unmigrated", "unreachable"])
def test_plan_goes_on_when_calibrations_cannot_be_read(tmp_path, database):
    (tmp_path / "small.yaml").write_text(DGDR)
    (tmp_path / "old.db").write_bytes(b"")  # an SQLite file without our tables
    url = {"unmigrated": f"sqlite:///{tmp_path / 'old.db'}",
           "unreachable": "postgresql+psycopg://postgres@127.0.0.1:1/none?connect_timeout=2"}[database]
    env = dict(os.environ, SLAPLAN_DATABASE_URL=url)
    run = subprocess.run([*SLAPLAN, "plan", str(tmp_path / "small.yaml"), "--out", str(tmp_path / "o"), "--quiet"],
                         cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "note: calibrations not read from" in run.stderr and "planning with the shipped parameters" in run.stderr
    assert "calibrated" not in (tmp_path / "o" / "small.plan.json").read_text()


@pytest.mark.parametrize("argv,message", [
    (["--forget", "--model", MODEL, "--gpu", GPU, "--from-benchmarks", "results"],
     "argument --from-benchmarks: not allowed with argument --forget"),
    (["--forget", "--list-calibrations"], "argument --list-calibrations: not allowed with argument --forget"),
    (["--list-calibrations", "--from-benchmarks", "results"],
     "argument --from-benchmarks: not allowed with argument --list-calibrations"),
    (["--data", "data.csv", "--from-benchmarks", "results"], "argument --from-benchmarks: not allowed with argument --data"),
])
def test_modes_are_mutually_exclusive(argv, message, capsys):
    from api.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["calibrate", *argv])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--list-calibrations", "--out", "x.json"], "--out: not used by --list-calibrations"),
    (["--forget", "--model", "m", "--gpu", "g", "--tp", "2"], "--tp: not used by --forget"),
    (["--data", "d.csv", "--model", "m"], "--model: not used by --data"),
    (["--model", "m"], "--model: not used by --data"),  # --data is the default mode
    (["--from-benchmarks", "r", "--model", "m", "--gpu", "g", "--cv"], "--cv: not used by --from-benchmarks"),
])
def test_an_option_of_another_mode_is_refused_not_ignored(tmp_path, capsys, monkeypatch, argv, message):
    from api.cli import main

    db = tmp_path / "s.db"
    monkeypatch.setenv("SLAPLAN_DATABASE_URL", f"sqlite:///{db}")
    monkeypatch.chdir(tmp_path)
    assert main(["calibrate", *argv]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert list(tmp_path.iterdir()) == []  # nothing read, fitted or stored


@pytest.mark.parametrize("value", ["notadate", "2026-13-01", "26/11/2026"])
def test_the_provenance_date_must_be_a_date(capsys, value):
    from api.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["calibrate", "--date", value])
    assert exit_.value.code == 2
    assert f"argument --date: must be a date written YYYY-MM-DD, got {value!r}" in capsys.readouterr().err


def test_forget_requires_the_model_and_gpu(tmp_path, capsys, monkeypatch):
    from api.cli import main

    db = tmp_path / "s.db"
    monkeypatch.setenv("SLAPLAN_DATABASE_URL", f"sqlite:///{db}")
    assert main(["calibrate", "--forget", "--gpu", GPU]) == 2
    assert capsys.readouterr().err == "error: --model: required with --forget\n"
    assert main(["calibrate", "--forget", "--model", MODEL]) == 2
    assert capsys.readouterr().err == "error: --gpu: required with --forget\n"
    assert not db.exists()


@pytest.mark.parametrize("field,value", [("ttft", float("nan")), ("tpot", float("inf")), ("num_input_tokens", -3.0)])
def test_a_result_mean_that_is_not_finite_and_positive_names_the_file_and_field(tmp_path, capsys, monkeypatch,
                                                                                 field, value):
    from api.cli import main
    from tests.profiler.test_bench_results import _result

    db = tmp_path / "s.db"
    monkeypatch.setenv("SLAPLAN_DATABASE_URL", f"sqlite:///{db}")
    folder = tmp_path / "experiment"
    folder.mkdir()
    name = "D200_40_text-to-text_num_concurrency_4_time_2s.json"
    result = _result("D(200,40)", 4)
    result["aggregated_metrics"]["stats"][field]["mean"] = value
    (folder / name).write_text(json.dumps(result))  # json writes NaN and Infinity, as Python's reader takes them
    assert main(["calibrate", "--from-benchmarks", str(folder), "--model", MODEL, "--gpu", GPU]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --from-benchmarks: {folder}: {name}: no positive mean ") and err.count("\n") == 1
    assert f"stats.{field}.mean is " in err
    assert not db.exists()
