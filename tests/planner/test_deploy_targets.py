"""Deployment targets of the online search: local engine processes (the real emulator, a user's
command template, an engine that dies) and Kubernetes against the fake API server, which
enforces the real CRD schemas but runs no pods (the operator's status changes are played by
the test: ready, failed, never ready, deleted)."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import textwrap

import httpx
import pytest

from fake_kube import CRD_DIR, SKIP_REASON, FakeKube
from paths import ROOT
from procs import SLAPLAN, descendants, role_command, running, wait_ended
from infra.deploy_targets import KubeTarget, LocalTarget, TargetError, deployed
from planner import online as search
from planner import plan
from planner.types import PlanRequest

REQUEST = PlanRequest(name="trial", model="meta-llama/Llama-3.1-8B-Instruct", gpu="a100_sxm", ttft_ms=300,
                      itl_ms=20, isl_tokens=200, osl_tokens=30, max_gpus_per_engine=2)
DGD = "nvidia.com/v1alpha1"


@pytest.fixture(scope="module")
def units():
    return search.units(plan(REQUEST).candidates)


# --------------------------------------------------------------------------- local


@pytest.mark.slow
def test_the_local_emulator_serves_until_torn_down(units):
    target = LocalTarget(speed=4.0)
    with deployed(target, units["agg tp1"], REQUEST, "t-local") as endpoint:
        models = httpx.get(f"{endpoint.base_url}/v1/models", timeout=5).json()
        assert [m["id"] for m in models["data"]] == [REQUEST.model] == [endpoint.model_name]
        assert endpoint.base_url.startswith("http://127.0.0.1:")
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{endpoint.base_url}/v1/models", timeout=2)


@pytest.mark.slow
def test_a_local_engine_command_template(units):
    command = f"{shlex.quote(sys.executable)} -m api.cli emulate --model {{model}} --gpu {{gpu}} --tp {{tp}} " \
              f"--max-batch {{max_batch}} --served-model-name {{model}} --host {{host}} --port {{port}}"
    with deployed(LocalTarget(command=command), units["agg tp2"], REQUEST, "t-template") as endpoint:
        assert httpx.get(f"{endpoint.base_url}/v1/models", timeout=5).status_code == 200


# A worker's online search, reduced: it starts one engine of a unit the way the worker does (from
# a thread that has ended by the time the engine serves), says where it serves, and waits.
WORKER = textwrap.dedent("""
    import sys, threading
    from infra.deploy_targets import LocalTarget
    from planner import online, plan
    from planner.types import PlanRequest

    request = PlanRequest.model_validate_json(sys.argv[1])
    unit = online.units(plan(request).candidates)["agg tp1"]
    started = {}
    target = LocalTarget(command=sys.argv[2] or None, speed=4.0)
    thread = threading.Thread(target=lambda: started.update(endpoint=target.up(unit, request, "orphan")))
    thread.start()
    thread.join()
    print(started["endpoint"].base_url, flush=True)
    threading.Event().wait()
