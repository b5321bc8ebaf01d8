"""`slaplan serve` with nothing configured: one process, SQLite in the per-user data directory
(never the working directory), an embedded worker; state survives a restart."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from kubernetes import client as k8s
from procs import SLAPLAN, command_line, descendants, free_port, stop, wait_ended, wait_ready
from infra import migrate
from paths import ROOT

pytestmark = pytest.mark.slow


def _start(workdir: Path, port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLAPLAN_")}
    env["PYTHONPATH"] = str(ROOT)
    env["XDG_DATA_HOME"] = str(workdir / "data")
    proc = subprocess.Popen(
        [*SLAPLAN, "serve", "--port", str(port), "--log-level", "warning"],
        cwd=workdir, env=env, stdin=subprocess.DEVNULL,
        stdout=(workdir / "serve.log").open("a"), stderr=subprocess.STDOUT,
    )
    wait_ready(proc, f"http://127.0.0.1:{port}/readyz", workdir / "serve.log")
    return proc


BENCH = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "BenchmarkJob",
    "metadata": {"name": "served", "labels": {"suite": "serve"}},
    "spec": {
        "endpoint": {"inferenceService": {"name": "llm", "namespace": "serving"}},
        "task": "text-to-text",
        "maxTimePerIteration": 1,
        "maxRequestsPerIteration": 10,
        "outputLocation": {"storageUri": "s3://bucket/results"},
    },
}


def test_serve_embedded_and_restart(tmp_path):
    port = free_port()
    proc = _start(tmp_path, port)
    try:
        api = k8s.CustomObjectsApi(k8s.ApiClient(k8s.Configuration(host=f"http://127.0.0.1:{port}")))
        created = api.create_namespaced_custom_object("ome.io", "v1beta1", "default", "benchmarkjobs", BENCH)
        deadline = time.monotonic() + 30
        obj = created
        while obj.get("status", {}).get("state") not in ("Completed", "Failed") and time.monotonic() < deadline:
            time.sleep(0.1)
            obj = api.get_namespaced_custom_object("ome.io", "v1beta1", "default", "benchmarkjobs", "served")
        # the embedded worker took it and, with no cluster to resolve the InferenceService, failed it
        assert "no Kubernetes cluster is configured" in obj["status"].get("failureMessage", ""), obj["status"]
    finally:
        stop(proc)
    assert (tmp_path / "data" / "slaplan" / "slaplan.db").exists()  # the per-user file
    assert not (tmp_path / "slaplan.db").exists()  # not the working directory's

    proc = _start(tmp_path, port)
    try:
        api = k8s.CustomObjectsApi(k8s.ApiClient(k8s.Configuration(host=f"http://127.0.0.1:{port}")))
        again = api.list_namespaced_custom_object("ome.io", "v1beta1", "default", "benchmarkjobs", label_selector="suite=serve")
        assert [i["metadata"]["uid"] for i in again["items"]] == [created["metadata"]["uid"]]
    finally:
        stop(proc)


# --- a database serve cannot use is refused at start; one it cannot write is a 503 ---------------------------

def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLAPLAN_")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def _cli(workdir: Path, command: str, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``slaplan COMMAND ARGV`` in ``workdir`` (a serve that starts instead of refusing times out)."""
    env = env or _clean_env(XDG_DATA_HOME=str(workdir / "data"))
    return subprocess.run([*SLAPLAN, command, *argv], cwd=workdir, env=env, capture_output=True, text=True, timeout=60)


def _set_version(db: Path, revision: str) -> None:
    import sqlite3

    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE slaplan_alembic_version SET version_num = ?", (revision,))


NOT_MIGRATED = "slaplan: invalid setting: SLAPLAN_DATABASE_URL: the database is not migrated: run `slaplan migrate`"
NEWER = ("slaplan: invalid setting: SLAPLAN_DATABASE_URL: the database is at revision '0009_future', which this "
         "slaplan does not know: it was written by a newer slaplan (or is not a slaplan database)")


def test_serve_no_migrate_refuses_an_unmigrated_database(tmp_path):
    # It once started, and every request was a plain-text 500 "no such table".
    serve = ("--no-migrate", "--port", str(free_port()), "--log-level", "warning")
    done = _cli(tmp_path, "serve", *serve)
    assert (done.returncode, done.stderr.strip().splitlines()) == (2, [NOT_MIGRATED])
    assert _cli(tmp_path, "migrate", "--revision", "0002_calibrations").returncode == 0
    done = _cli(tmp_path, "serve", *serve)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "slaplan: invalid setting: SLAPLAN_DATABASE_URL: the database is at revision 0002_calibrations, "
        f"not the newest ({migrate.revisions()[-1]}): run `slaplan migrate`"], done.stderr


def test_serve_refuses_a_database_of_a_newer_slaplan(tmp_path):
    assert _cli(tmp_path, "migrate").returncode == 0
    _set_version(tmp_path / "data" / "slaplan" / "slaplan.db", "0009_future")
    for no_migrate in ((), ("--no-migrate",)):
        done = _cli(tmp_path, "serve", *no_migrate, "--port", str(free_port()), "--log-level", "warning")
        assert (done.returncode, done.stderr.strip().splitlines()) == (2, [NEWER])


