"""Watches (``?watch=true``) with the official ``kubernetes`` client against a running
``slaplan serve``: embedded (SQLite, one process) and scaled out (PostgreSQL, Redis, a separate
``slaplan worker`` whose changes must reach the API's watchers)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch
from kubernetes.client.rest import ApiException

from infra import events
from infra.db import make_engine, make_session_factory, session_scope
from infra.settings import load_settings
from procs import start_serve, stop

pytestmark = pytest.mark.slow

GROUP, PLURAL = "nvidia.com", "dynamographdeploymentrequests"


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("watch")
    url, procs = start_serve(workdir, {})
    yield url, f"sqlite:///{workdir / 'slaplan' / 'slaplan.db'}"
    for proc in procs:
        stop(proc)


def _api(url: str) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(k8s.ApiClient(k8s.Configuration(host=url)))


def _dgdr(name: str, labels: dict | None = None, version: str = "v1alpha1") -> dict:
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "DynamoGraphDeploymentRequest",
        "metadata": {"name": name, **({"labels": labels} if labels else {})},
        "spec": {"modelName": "Qwen/Qwen3-32B", "backend": "vllm", "sla": {"ttft": 500, "itl": 20}, "gpu": {"type": "h200_sxm"}},
    }


def _list_version(api, namespace: str) -> str:
    return api.list_namespaced_custom_object(GROUP, "v1alpha1", namespace, PLURAL)["metadata"]["resourceVersion"]


def _follow_to_ready_and_delete(api, namespace: str) -> list[tuple[str, str | None, int]]:
    """Create a DGDR and watch it from the list version: ADDED, MODIFIED… Ready, then deleted."""
    start = _list_version(api, namespace)
    created = api.create_namespaced_custom_object(GROUP, "v1alpha1", namespace, PLURAL, _dgdr("followed"))
    seen: list[tuple[str, str | None, int]] = []
    w = k8s_watch.Watch()
    for event in w.stream(api.list_namespaced_custom_object, GROUP, "v1alpha1", namespace, PLURAL,
                          resource_version=start, timeout_seconds=120):
        obj = event["object"]
        assert obj["metadata"]["uid"] == created["metadata"]["uid"]
        state = (obj.get("status") or {}).get("state")
        seen.append((event["type"], state, int(obj["metadata"]["resourceVersion"])))
        if event["type"] == "MODIFIED" and state == "Ready":
            api.delete_namespaced_custom_object(GROUP, "v1alpha1", namespace, PLURAL, "followed")
        if event["type"] == "DELETED":
            w.stop()
    return seen


def _check_followed(seen: list[tuple[str, str | None, int]]) -> None:
    types = [t for t, _, _ in seen]
    states = [s for _, s, _ in seen]
    assert types[0] == "ADDED" and states[0] == "Pending", seen
    assert types[-1] == "DELETED", seen
    assert set(types[1:-1]) == {"MODIFIED"} and "Profiling" in states and states[-2] == "Ready", seen
    versions = [v for _, _, v in seen]
    assert versions == sorted(set(versions)) and versions[0] > 0, "resource versions grow with every event"


def test_watch_follows_a_dgdr_from_added_to_ready_to_deleted(embedded):
    _check_followed(_follow_to_ready_and_delete(_api(embedded[0]), "follow"))


def test_watch_without_version_starts_with_the_current_objects_and_honours_the_selector(embedded):
    api = _api(embedded[0])
    for name, team in (("alpha", "a"), ("beta", "b")):
        api.create_namespaced_custom_object(GROUP, "v1alpha1", "select", PLURAL, _dgdr(name, {"team": team}))
    stream = k8s_watch.Watch().stream(api.list_namespaced_custom_object, GROUP, "v1alpha1", "select", PLURAL,
                                      label_selector="team=a", timeout_seconds=1)
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in stream]
    assert seen[0] == ("ADDED", "alpha") and {name for _, name in seen} == {"alpha"}, seen
    assert all(kind == "MODIFIED" for kind, _ in seen[1:]), seen  # alpha's own progress (Profiling, Ready)

    start = _list_version(api, "select")
    patch = lambda name, team: api.patch_namespaced_custom_object(  # noqa: E731
        GROUP, "v1alpha1", "select", PLURAL, name, {"metadata": {"labels": {"team": team}}})
    patch("alpha", "c")  # leaves the selection
    patch("beta", "a")  # enters it
    stream = k8s_watch.Watch().stream(api.list_namespaced_custom_object, GROUP, "v1alpha1", "select", PLURAL,
                                      label_selector="team=a", resource_version=start, timeout_seconds=2)
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in stream
            if e["type"] != "MODIFIED"]  # beta's own lifecycle (Profiling, Ready) may follow
    assert seen[:2] == [("DELETED", "alpha"), ("ADDED", "beta")], seen


def test_all_namespaces_watch_with_watch_1_and_a_bookmark_before_the_timeout(embedded):
    url = embedded[0]
    api = _api(url)
    start = api.list_cluster_custom_object(GROUP, "v1alpha1", PLURAL)["metadata"]["resourceVersion"]
    for ns in ("east", "west"):
        api.create_namespaced_custom_object(GROUP, "v1alpha1", ns, PLURAL, _dgdr("everywhere"))
    lines = []
    with httpx.stream("GET", f"{url}/apis/{GROUP}/v1alpha1/{PLURAL}",
                      params={"watch": "1", "resourceVersion": start, "timeoutSeconds": "2", "allowWatchBookmarks": "true"},
                      timeout=30) as response:
        assert response.status_code == 200
        lines = [json.loads(line) for line in response.iter_lines() if line]
    added = {(e["object"]["metadata"]["namespace"], e["object"]["metadata"]["name"]) for e in lines if e["type"] == "ADDED"}
    assert {("east", "everywhere"), ("west", "everywhere")} <= added
    last = lines[-1]
    assert last["type"] == "BOOKMARK" and last["object"]["kind"] == "DynamoGraphDeploymentRequest"
    others = [int(e["object"]["metadata"]["resourceVersion"]) for e in lines[:-1]]
    assert int(last["object"]["metadata"]["resourceVersion"]) >= max(others)


def test_a_version_older_than_the_history_is_gone(embedded):
    url, db = embedded
    api = _api(url)
    old = _list_version(api, "expire")
    api.create_namespaced_custom_object(GROUP, "v1alpha1", "expire", PLURAL, _dgdr("soon-forgotten"))
    engine = make_engine(load_settings({}, database_url=db))
    try:
        with session_scope(make_session_factory(engine)) as session:
            assert events.compact(session, datetime.now(UTC) + timedelta(seconds=1)) > 0
    finally:
        engine.dispose()
    with pytest.raises(ApiException) as info:
        list(k8s_watch.Watch().stream(api.list_namespaced_custom_object, GROUP, "v1alpha1", "expire", PLURAL,
                                      resource_version=old, timeout_seconds=1))
    assert info.value.status == 410 and "Expired" in info.value.reason
    fresh = _list_version(api, "expire")  # relisting gives a version to watch from again
    again = k8s_watch.Watch().stream(api.list_namespaced_custom_object, GROUP, "v1alpha1", "expire", PLURAL,
                                     resource_version=fresh, timeout_seconds=1)
    assert all(int(e["object"]["metadata"]["resourceVersion"]) > int(fresh) for e in again)


def test_a_bad_resource_version_is_a_bad_request(embedded):
    response = httpx.get(f"{embedded[0]}/apis/{GROUP}/v1alpha1/{PLURAL}", params={"watch": "true", "resourceVersion": "yesterday"})
    assert response.status_code == 400 and "resourceVersion" in response.json()["message"]


def test_changes_by_a_separate_worker_reach_the_watch(pg_url, redis_url, tmp_path):
    broker = redis_url.rsplit("/", 1)[0] + "/13"  # a database of its own: no other test's worker takes these tasks
    url, procs = start_serve(tmp_path, {"SLAPLAN_DATABASE_URL": pg_url, "SLAPLAN_BROKER_URL": broker}, worker=True)
    try:
        _check_followed(_follow_to_ready_and_delete(_api(url), "scaled"))
    finally:
        for proc in reversed(procs):
            stop(proc)


def test_benchmarkjobs_are_watched_too(embedded):
    api = _api(embedded[0])
    job = {
        "apiVersion": "ome.io/v1beta1", "kind": "BenchmarkJob", "metadata": {"name": "watched-job"},
        "spec": {"endpoint": {"inferenceService": {"name": "llm", "namespace": "serving"}}, "task": "text-to-text",
                 "maxTimePerIteration": 1, "maxRequestsPerIteration": 10,
                 "outputLocation": {"storageUri": "s3://bucket/results"}},
    }
    start = api.list_namespaced_custom_object("ome.io", "v1beta1", "jobs", "benchmarkjobs")["metadata"]["resourceVersion"]
    api.create_namespaced_custom_object("ome.io", "v1beta1", "jobs", "benchmarkjobs", job)
    seen = []
    w = k8s_watch.Watch()
    for event in w.stream(api.list_namespaced_custom_object, "ome.io", "v1beta1", "jobs", "benchmarkjobs",
                          resource_version=start, timeout_seconds=60):
        state = (event["object"].get("status") or {}).get("state")
        seen.append((event["type"], state))
        if state in ("Completed", "Failed") and event["type"] == "MODIFIED":
            api.delete_namespaced_custom_object("ome.io", "v1beta1", "jobs", "benchmarkjobs", "watched-job")
        if event["type"] == "DELETED":
            w.stop()
    # the embedded worker cannot resolve an InferenceService without a cluster: the job fails
    assert seen[0] == ("ADDED", "Pending") and ("MODIFIED", "Failed") in seen and seen[-1][0] == "DELETED", seen


def test_field_selector_picks_one_object_in_lists_and_watches(embedded):
    api = _api(embedded[0])
    for name in ("one", "two"):
        api.create_namespaced_custom_object(GROUP, "v1alpha1", "fields", PLURAL, _dgdr(name))
    listed = api.list_namespaced_custom_object(GROUP, "v1alpha1", "fields", PLURAL, field_selector="metadata.name=one")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["one"]
    others = api.list_cluster_custom_object(GROUP, "v1alpha1", PLURAL, field_selector="metadata.namespace!=fields")
    assert all(i["metadata"]["namespace"] != "fields" for i in others["items"])
    stream = k8s_watch.Watch().stream(api.list_namespaced_custom_object, GROUP, "v1alpha1", "fields", PLURAL,
                                      field_selector="metadata.name==two", timeout_seconds=1)
    assert {e["object"]["metadata"]["name"] for e in stream} == {"two"}
    bad = httpx.get(f"{embedded[0]}/apis/{GROUP}/v1alpha1/{PLURAL}", params={"fieldSelector": "spec.backend=vllm"})
    assert bad.status_code == 400 and "spec.backend" in bad.json()["message"]


def test_streaming_list_ends_its_initial_events_with_a_bookmark(embedded):
    """sendInitialEvents=true (what client-go's streaming lists send): the current objects, a
    BOOKMARK annotated k8s.io/initial-events-end, then changes; =false starts from now."""
    url = embedded[0]
    api = _api(url)
    api.create_namespaced_custom_object(GROUP, "v1alpha1", "stream", PLURAL, _dgdr("present"))
    path = f"{url}/apis/{GROUP}/v1alpha1/namespaces/stream/{PLURAL}"
    params = {"watch": "true", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
              "allowWatchBookmarks": "true", "timeoutSeconds": "1"}
    with httpx.stream("GET", path, params=params, timeout=30) as response:
        lines = [json.loads(line) for line in response.iter_lines() if line]
    assert (lines[0]["type"], lines[0]["object"]["metadata"]["name"]) == ("ADDED", "present")
    end = next(i for i, e in enumerate(lines) if e["type"] == "BOOKMARK")
    assert lines[end]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert all(e["type"] == "ADDED" for e in lines[:end])

    with httpx.stream("GET", path, params={"watch": "true", "sendInitialEvents": "false", "timeoutSeconds": "1"},
                      timeout=30) as response:
        later = [json.loads(line) for line in response.iter_lines() if line]
    assert all(e["type"] != "ADDED" for e in later)  # nothing old replayed
