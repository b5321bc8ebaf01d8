"""DGDR autoApply against the fake API server: Deploying → Ready when the DGD reports
successful, DeploymentDeleted when it disappears; never applied without autoApply; the REST
path needs the API token; and the manifests endpoint of a planned DGDR."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import pytest
from api_client import api_client

from fake_kube import CRD_DIR, SKIP_REASON, FakeKube
from stored import stored_status

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not CRD_DIR.is_dir(), reason=SKIP_REASON)]

DGD_V1 = "nvidia.com/v1alpha1"
DGD = "DynamoGraphDeployment"
PATH = "/apis/nvidia.com/v1alpha1/namespaces/default/dynamographdeploymentrequests"


def _spec(auto_apply: bool, name: str | None = None) -> dict:
    spec = {"modelName": "Qwen/Qwen3-32B", "backend": "vllm", "sla": {"ttft": 2000, "itl": 50},
            "gpu": {"type": "h200_sxm"}, "autoApply": auto_apply}
    if name:
        spec["deploymentOverrides"] = {"name": name, "namespace": "serving", "labels": {"team": "llm"}}
    return spec


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    fake = FakeKube()
    fake.start()
    fake.kubeconfig = fake.write_kubeconfig(tmp_path_factory.mktemp("kube") / "kubeconfig")
    yield fake
    fake.stop()


def _store(sessions, spec: dict, name: str) -> str:
    from infra.db import session_scope
    from infra.resources import ResourceCreate, create_resource
    from workers import lifecycle

    with session_scope(sessions) as session:
        return create_resource(session, ResourceCreate(
            group="nvidia.com", version="v1alpha1", kind="DynamoGraphDeploymentRequest",
            plural="dynamographdeploymentrequests", namespace="default", name=name, spec=spec,
            status=lifecycle.dgdr_pending(1, datetime.now(UTC)))).uid


def _connector(fake):
    from infra.kube import connect

    cluster = connect(kubeconfig=str(fake.kubeconfig))
    return lambda: cluster


def test_auto_apply_deploys_then_follows_the_dgd(fake, sessions):
    from workers.deploy import track_dgdr
    from workers.tasks import process_dgdr

    connect = _connector(fake)
    uid = _store(sessions, _spec(True, "qwen-auto"), "auto")
    assert stored_status(sessions, uid)["state"] == "Pending"
    assert process_dgdr(sessions, uid, cluster=connect) == "deploying"
    status = stored_status(sessions, uid)
    assert status["state"] == "Deploying"
    assert status["deployment"] == {"name": "qwen-auto", "namespace": "serving", "state": "pending", "created": True}
    dgd = fake.get(DGD_V1, DGD, "serving", "qwen-auto")
    labels = dgd["metadata"]["labels"]
    assert labels["dgdr.nvidia.com/name"] == "auto" and labels["dgdr.nvidia.com/namespace"] == "default"
    assert labels["nvidia.com/managed-by"] == "slaplan" and labels["team"] == "llm"
    assert "ownerReferences" not in dgd["metadata"]
    assert track_dgdr(sessions, uid, connect) == "deploying"
    assert stored_status(sessions, uid)["state"] == "Deploying"

    fake.set_status(DGD_V1, DGD, "serving", "qwen-auto", {"state": "successful"})
    assert track_dgdr(sessions, uid, connect) == "ready"
    status = stored_status(sessions, uid)
    assert status["state"] == "Ready" and status["deployment"]["state"] == "successful"
    ready = {c["type"]: c for c in status["conditions"]}["DeploymentReady"]
    assert ready["status"] == "True"
    version = status  # a check that sees nothing new writes nothing
    assert track_dgdr(sessions, uid, connect) == "ready" and stored_status(sessions, uid) == version

    fake.remove(DGD_V1, DGD, "serving", "qwen-auto")
    assert track_dgdr(sessions, uid, connect) == "deleted"
    status = stored_status(sessions, uid)
    assert status["state"] == "DeploymentDeleted" and status["deployment"]["created"] is True
    assert track_dgdr(sessions, uid, connect) == "untracked"
    assert fake.get(DGD_V1, DGD, "serving", "qwen-auto") is None  # never recreated


def test_without_auto_apply_nothing_is_applied(fake, sessions):
    from workers.deploy import track_dgdr
    from workers.tasks import process_dgdr

    connect = _connector(fake)
    calls = len(fake.requests)
    uid = _store(sessions, _spec(False, "qwen-manual"), "manual")
    assert process_dgdr(sessions, uid, cluster=connect) == "ready"
    assert track_dgdr(sessions, uid, connect) == "untracked"
    assert fake.get(DGD_V1, DGD, "serving", "qwen-manual") is None
    assert len(fake.requests) == calls  # the cluster was not even asked
    assert "deployment" not in stored_status(sessions, uid)


def test_dgd_follows_the_version_the_cluster_serves_and_missing_operator_fails(sessions, tmp_path):
    from infra.kube import connect as kube_connect
    from workers.tasks import process_dgdr

    fake = FakeKube(served=[("nvidia.com", "v1beta1", DGD), ("kubeai.org", "v1", "Model")])
    fake.start()
    try:
        cluster = kube_connect(kubeconfig=str(fake.write_kubeconfig(tmp_path / "kc")))
        uid = _store(sessions, _spec(True, "qwen-beta"), "beta")
        assert process_dgdr(sessions, uid, cluster=lambda: cluster) == "deploying"
        assert fake.get("nvidia.com/v1beta1", DGD, "serving", "qwen-beta")["apiVersion"] == "nvidia.com/v1beta1"
        assert stored_status(sessions, uid)["generatedDeployment"]["apiVersion"] == "nvidia.com/v1beta1"
        fake.served.pop(("nvidia.com", "v1beta1"))
        cluster = kube_connect(kubeconfig=str(tmp_path / "kc"))
        uid = _store(sessions, _spec(True, "qwen-none"), "none")
        assert process_dgdr(sessions, uid, cluster=lambda: cluster) == "failed"
        status = stored_status(sessions, uid)
        ready = {c["type"]: c for c in status["conditions"]}["DeploymentReady"]
        assert status["state"] == "Failed" and "install the Dynamo operator" in ready["message"]
    finally:
        fake.stop()


# --------------------------------------------------------------------------- the service


def _wait(client, path: str, seen: list[str], want: str, timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        obj = client.get(path).json()
        state = obj.get("status", {}).get("state")
        if state and (not seen or seen[-1] != state):
            seen.append(state)
        if state == want:
            return obj
        time.sleep(0.05)
    raise AssertionError(f"never reached {want}; seen {seen}")


@pytest.fixture
def service(fake, tmp_path):
    from api.app import create_app
    from infra import migrate
    from infra.settings import load_settings
    from workers.celery_app import make_celery
    from workers.embedded import start_embedded_worker, stop_embedded_worker

    settings = load_settings({"SLAPLAN_KUBECONFIG": str(fake.kubeconfig)}, database_url=f"sqlite:///{tmp_path / 's.db'}",
                             api_token="sesame", deploy_check_seconds=0.2)
    migrate.upgrade(settings)
    celery = make_celery(settings)
    app = create_app(settings, celery=celery)
    worker = start_embedded_worker(celery, concurrency=1)
    try:
        with api_client(app) as client:
            yield client
    finally:
        stop_embedded_worker(worker)
        app.state.engine.dispose()


def test_service_auto_apply_end_to_end(service, fake):
    client = service
    name = f"svc-{uuid.uuid4().hex[:6]}"
    body = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeploymentRequest",
            "metadata": {"name": name}, "spec": _spec(True, name)}
    assert client.post(PATH, json=body).status_code == 401  # applying is privileged
    assert fake.get(DGD_V1, DGD, "serving", name) is None
    created = client.post(PATH, json=body, headers={"Authorization": "Bearer sesame"})
    assert created.status_code == 201, created.text
    seen = [created.json()["status"]["state"]]
    _wait(client, f"{PATH}/{name}", seen, "Deploying")
    deadline = time.monotonic() + 20  # Deploying is written first, then the DGD is applied
    while fake.get(DGD_V1, DGD, "serving", name) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake.get(DGD_V1, DGD, "serving", name) is not None
    fake.set_status(DGD_V1, DGD, "serving", name, {"state": "successful"})
    ready = _wait(client, f"{PATH}/{name}", seen, "Ready")
    assert ready["status"]["deployment"]["state"] == "successful"
    fake.remove(DGD_V1, DGD, "serving", name)
    _wait(client, f"{PATH}/{name}", seen, "DeploymentDeleted")
    order = ["Pending", "Profiling", "Deploying", "Ready", "DeploymentDeleted"]
    assert seen == [s for s in order if s in seen] and {"Pending", "Deploying", "Ready"} <= set(seen), seen

    # The manifests of the planned request, for every target.
    url = f"{PATH}/{name}/manifests"
    dynamo = client.get(url).json()
    assert dynamo["kind"] == "List" and dynamo["items"][0]["metadata"]["name"] == name
    for target, kind in (("ome", "InferenceService"), ("kthena", "ModelServing"), ("kubeai", "Model")):
        got = client.get(url, params={"target": target})
        assert got.status_code == 200, got.text
        assert got.json()["items"][0]["kind"] == kind
    beta = client.get(url, params={"dynamoVersion": "v1beta1"}).json()["items"][0]
    assert beta["apiVersion"] == "nvidia.com/v1beta1"
    as_yaml = client.get(url, params={"target": "ome"}, headers={"Accept": "application/yaml"})
    assert as_yaml.headers["content-type"].startswith("application/yaml") and "kind: InferenceService" in as_yaml.text
    assert client.get(url, params={"target": "nope"}).status_code == 400
    missing = client.get(f"{PATH}/absent/manifests")
    assert missing.status_code == 404 and missing.json()["kind"] == "Status"


def test_manifests_of_an_unplanned_request_are_a_conflict(service):
    from infra.db import session_scope
    from infra.resources import ResourceCreate, create_resource
    from workers import lifecycle

    client = service
    sessions = client.app.state.sessions
    with session_scope(sessions) as session:  # stored, never enqueued: stays Pending
        create_resource(session, ResourceCreate(
            group="nvidia.com", version="v1alpha1", kind="DynamoGraphDeploymentRequest",
            plural="dynamographdeploymentrequests", namespace="default", name="waiting", spec=_spec(False),
            status=lifecycle.dgdr_pending(1, datetime.now(UTC))))
    got = client.get(f"{PATH}/waiting/manifests")
    assert got.status_code == 409 and "not planned yet" in got.json()["message"]
