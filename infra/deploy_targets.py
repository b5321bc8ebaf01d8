"""Deployment targets of the online search: bring one candidate unit up, hand back its OpenAI
endpoint, tear it down.

- ``LocalTarget`` starts one engine process per engine of a unit on a free loopback port:
  ``slaplan emulate`` by default (the engine emulator, timed by the performance model, optionally
  faster or slower than it), or a user's command template per role, such as
  ``llama-server -m model.gguf --host {host} --port {port}`` for aggregated units. It waits until
  ``/v1/models`` answers; each engine's process tree ends on teardown, and with the process that
  started it, even one killed outright (``profiler.bench.tether``). A disaggregated unit is a
  prefill and a decode engine (emulators ``--mode prefill`` and ``--mode decode``, or the user's
  prefill and decode commands, e.g. vLLM or SGLang with their disaggregation flags) behind a local
  router (``infra.disagg_router``) that hands each request over as the engines expect
  (``handoff``). The engines of one unit get consecutive GPU indices (``{devices}``).
- ``KubeTarget`` server-side applies the unit's DynamoGraphDeployment (``infra.kube``), waits
  until the operator reports ``status.state: successful``, and benchmarks the frontend service
  the operator creates (``<name>-frontend`` on port 8000; ``SLAPLAN_ONLINE_FRONTEND_URL`` changes
  the template, e.g. for a worker outside the cluster behind an ingress); it deletes the
  DGD on teardown, and when the deployment fails or does not become ready in time.

Failures raise ``TargetError`` with a message fit for the DGDR's status.
"""

from __future__ import annotations

import logging
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from infra.kube import Cluster, ClusterError
from infra.settings import Settings
from planner.types import Engine, Plan, PlanRequest

log = logging.getLogger(__name__)

DEFAULT_FRONTEND_URL = Settings.model_fields["online_frontend_url"].default
READY_STATE = "successful"
FAILED_STATES = frozenset({"failed"})


class TargetError(Exception):
    """A unit that could not be brought up (or reached), in plain words."""


