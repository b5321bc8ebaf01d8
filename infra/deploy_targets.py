"""Deployment targets of the online search: bring one candidate unit up, hand back its OpenAI
endpoint, tear it down.

- ``LocalTarget`` starts one engine process per unit on a free loopback port: ``slaplan
  emulate`` by default (the engine emulator, timed by the performance model, optionally faster
  or slower than it), or a user's engine command template such as
  ``llama-server -m model.gguf --host {host} --port {port}``. It waits until ``/v1/models``
  answers and stops the process group on teardown. A disaggregated unit is two emulators
  (``--mode prefill`` and ``--mode decode``) behind a local router (``infra.disagg_router``); a
  user's command runs aggregated units only.
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
                     speed: float = 1.0) -> list[str]:
    """``slaplan emulate`` for one ``engine`` of ``unit`` (its role sets ``--mode``), serving ``model``."""
    mode = {"aggregated": "agg"}.get(engine.role, engine.role)
    argv = [sys.executable, "-m", "api.cli", "emulate", "--model", model, "--gpu", unit.gpu,
            "--backend", unit.backend, "--precision", unit.precision, "--tp", str(engine.tp), "--pp", str(engine.pp),
            "--dp", str(engine.dp), "--ep", str(engine.ep), "--mode", mode, "--max-batch", str(engine.max_batch),
            "--speed", f"{speed:g}", "--host", host, "--port", str(port)]
    if engine.max_num_tokens:
        argv += ["--max-num-tokens", str(engine.max_num_tokens)]
    return argv


def template_command(template: str, unit: Plan, model: str, port: int, *, host: str = "127.0.0.1") -> list[str]:
    """A user's engine command with ``{model} {gpu} {backend} {tp} {pp} {dp} {ep} {max_batch}
    {max_num_tokens} {host} {port}`` filled in for ``unit`` serving ``model``."""
    e = unit.engines[0]
    values = dict(model=model, gpu=unit.gpu, backend=unit.backend, tp=e.tp, pp=e.pp, dp=e.dp, ep=e.ep,
                  max_batch=e.max_batch, max_num_tokens=e.max_num_tokens or "", host=host, port=port)
    try:
        return shlex.split(template.format(**values))
    except (KeyError, IndexError, ValueError) as exc:
        raise TargetError(f"the engine command template {template!r} is invalid: {exc}") from None


class LocalTarget:
    """Engine processes on loopback ports, one per engine of a unit (see the module docstring)."""

    def __init__(self, *, command: str | None = None, speed: float = 1.0, host: str = "127.0.0.1",
                 ready_timeout_s: float = 120.0, cwd: str | None = None):
        self.command, self.speed, self.host = command, speed, host
        self.ready_timeout_s = ready_timeout_s
        self.cwd = cwd or str(Path(__file__).resolve().parents[1])
        self._running: dict[str, list[Callable[[], None]]] = {}  # unit name -> what stops its parts

    def supports(self, unit: Plan) -> str | None:
        if unit.mode != "agg" and self.command:
            return "a local engine command runs aggregated units only (it has no prefill/decode mode)"
        return None

    def up(self, unit: Plan, request: PlanRequest, name: str) -> Endpoint:
        why = self.supports(unit)
        if why:
            raise TargetError(why)
        self._running[name] = []
        try:
            bases = []
            for engine in unit.engines:
                port = _free_port(self.host)
                argv = (template_command(self.command, unit, request.model, port, host=self.host) if self.command
                        else emulator_command(unit, engine, request.model, port, host=self.host, speed=self.speed))
                bases.append(self._start(name, argv, port))
            base = bases[0]
            if unit.mode == "disagg":
                from infra.disagg_router import start_router

                port = _free_port(self.host)
                self._running[name].append(start_router(bases[0], bases[1], self.host, port))
                base = f"http://{self.host}:{port}"
        except RuntimeError as exc:  # the router did not start
            self._stop(name)
            raise TargetError(str(exc)) from None
        except BaseException:
            self._stop(name)
            raise
        return Endpoint(name=name, base_url=base, model_name=request.model)

    def _start(self, name: str, argv: list[str], port: int) -> str:
        """Start one engine process, wait until it serves; returns its base URL."""
        from profiler.bench.runner import stop_group

        log = Path(tempfile.mkstemp(prefix=f"slaplan-{name}-", suffix=".log")[1])
        with log.open("wb") as out:
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                        cwd=self.cwd, start_new_session=True)
            except OSError as exc:
                log.unlink(missing_ok=True)
                raise TargetError(f"cannot start the engine {argv[0]!r}: {exc}") from None
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
