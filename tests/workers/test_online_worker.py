"""Online DGDRs end to end: real engine emulators on loopback ports, the real genai-bench, the
Optuna study in the real database. The emulators run at a quarter of the model's speed, so the
calibration has a known answer (times ×4) and the engine's times dwarf HTTP overheads."""

from __future__ import annotations

import json
import math
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from api_client import api_client

from api.app import create_app
from infra import migrate
from infra.calibrations import find_calibration
from infra.db import make_engine, make_session_factory, session_scope
from infra.deploy_targets import LocalTarget
from infra.resources import ResourceCreate, create_resource
from infra.settings import load_settings
from planner import online as search
from planner import plan
from planner import status as dgdr_states
from planner.request import parse_dgdr
from procs import start_worker, stop
from profiler.bench.runner import runner_settings
from stored import stored_status
from workers import lifecycle, online, tasks
from paths import ROOT

pytestmark = pytest.mark.slow

SPEED = 0.25
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
PATH = "/apis/nvidia.com/v1alpha1/namespaces/default/dynamographdeploymentrequests"


def dgdr(name: str, **online_config) -> dict:
    config = {"max_trials": 2, "concurrency": [1, 4], **online_config}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeploymentRequest", "metadata": {"name": name},
            "spec": {"modelName": MODEL, "backend": "vllm", "sla": {"ttft": 1500, "itl": 100, "isl": 100, "osl": 20},
                     "gpu": {"type": "a100_sxm", "maxNumGPUsPerEngine": 2}, "online": True,
                     "profilingConfig": {"config": {"online": config}}}}


@pytest.fixture(autouse=True)
def genai_bench():
    if not Path(runner_settings().genai_bench).is_file():
        pytest.skip("genai-bench's environment is missing: run scripts/setup.sh (it installs it) or set SLAPLAN_GENAI_BENCH")


def _results(status: dict) -> dict:
    return json.loads(status["profilingResults"])