def test_serve_logs_at_trace_level(tmp_path):
    port = free_port()
    proc = subprocess.Popen([*SLAPLAN, "serve", "--port", str(port), "--log-level", "trace"], cwd=tmp_path,
                            env=_clean_env(), stdin=subprocess.DEVNULL, stdout=(tmp_path / "serve.log").open("a"),
                            stderr=subprocess.STDOUT)
    try:
        wait_ready(proc, f"http://127.0.0.1:{port}/readyz", tmp_path / "serve.log")
    finally:
        stop(proc)
    assert "TRACE" in (tmp_path / "serve.log").read_text()  # uvicorn's own trace lines


def test_a_read_only_sqlite_database_answers_writes_with_a_503(tmp_path):
    import httpx

    from procs import start_serve

    db = tmp_path / "ro.db"
    assert _cli(tmp_path, "migrate", env=_clean_env(SLAPLAN_DATABASE_URL=f"sqlite:///{db}")).returncode == 0
    url, procs = start_serve(tmp_path, {"SLAPLAN_DATABASE_URL": f"sqlite:///file:{db}?mode=ro&uri=true"})
    try:
        jobs = f"{url}/apis/ome.io/v1beta1/namespaces/default/benchmarkjobs"
        created = httpx.post(jobs, json=BENCH, timeout=10)
        assert created.status_code == 503, created.text
        assert created.json() == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 503,
            "reason": "ServiceUnavailable",
            "message": "the database cannot be written (it is read-only); try again when it is writable"}
        assert httpx.get(jobs, timeout=10).json()["items"] == []  # reading still works
    finally:
        for proc in procs:
            stop(proc)
    assert "attempt to write a readonly database" in (tmp_path / "serve.log").read_text()  # the cause, in the log


BNS = "/apis/ome.io/v1beta1/namespaces/default/benchmarkjobs"


def _test_client(settings):
    from api_client import api_client

    from api.app import create_app
    from infra import migrate

    migrate.upgrade(settings)
    app = create_app(settings)
    app.state.enqueue = lambda _kind, _uid: None
    return app, api_client(app)


def test_a_read_only_postgresql_database_answers_writes_with_a_503(pg_url):
    # A hot standby, or a database set read-only: PostgreSQL's read_only_sql_transaction.
    from sqlalchemy import create_engine, text

    from infra.settings import load_settings

    app, client = _test_client(load_settings({}, database_url=pg_url))
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'ALTER DATABASE "{pg_url.rsplit("/", 1)[1]}" SET default_transaction_read_only = on'))
        app.state.engine.dispose()  # new sessions start read-only
        created = client.post(BNS, json=BENCH)
        assert created.status_code == 503 and "cannot be written (it is read-only)" in created.json()["message"]
        assert "postgres" not in created.text  # nothing of the driver's message (hosts, users)
        assert client.get(BNS).status_code == 200
    finally:
        app.state.engine.dispose()
        admin.dispose()


def test_a_token_from_a_file_with_a_trailing_newline_still_authorises(tmp_path):
    from infra.settings import load_settings

    settings = load_settings({"SLAPLAN_API_TOKEN": "s3cret\n"}, database_url=f"sqlite:///{tmp_path / 't.db'}")
    app, client = _test_client(settings)
    try:
        assert client.post(BNS, json=BENCH).status_code == 401
        assert client.post(BNS, json=BENCH, headers={"authorization": "Bearer s3cret"}).status_code == 201
    finally:
        app.state.engine.dispose()


ONLINE_DGDR = {
    "apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeploymentRequest",
    "metadata": {"name": "measured", "namespace": "default"},
    "spec": {"model": "meta-llama/Llama-3.1-8B-Instruct", "backend": "vllm", "hardware": {"gpuSku": "a100_sxm"},
             "workload": {"isl": 200, "osl": 30}, "sla": {"ttft": 300, "itl": 20}, "searchStrategy": "thorough",
             "autoApply": False},
}


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process tree from /proc")
def test_sigterm_stops_serve_and_the_engines_of_its_online_searches(tmp_path):
    """SIGTERM mid-trial: serve stops its worker and planning processes and exits by itself;
    the emulator the online search had started does not outlive it."""
    port = free_port()
    proc = _start(tmp_path, port)
    try:
        url = f"http://127.0.0.1:{port}/apis/nvidia.com/v1beta1/namespaces/default/dynamographdeploymentrequests"
        assert httpx.post(url, json=ONLINE_DGDR, timeout=10).status_code == 201
        deadline, engines = time.monotonic() + 60, set()
        while not engines and time.monotonic() < deadline:
            time.sleep(0.2)
            engines = {pid for pid in descendants(proc.pid) if " emulate " in command_line(pid)}
        assert engines, "no engine was started"
        tree = descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        stop(proc)
    assert wait_ended(tree) == set()