class Endpoint(BaseModel):
    """A running unit: its OpenAI base URL (no ``/v1``) and the model name it serves."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    base_url: str
    model_name: str
    namespace: str | None = None
    api_version: str | None = None


class DeploymentTarget(Protocol):
    """Where the online search runs its candidates."""

    def supports(self, unit: Plan) -> str | None:
        """None when ``unit`` can be deployed here, else why not."""

    def up(self, unit: Plan, request: PlanRequest, name: str) -> Endpoint:
        """Deploy ``unit`` as ``name`` and wait until it serves; raises TargetError."""

    def down(self, endpoint: Endpoint) -> None:
        """Tear the unit down (never raises for one already gone)."""


@contextmanager
def deployed(target: DeploymentTarget, unit: Plan, request: PlanRequest, name: str) -> Iterator[Endpoint]:
    """``target.up`` … ``target.down``, whatever happens in between."""
    endpoint = target.up(unit, request, name)
    try:
        yield endpoint
    finally:
        target.down(endpoint)


# --------------------------------------------------------------------------- local processes


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def emulator_command(unit: Plan, engine: Engine, model: str, port: int, *, host: str = "127.0.0.1",
                     speed: float = 1.0, bootstrap_port: int | None = None) -> list[str]:
    """``slaplan emulate`` for one ``engine`` of ``unit`` (its role sets ``--mode``), serving ``model``
    (a prefill engine with ``bootstrap_port`` also serves SGLang's bootstrap rooms there)."""
    mode = {"aggregated": "agg"}.get(engine.role, engine.role)
    argv = [sys.executable, "-m", "api.cli", "emulate", "--model", model, "--gpu", unit.gpu,
            "--backend", unit.backend, "--precision", unit.precision, "--tp", str(engine.tp), "--pp", str(engine.pp),
            "--dp", str(engine.dp), "--ep", str(engine.ep), "--mode", mode, "--max-batch", str(engine.max_batch),
            "--speed", f"{speed:g}", "--host", host, "--port", str(port), "--exit-with-parent"]
    if engine.max_num_tokens:
        argv += ["--max-num-tokens", str(engine.max_num_tokens)]
    if bootstrap_port is not None and engine.role == "prefill":
        argv += ["--bootstrap-port", str(bootstrap_port)]
    return argv


def device_lists(unit: Plan) -> list[str]:
    """Each engine's GPU indices on this machine (``0,1``), consecutive in the unit's engine order."""
    out, first = [], 0
    for engine in unit.engines:
        out.append(",".join(str(i) for i in range(first, first + engine.gpus)))
        first += engine.gpus
    return out


def template_command(template: str, unit: Plan, engine: Engine, model: str, port: int, *, host: str = "127.0.0.1",
                     devices: str = "", side_port: int = 0) -> list[str]:
    """A user's engine command with ``{model} {gpu} {backend} {tp} {pp} {dp} {ep} {max_batch}
    {max_num_tokens} {host} {port} {devices} {side_port}`` filled in for ``engine`` of ``unit``."""
    e = engine
    values = dict(model=model, gpu=unit.gpu, backend=unit.backend, tp=e.tp, pp=e.pp, dp=e.dp, ep=e.ep,
                  max_batch=e.max_batch, max_num_tokens=e.max_num_tokens or "", host=host, port=port,
                  devices=devices, side_port=side_port)
    try:
        return shlex.split(template.format(**values))
    except (KeyError, IndexError, ValueError) as exc:
        raise TargetError(f"the engine command template {template!r} is invalid: {exc}") from None


class LocalTarget:
    """Engine processes on loopback ports, one per engine of a unit (see the module docstring).

    ``command`` runs aggregated engines, ``prefill_command`` and ``decode_command`` the two roles
    of a disaggregated unit; with none of them set every engine is an emulator. A unit whose
    role has no command while another role has one cannot run here (real and emulated
    measurements are not mixed in one search)."""

    def __init__(self, *, command: str | None = None, prefill_command: str | None = None,
                 decode_command: str | None = None, handoff: str = "plain", speed: float = 1.0,
                 host: str = "127.0.0.1", ready_timeout_s: float = 120.0, cwd: str | None = None):
        self.commands = {"aggregated": command, "prefill": prefill_command, "decode": decode_command}
        self.handoff, self.speed, self.host = handoff, speed, host
        self.ready_timeout_s = ready_timeout_s
        self.cwd = cwd or str(Path(__file__).resolve().parents[1])
        self._running: dict[str, list[Callable[[], None]]] = {}  # unit name -> what stops its parts

    @property
    def emulated(self) -> bool:
        """Whether every engine is an emulator (no command is set)."""
        return not any(self.commands.values())

    def supports(self, unit: Plan) -> str | None:
        if self.emulated or all(self.commands[e.role] for e in unit.engines):
            return None
        if unit.mode == "agg":
            return "aggregated units need a local engine command (SLAPLAN_ONLINE_ENGINE_COMMAND)"
        return ("a local engine command runs aggregated units only: disaggregated ones need "
                "SLAPLAN_ONLINE_PREFILL_COMMAND and SLAPLAN_ONLINE_DECODE_COMMAND")

    def up(self, unit: Plan, request: PlanRequest, name: str) -> Endpoint:
        why = self.supports(unit)
        if why:
            raise TargetError(why)
        self._running[name] = []
        try:
            bases, side_ports = [], []
            for engine, devices in zip(unit.engines, device_lists(unit)):
                port, side_port = _free_port(self.host), _free_port(self.host)
                template = self.commands[engine.role]
                argv = (template_command(template, unit, engine, request.model, port, host=self.host,
                                         devices=devices, side_port=side_port) if template
                        else emulator_command(unit, engine, request.model, port, host=self.host, speed=self.speed,
                                              bootstrap_port=side_port if self.handoff == "sglang" else None))
                bases.append(self._start(name, argv, port))
                side_ports.append(side_port)
            base = bases[0]
            if unit.mode == "disagg":
                from infra.disagg_router import start_router

                port = _free_port(self.host)
                self._running[name].append(start_router(bases[0], bases[1], self.host, port, handoff=self.handoff,
                                                        bootstrap_port=side_ports[0]))
                base = f"http://{self.host}:{port}"
        except RuntimeError as exc:  # the router did not start
            self._stop(name)
            raise TargetError(str(exc)) from None
        except BaseException:
            self._stop(name)
            raise
        return Endpoint(name=name, base_url=base, model_name=request.model)

    def _start(self, name: str, argv: list[str], port: int) -> str:
        """Start one engine process tied to this process's life (``profiler.bench.tether``: it
        and everything it starts end with this process, even when this one is killed), wait
        until it serves; returns its base URL."""
        from profiler.bench.tether import start_tethered, stop_group

        log = Path(tempfile.mkstemp(prefix=f"slaplan-{name}-", suffix=".log")[1])
        with log.open("wb") as out:
            try:
                proc = start_tethered(argv, stdout=out, cwd=self.cwd)
            except OSError as exc:  # the working directory is gone
                log.unlink(missing_ok=True)
                raise TargetError(f"cannot start the engine {argv[0]!r} in {self.cwd}: {exc}") from None
        self._running[name].append(lambda: (stop_group(proc), log.unlink(missing_ok=True)))
        base = f"http://{self.host}:{port}"
        _wait_serving(proc, base, log, self.ready_timeout_s)
        return base

    def down(self, endpoint: Endpoint) -> None:
        self._stop(endpoint.name)

    def _stop(self, name: str) -> None:
        for stop in reversed(self._running.pop(name, [])):
            stop()


def _tail(path: Path, limit: int = 2000) -> str:
    try:
        return path.read_bytes()[-limit:].decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _wait_serving(proc: subprocess.Popen, base: str, log: Path, timeout_s: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise TargetError(f"the engine exited with code {proc.returncode} before serving: {_tail(log)}")
        try:
            if httpx.get(f"{base}/v1/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TargetError(f"the engine did not serve {base}/v1/models within {timeout_s:g} s: {_tail(log)}")


# --------------------------------------------------------------------------- Kubernetes


class KubeTarget:
    """Each unit as a DynamoGraphDeployment on a cluster (see the module docstring)."""

    def __init__(self, cluster: Cluster, *, namespace: str | None = None, ready_timeout_s: float = 3600.0,
                 poll_s: float = 10.0, frontend_url: str = DEFAULT_FRONTEND_URL,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic):
        self.cluster, self.namespace = cluster, namespace
        self.ready_timeout_s, self.poll_s, self.frontend_url = ready_timeout_s, poll_s, frontend_url
        self._sleep, self._clock = sleep, clock

    def supports(self, unit: Plan) -> str | None:
        return None

    def _dgd(self, unit: Plan, request: PlanRequest, name: str) -> dict:
        from infra.kube_targets import served_version
        from planner.manifests.dynamo import render_dgd

        version = served_version(self.cluster, "dynamo")
        if version is None:
            raise TargetError("the cluster does not serve nvidia.com DynamoGraphDeployment; install the Dynamo operator")
        trial = request.model_copy(update={
            "deployment_name": name, "deployment_namespace": self.namespace or request.deployment_namespace,
            "labels": {**request.labels, "slaplan.io/online-trial": name}})
        return render_dgd(unit, trial, api_version=version.split("/")[1])

    def up(self, unit: Plan, request: PlanRequest, name: str) -> Endpoint:
        try:
            dgd = self._dgd(unit, request, name)
            meta = dgd["metadata"]
            self.cluster.apply(dgd)
        except (ClusterError, ValueError) as exc:
            raise TargetError(f"cannot deploy {name}: {exc}") from None
        endpoint = Endpoint(name=meta["name"], namespace=meta["namespace"], api_version=dgd["apiVersion"],
                            base_url=self.frontend_url.format(name=meta["name"], namespace=meta["namespace"]),
                            model_name=request.model)
        try:
            self._wait_ready(endpoint)
        except BaseException:
            self.down(endpoint)
            raise
        return endpoint

    def _wait_ready(self, endpoint: Endpoint) -> None:
        deadline = self._clock() + self.ready_timeout_s
        what = f"DynamoGraphDeployment {endpoint.namespace}/{endpoint.name}"
        state = None
        while True:
            try:
                live = self.cluster.get(endpoint.api_version, "DynamoGraphDeployment", endpoint.namespace, endpoint.name)
            except ClusterError as exc:
                if not exc.transient:
                    raise TargetError(f"cannot follow {what}: {exc}") from None
                live = {}
            if live is None:
                raise TargetError(f"{what} was deleted while it was starting")
            state = (live.get("status") or {}).get("state") or state
            if state == READY_STATE:
                return
            if state in FAILED_STATES:
                raise TargetError(f"{what} failed: {(live.get('status') or {}).get('message') or state}")
            if self._clock() >= deadline:
                raise TargetError(f"{what} was not ready within {self.ready_timeout_s:g} s "
                                  f"(last state: {state or 'none reported'})")
            self._sleep(self.poll_s)

    def down(self, endpoint: Endpoint) -> None:
        try:
            self.cluster.delete(endpoint.api_version, "DynamoGraphDeployment", endpoint.namespace, endpoint.name)
        except ClusterError as exc:  # the trial's result stands; the leftover is said loudly
            log.warning("could not delete %s %s/%s: %s", endpoint.api_version, endpoint.namespace, endpoint.name, exc)