def test_an_online_dgdr_through_a_real_worker(pg_url, redis_url, tmp_path):
    settings = load_settings({}, database_url=pg_url, broker_url=redis_url)
    migrate.upgrade(settings)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SLAPLAN_DATABASE_URL": pg_url, "SLAPLAN_BROKER_URL": redis_url,
           "SLAPLAN_ONLINE_EMULATOR_SPEED": str(SPEED), "SLAPLAN_BENCH_ROOT": str(tmp_path / "bench"),
           "SLAPLAN_OFFLINE": "1"}
    worker = start_worker(tmp_path, env, name="online")
    app = create_app(settings)
    try:
        with api_client(app) as client:
            created = client.post(PATH, json=dgdr("online-real"))
            assert created.status_code == 201
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                status = client.get(f"{PATH}/online-real").json().get("status") or {}
                if status.get("state") in dgdr_states.TERMINAL:
                    break
                time.sleep(0.5)
            # every change since the request was created, as `kubectl get -w` sees them
            since = created.json()["metadata"]["resourceVersion"]
            watched = client.get(f"{PATH}?watch=true&resourceVersion={since}&timeoutSeconds=1").text.splitlines()
    finally:
        stop(worker)
        app.state.engine.dispose()
    states = [json.loads(line)["object"].get("status", {}) for line in watched]
    seen = [c["message"] for st in states if st.get("state") == "Profiling"
            for c in st.get("conditions", []) if c["type"] == "Profiling"]
    assert status.get("state") == "Ready", (status, (tmp_path / "worker.log").read_text()[-3000:])
    # progress was visible while it ran: runs done of the budget and the best so far
    assert any(m.startswith("online: 1/2 run(s) measured; best so far ") for m in seen), seen
    results = _results(status)
    measured = results["online"]
    assert measured["target"] == "local emulator" and measured["budget"]["maxTrials"] == 2
    assert 1 <= measured["trialsDone"] <= 2 and measured["sweep"] == {"scenario": "D(100,20)", "concurrency": [1, 4]}
    trials = [t for t in measured["trials"] if t["state"] == "complete"]
    # a trial is one run: its one point at the clients it was asked for, each run measured once
    assert trials and all([p["concurrency"] for p in t["points"]] == [t["concurrency"]] for t in trials), trials
    assert len({(t["unit"], t["concurrency"]) for t in trials}) == len(trials)
    for t in trials:  # genai-bench's own folders are kept
        assert list(Path(t["resultsLocation"]).glob("D100_20_text-to-text_num_concurrency_*_time_*s.json"))
    # the emulators ran 4× slower than the model: the calibration found it
    assert 2.5 < measured["calibration"]["scale"] < 6.0
    chosen = results["chosen"]
    best = max(trials, key=lambda t: t["score"])
    assert measured["best"] == best["unit"]
    calibration = measured["calibration"]
    # one or two runs of the best unit: the calibration fits one time scale to TTFT and TPOT together, so
    # it lands between their measured/predicted ratios: nearer the measurements in log error summed over
    # both than the start (a busy machine slows TTFT and TPOT unequally, so not always nearer on each)
    assert calibration["points"] == len([t for t in trials if t["unit"] == best["unit"]])
    assert _log_error(best, "calibrated") < _log_error(best, "predicted"), best
    # sized with the calibrated model: within the SLA, at a fraction of what the shipped model promises
    request = parse_dgdr(dgdr("online-real"))
    key = f"{chosen['mode']} " + "+".join(f"tp{e['tp']}" for e in chosen["engines"])
    unit = search.units(plan(request).candidates)[key]
    offline = plan(request, only={search.candidate(unit)}).candidates[0]  # the same unit, shipped model
    assert chosen["predicted"]["itlMs"] <= 100 and chosen["predicted"]["ttftMs"] <= 1500
    assert chosen["predicted"]["outputTokPerSecPerGpu"] < offline.predicted.output_tok_s_per_gpu / 2
    assert status["generatedDeployment"]["kind"] == "DynamoGraphDeployment"
    engine = make_engine(settings)
    with session_scope(make_session_factory(engine)) as session:
        stored = find_calibration(session, MODEL, "a100_sxm", "vllm")
    engine.dispose()
    assert stored is not None and "online profiling of DGDR default/online-real" in stored.source


# --------------------------------------------------------------------------- restart and failures


def _store(sessions, body: dict) -> str:
    with session_scope(sessions) as s:
        return create_resource(s, ResourceCreate(group="nvidia.com", version=body["apiVersion"].split("/")[1],
                                                 kind=body["kind"],
                                                 plural="dynamographdeploymentrequests", namespace="default",
                                                 name=body["metadata"]["name"], spec=body["spec"],
                                                 status=lifecycle.dgdr_pending(1, datetime.now(UTC)))).uid


class Recording(LocalTarget):
    """The local emulator target, remembering what it deployed; ``crash_on`` kills the 'worker'
    (an exception no handler catches, as a SIGKILL leaves no handler a chance) at that deployment."""

    def __init__(self, deployed: list[str], crash_on: int | None = None):
        super().__init__(speed=SPEED)
        self.deployed, self.crash_on = deployed, crash_on

    def up(self, unit, request, name):
        from planner.online import unit_key

        self.deployed.append(unit_key(unit))
        if len(self.deployed) == self.crash_on:
            raise SystemExit("worker lost")
        return super().up(unit, request, name)


def _setup(url: str, tmp_path: Path, target) -> online.Online:
    runner = runner_settings({}, local_root=str(tmp_path / "bench"), offline=True)
    return online.Online(database_url=url, target=target, target_name="local emulator", runner=runner, heartbeat_s=1)


def _dies_on_call(n: int):
    """A clock that kills the 'worker' the ``n``-th time it is read (1: claiming the DGDR; 2:
    saving that the first measurement starts; 3: saving its result as progress)."""
    calls = [0]

    def clock() -> datetime:
        calls[0] += 1
        if calls[0] == n:
            raise SystemExit("worker lost")
        return datetime.now(UTC)

    return clock