""")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process tree from /proc")
@pytest.mark.parametrize("engine", ["emulator", "shell command with a child"])
def test_engines_end_with_a_killed_worker(engine):
    """SIGKILL gives a worker no chance to tear its engines down: they (and whatever they
    started) end with it anyway, and not with the thread that started them."""
    inner = f"sleep 600 & exec {shlex.join(SLAPLAN)} emulate --model {{model}} --gpu {{gpu}} " \
            "--served-model-name {model} --host {host} --port {port}"
    command = "" if engine == "emulator" else f"sh -c {shlex.quote(inner)}"
    worker = subprocess.Popen([sys.executable, "-c", WORKER, REQUEST.model_dump_json(), command], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        base_url = worker.stdout.readline().strip()
        assert base_url.startswith("http://"), "the engine did not come up"
        tree = descendants(worker.pid)  # the guard, its sentinel, the engine, and the shell's child
        assert len(running(tree)) == (3 if engine == "emulator" else 4)
        assert httpx.get(f"{base_url}/v1/models", timeout=5).status_code == 200
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    assert wait_ended(tree) == set()


def test_local_failures_say_why(units):
    dying = LocalTarget(command="sh -c 'echo CUDA out of memory; exit 3'")
    with pytest.raises(TargetError, match=r"exited with code 3 before serving: CUDA out of memory"):
        dying.up(units["agg tp1"], REQUEST, "t-dies")
    with pytest.raises(TargetError, match=r"template .* is invalid: 'gpus'"):
        LocalTarget(command="engine --gpus {gpus}").up(units["agg tp1"], REQUEST, "t-bad")
    with pytest.raises(TargetError, match="exited with code 127 before serving: cannot start 'no-such-engine-here'"):
        LocalTarget(command="no-such-engine-here --port {port}").up(units["agg tp1"], REQUEST, "t-missing")
    silent = LocalTarget(command="sleep 30", ready_timeout_s=1)
    with pytest.raises(TargetError, match=r"did not serve http://127.0.0.1:\d+/v1/models within 1 s"):
        silent.up(units["agg tp1"], REQUEST, "t-silent")
    disagg, agg = units["disagg tp1+tp2"], units["agg tp1"]
    assert LocalTarget().supports(disagg) is None
    assert "aggregated units only" in LocalTarget(command="engine --port {port}").supports(disagg)
    with pytest.raises(TargetError, match="aggregated units only"):
        LocalTarget(command="engine --port {port}").up(disagg, REQUEST, "t-disagg")
    # real and emulated engines are not mixed: prefill and decode commands alone run no aggregated unit
    roles = LocalTarget(prefill_command="p --port {port}", decode_command="d --port {port}")
    assert roles.supports(disagg) is None and "SLAPLAN_ONLINE_ENGINE_COMMAND" in roles.supports(agg)


def test_an_emulated_prefill_engine_serves_bootstrap_rooms_when_asked(units):
    """SGLang's handoff needs the prefill engine's bootstrap server: only the prefill role of a
    disaggregated unit is given the port."""
    from infra.deploy_targets import emulator_command

    prefill, decode = units["disagg tp1+tp2"].engines
    argvs = [emulator_command(units["disagg tp1+tp2"], e, REQUEST.model, 8000, bootstrap_port=8001)
             for e in (prefill, decode)]
    plain = emulator_command(units["disagg tp1+tp2"], prefill, REQUEST.model, 8000)
    assert argvs[0][-2:] == ["--bootstrap-port", "8001"]
    assert "--bootstrap-port" not in argvs[1] and "--bootstrap-port" not in plain


def test_the_engines_of_a_unit_get_their_own_gpus(units):
    from infra.deploy_targets import device_lists, template_command

    unit = units["disagg tp1+tp2"]
    assert device_lists(unit) == ["0", "1,2"]  # prefill tp1, then decode tp2
    argv = template_command("env CUDA_VISIBLE_DEVICES={devices} engine --port {port} --side {side_port}", unit,
                            unit.engines[1], REQUEST.model, 8001, devices="1,2", side_port=8002)
    assert argv == ["env", "CUDA_VISIBLE_DEVICES=1,2", "engine", "--port", "8001", "--side", "8002"]


@pytest.mark.slow
@pytest.mark.parametrize("handoff", ["plain", "vllm", "sglang"])
def test_prefill_and_decode_command_templates_behind_the_router(units, handoff):
    """A disaggregated unit from the user's prefill and decode commands (emulators playing the
    roles, with vLLM's KV-transfer and SGLang's bootstrap handoffs too): the streamed answer
    comes through the router whole."""
    target = LocalTarget(prefill_command=role_command("prefill"), decode_command=role_command("decode"),
                         handoff=handoff)
    with deployed(target, units["disagg tp1+tp2"], REQUEST, "t-roles") as endpoint:
        body = {"model": REQUEST.model, "prompt": "x" * 200, "max_tokens": 9, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", f"{endpoint.base_url}/v1/completions", json=body, timeout=30) as answer:
            events = [line for line in answer.iter_lines() if line.startswith("data: ")]
        assert answer.status_code == 200 and events[-1] == "data: [DONE]" and len(events) == 9 + 1


@pytest.mark.slow
@pytest.mark.parametrize("handoff", ["plain", "sglang"])
def test_a_local_disaggregated_unit_prefills_then_decodes(units, handoff):
    """Two emulators (prefill tp1, decode tp2) behind the local router: a streamed answer comes
    through whole, and the prefill engine saw the prompt but generated one token."""
    with deployed(LocalTarget(speed=4.0, handoff=handoff), units["disagg tp1+tp2"], REQUEST, "t-disagg") as endpoint:
        body = {"model": REQUEST.model, "messages": [{"role": "user", "content": "x" * 200}], "max_tokens": 12,
                "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
        with httpx.stream("POST", f"{endpoint.base_url}/v1/chat/completions", json=body, timeout=30) as answer:
            events = [line for line in answer.iter_lines() if line.startswith("data: ")]
        usage = json.loads(events[-2][6:])["usage"]
        assert events[-1] == "data: [DONE]" and usage["completion_tokens"] == 12 and usage["prompt_tokens"] >= 200
        assert httpx.get(f"{endpoint.base_url}/v1/models", timeout=5).json()["data"][0]["id"] == REQUEST.model
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{endpoint.base_url}/v1/models", timeout=2)


# --------------------------------------------------------------------------- Kubernetes


@pytest.fixture
def fake(tmp_path):
    if not CRD_DIR.is_dir():
        pytest.skip(SKIP_REASON)
    fake = FakeKube()
    fake.start()
    yield fake, fake.write_kubeconfig(tmp_path / "kubeconfig")
    fake.stop()


def _target(kubeconfig, operator, **kw) -> KubeTarget:
    """A KubeTarget whose waits run ``operator`` (what the Dynamo operator would do meanwhile)
    and advance a fake clock, so timeouts need no real waiting."""
    from infra.kube import connect

    now = [0.0]

    def sleep(seconds: float) -> None:
        operator()
        now[0] += seconds

    return KubeTarget(connect(kubeconfig=str(kubeconfig)), sleep=sleep, clock=lambda: now[0], **kw)


@pytest.mark.slow
@pytest.mark.parametrize("key", ["agg tp2", "disagg tp1+tp2"])
def test_kubernetes_applies_waits_for_the_operator_and_deletes(fake, units, key):
    server, kubeconfig = fake
    ready = lambda: server.set_status(DGD, "DynamoGraphDeployment", "default", "t-kube", {"state": "successful"})  # noqa: E731
    target = _target(kubeconfig, ready, poll_s=5)
    endpoint = target.up(units[key], REQUEST, "t-kube")
    applied = server.get(DGD, "DynamoGraphDeployment", "default", "t-kube")
    assert applied["metadata"]["labels"]["slaplan.io/online-trial"] == "t-kube"
    workers = [s for s in applied["spec"]["services"].values() if s["componentType"] == "worker"]
    assert len(workers) == (1 if key.startswith("agg") else 2) and all(s["replicas"] == 1 for s in workers)
    assert endpoint.base_url == "http://t-kube-frontend.default.svc.cluster.local:8000"
    assert endpoint.model_name == REQUEST.model
    target.down(endpoint)
    assert server.get(DGD, "DynamoGraphDeployment", "default", "t-kube") is None
    target.down(endpoint)  # already gone: nothing to do


@pytest.mark.slow
def test_kubernetes_failures_clean_up_and_say_why(fake, units):
    server, kubeconfig = fake
    unit = units["agg tp1"]

    def state(value, message=None):
        return lambda: server.set_status(DGD, "DynamoGraphDeployment", "default", "t-fail",
                                         {"state": value, **({"message": message} if message else {})})

    never = _target(kubeconfig, state("pending"), ready_timeout_s=30, poll_s=10)
    with pytest.raises(TargetError, match=r"default/t-fail was not ready within 30 s \(last state: pending\)"):
        never.up(unit, REQUEST, "t-fail")
    assert server.get(DGD, "DynamoGraphDeployment", "default", "t-fail") is None  # deleted on the way out

    broken = _target(kubeconfig, state("failed", "ImagePullBackOff"))
    with pytest.raises(TargetError, match="t-fail failed: ImagePullBackOff"):
        broken.up(unit, REQUEST, "t-fail")
    assert server.get(DGD, "DynamoGraphDeployment", "default", "t-fail") is None

    gone = _target(kubeconfig, lambda: server.remove(DGD, "DynamoGraphDeployment", "default", "t-fail"))
    with pytest.raises(TargetError, match="was deleted while it was starting"):
        gone.up(unit, REQUEST, "t-fail")


@pytest.mark.slow
def test_kubernetes_without_the_operator(tmp_path, units):
    if not CRD_DIR.is_dir():
        pytest.skip(SKIP_REASON)
    from infra.kube import connect

    server = FakeKube(served=[("ome.io", "v1beta1", "InferenceService")])
    server.start()
    try:
        target = KubeTarget(connect(kubeconfig=str(server.write_kubeconfig(tmp_path / "kc"))))
        with pytest.raises(TargetError, match="does not serve nvidia.com DynamoGraphDeployment; install the Dynamo operator"):
            target.up(units["agg tp1"], REQUEST, "t-none")
    finally:
        server.stop()