def test_a_restarted_worker_resumes_the_study(sessions, database_url, tmp_path):
    # 1. a worker dies while deploying its first candidate: its trial stays RUNNING
    lost = _store(sessions, dgdr("lost"))
    first: list[str] = []
    with pytest.raises(SystemExit):
        tasks.process_dgdr(sessions, lost, online=lambda: _setup(database_url, tmp_path, Recording(first, crash_on=1)))
    assert stored_status(sessions, lost)["state"] == "Profiling" and len(first) == 1
    time.sleep(4)  # its heartbeat goes stale (older than 2 × 1 s, at the database clock's 1 s resolution)
    second: list[str] = []
    assert tasks.process_dgdr(sessions, lost, online=lambda: _setup(database_url, tmp_path, Recording(second))) == "ready"
    trials = _results(stored_status(sessions, lost))["online"]["trials"]
    assert second[0] == first[0] and second.count(first[0]) == 1  # retried once
    assert [(t["unit"], t["state"]) for t in trials[:2]] == [(first[0], "fail"), (first[0], "complete")]
    assert "error" not in trials[0]  # lost, not failed on its own: it did not use the budget
    # 2. a worker dies right after its first measurement: the next one keeps it (the runs of "lost",
    # the same workload, not reused: this DGDR turns reuse off)
    kept = _store(sessions, dgdr("kept", reuse_runs=False))
    first, second = [], []
    with pytest.raises(SystemExit):
        tasks.process_dgdr(sessions, kept, clock=_dies_on_call(3),
                           online=lambda: _setup(database_url, tmp_path, Recording(first)))
    assert stored_status(sessions, kept)["state"] == "Profiling" and len(first) == 1
    assert tasks.process_dgdr(sessions, kept, online=lambda: _setup(database_url, tmp_path, Recording(second))) == "ready"
    measured = _results(stored_status(sessions, kept))["online"]
    runs = [(t["unit"], t["concurrency"]) for t in measured["trials"]]
    assert len(runs) == len(set(runs)) == measured["trialsDone"]  # the completed run was not repeated
    assert (measured["trials"][0]["unit"], measured["trials"][0]["state"]) == (first[0], "complete")
    assert tasks.process_dgdr(sessions, kept) == "done"


def _with_itl(name: str, itl_ms: float, **online_config) -> dict:
    body = dgdr(name, **online_config)
    body["spec"]["sla"] = {**body["spec"]["sla"], "itl": itl_ms}
    return body


def _log_error(trial: dict, model: str) -> float:
    """Sum over a trial's points of |ln(``model``'s TTFT / measured)| + |ln(its ITL / measured)|."""
    return sum(abs(math.log(m[q] / p[q])) for m, p in zip(trial[model], trial["points"], strict=True)
               for q in ("ttftMs", "itlMs"))


def _runs(trials: list[dict], reused: bool) -> set[tuple[str, int]]:
    return {(t["unit"], t["concurrency"]) for t in trials if t["state"] == "complete" and bool(t.get("reusedFrom")) == reused}


def test_a_second_dgdr_of_the_workload_reuses_the_first_ones_runs(sessions, database_url, tmp_path):
    budget = {"max_trials": 4, "concurrency": [1, 4]}

    def profile(body: dict, speed: float = SPEED) -> tuple[dict, list[str]]:
        deployed: list[str] = []
        target = Recording(deployed)
        target.speed = speed
        uid = _store(sessions, body)
        assert tasks.process_dgdr(sessions, uid, online=lambda: _setup(database_url, tmp_path, target)) == "ready"
        return _results(stored_status(sessions, uid))["online"], deployed

    first, _ = profile(dgdr("reuse-first", **budget))
    assert first["trialsReused"] == 0 and first["trialsDone"] >= 1
    measured_first = _runs(first["trials"], reused=False)
    # the same workload under a looser ITL: the first DGDR's runs are read, not measured again
    second, deployed_second = profile(_with_itl("reuse-second", 150, **budget))
    reused = [t for t in second["trials"] if t.get("reusedFrom")]
    assert reused and all(t["reusedFrom"] == "default/reuse-first" for t in reused)
    assert _runs(second["trials"], reused=True) <= measured_first and second["trialsReused"] == len(reused)
    assert not _runs(second["trials"], reused=False) & _runs(second["trials"], reused=True)
    # the same DGDR with reuse turned off measures every run itself, and more of them
    cold, deployed_cold = profile(_with_itl("reuse-off", 150, reuse_runs=False, **budget))
    assert cold["trialsReused"] == 0 and not any(t.get("reusedFrom") for t in cold["trials"])
    assert second["trialsDone"] < cold["trialsDone"] and len(deployed_second) < len(deployed_cold)
    # an engine that runs at another speed is another engine: nothing stored is reused
    other, _ = profile(_with_itl("reuse-other-engine", 150, **budget), speed=SPEED / 2)
    assert other["trialsReused"] == 0 and other["trialsDone"] >= 1


def test_a_v1beta1_thorough_dgdr_is_profiled_online(sessions, database_url, tmp_path):
    from dataclasses import replace

    from workers.online import wants_online

    body = {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeploymentRequest", "metadata": {"name": "thorough"},
            "spec": {"model": MODEL, "backend": "vllm", "hardware": {"gpuSku": "a100_sxm"},
                     "workload": {"isl": 100, "osl": 20}, "sla": {"ttft": 1500, "itl": 100},
                     "searchStrategy": "thorough", "autoApply": False}}
    uid = _store(sessions, body)
    rapid = _store(sessions, {**body, "metadata": {"name": "rapid"}, "spec": {**body["spec"], "searchStrategy": "rapid"}})
    assert wants_online(sessions, uid) and not wants_online(sessions, rapid)
    deployed: list[str] = []
    setup = lambda: replace(_setup(database_url, tmp_path, Recording(deployed)), max_trials=2)  # noqa: E731
    assert tasks.process_dgdr(sessions, uid, online=setup) == "ready"
    status = stored_status(sessions, uid)
    measured = _results(status)["online"]
    assert measured["profiling"] == "online (thorough)" and measured["target"] == "local emulator"
    trials = [t for t in measured["trials"] if t["state"] == "complete"]
    # runs of one unit in a row share its deployment
    units = [t["unit"] for t in measured["trials"]]
    assert 1 <= len(trials) <= 2 and [u for i, u in enumerate(units) if i == 0 or u != units[i - 1]] == deployed
    assert all(t["points"] for t in trials) and measured["best"] in deployed
    assert status["generatedDeployment"]["apiVersion"] == "nvidia.com/v1beta1"
    profiling = next(c for c in status["conditions"] if c["type"] == "Profiling")
    assert profiling["message"].startswith("online (thorough): ")
    # the same request with searchStrategy rapid: the performance model only, said so
    before = len(deployed)
    assert tasks.process_dgdr(sessions, rapid) == "ready" and len(deployed) == before
    status = stored_status(sessions, rapid)
    assert "online" not in _results(status)
    assert next(c for c in status["conditions"] if c["type"] == "Profiling")["message"].startswith("offline (rapid): ")


def test_a_disaggregated_unit_from_prefill_and_decode_commands(sessions, database_url, tmp_path):
    """The user's prefill and decode commands (emulators playing the roles, vLLM's KV handoff)
    behind the local router: with no aggregated command, the search measures disaggregated units
    with genai-bench through the router, and the DGDR is Ready."""
    from procs import role_command

    settings = load_settings({}, database_url=database_url, online_prefill_command=role_command("prefill", SPEED),
                             online_decode_command=role_command("decode", SPEED), online_disagg_handoff="vllm")
    target = online.online_setup(settings).target
    uid = _store(sessions, dgdr("roles", max_trials=1))
    assert tasks.process_dgdr(sessions, uid, online=lambda: _setup(database_url, tmp_path, target)) == "ready"
    measured = _results(stored_status(sessions, uid))["online"]
    (trial,) = measured["trials"]
    assert trial["unit"].startswith("disagg ") and trial["state"] == "complete" and measured["best"] == trial["unit"]
    assert [p["concurrency"] for p in trial["points"]] == [trial["concurrency"]]
    assert list(Path(trial["resultsLocation"]).glob("D100_20_text-to-text_num_concurrency_*_time_*s.json"))
    assert any("SLAPLAN_ONLINE_ENGINE_COMMAND" in why for why in measured["leftOut"])


def test_budget_and_failures_end_in_a_final_state(sessions, database_url, tmp_path):
    # a wall-time budget shorter than one measurement: the first one counts, then the search stops
    quick = _store(sessions, dgdr("quick", max_trials=5, max_wall_time_minutes=0.05))
    deployed: list[str] = []
    assert tasks.process_dgdr(sessions, quick, online=lambda: _setup(database_url, tmp_path, Recording(deployed))) == "ready"
    measured = _results(stored_status(sessions, quick))["online"]
    assert len(deployed) == 1 and measured["stopped"] == "wall-time budget used (0.05 min)"
    # no unit can be brought up: Failed, with the engine's own words
    broken = _store(sessions, dgdr("broken"))
    dying = LocalTarget(command="sh -c 'echo no GPU found; exit 1'")
    assert tasks.process_dgdr(sessions, broken, online=lambda: _setup(database_url, tmp_path, dying)) == "failed"
    status = stored_status(sessions, broken)
    profiling = next(c for c in status["conditions"] if c["type"] == "Profiling")
    assert status["state"] == "Failed" and "no candidate could be measured" in profiling["message"]
    assert "no GPU found" in profiling["message"]
    # a worker told to deploy on a cluster it does not have
    nowhere = _store(sessions, dgdr("nowhere"))
    settings = load_settings({}, database_url=database_url, online_target="kubernetes")
    assert tasks.process_dgdr(sessions, nowhere, online=lambda: online.online_setup(settings)) == "failed"
    profiling = next(c for c in stored_status(sessions, nowhere)["conditions"] if c["type"] == "Profiling")
    assert "online_target is kubernetes but no cluster is configured" in profiling["message"]


def test_an_online_dgdr_on_kubernetes(sessions, database_url, tmp_path):
    """The Kubernetes target end to end against the fake API server (real CRD schemas): the unit's
    DGD is applied, the test plays the operator (marks it successful), an emulator stands in for
    its frontend service, genai-bench measures it, and the DGD is deleted afterwards."""
    from fake_kube import CRD_DIR, SKIP_REASON, FakeKube
    from infra.deploy_targets import KubeTarget
    from infra.kube import connect
    from procs import start_emulator

    if not CRD_DIR.is_dir():
        pytest.skip(SKIP_REASON)
    fake = FakeKube()
    fake.start()
    frontend, base = start_emulator("--speed", str(SPEED), model=MODEL)
    applied: list[str] = []
    done = threading.Event()

    def operator() -> None:
        while not done.wait(0.1):
            for group, plural, namespace, name in list(fake.objects):
                live = fake.get("nvidia.com/v1alpha1", "DynamoGraphDeployment", namespace, name)
                if plural == "dynamographdeployments" and live and not live.get("status"):
                    applied.append(name)
                    fake.set_status("nvidia.com/v1alpha1", "DynamoGraphDeployment", namespace, name,
                                    {"state": "successful"})

    thread = threading.Thread(target=operator, daemon=True)
    thread.start()
    try:
        cluster = connect(kubeconfig=str(fake.write_kubeconfig(tmp_path / "kubeconfig")))
        target = KubeTarget(cluster, poll_s=0.2, frontend_url=base)  # every unit's frontend: the stand-in
        uid = _store(sessions, dgdr("on-kube", max_trials=1))
        assert tasks.process_dgdr(sessions, uid, online=lambda: _setup(database_url, tmp_path, target)) == "ready"
    finally:
        done.set()
        thread.join(5)
        stop(frontend)
        fake.stop()
    measured = _results(stored_status(sessions, uid))["online"]
    assert applied == ["on-kube-online-0"] and measured["trials"][0]["state"] == "complete"
    assert not [key for key in fake.objects if key[1] == "dynamographdeployments"]  # torn down
