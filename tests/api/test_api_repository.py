"""The resource repository: domain objects out, optimistic concurrency, generations."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text, update

from infra import resources as repo
from infra.db import session_scope
from infra.tables import ResourceRow


def _new(name="x", **kw):
    return repo.ResourceCreate(
        group="ome.io", version="v1beta1", kind="BenchmarkJob", plural="benchmarkjobs",
        namespace="default", name=name, spec={"task": "text-to-text"}, **kw,
    )


def test_create_returns_a_frozen_domain_object(sessions):
    with session_scope(sessions) as s:
        created = repo.create_resource(s, _new(labels={"a": "b"}))
    assert isinstance(created, repo.Resource) and created.generation == 1 and created.uid
    with pytest.raises(Exception):
        created.name = "y"  # frozen
    with session_scope(sessions) as s:
        with pytest.raises(repo.AlreadyExists):
            repo.create_resource(s, _new())


def test_stale_writes_conflict_and_spec_changes_bump_generation(sessions):
    with session_scope(sessions) as s:
        created = repo.create_resource(s, _new())
    with session_scope(sessions) as s:
        first = repo.update_status(s, {"state": "Running"}, uid=created.uid, expected_version=created.resource_version)
    assert first.resource_version > created.resource_version and first.generation == 1
    with session_scope(sessions) as s:
        with pytest.raises(repo.Conflict):
            repo.update_status(s, {"state": "Failed"}, uid=created.uid, expected_version=created.resource_version)
    with session_scope(sessions) as s:
        changed = repo.update_spec(s, created.key, {"task": "image-to-text"})
        same = repo.update_spec(s, created.key, {"task": "image-to-text"})
    assert changed.generation == 2 and same.generation == 2
    with session_scope(sessions) as s:
        assert repo.get_resource(s, created.key).status == {"state": "Running"}
        repo.delete_resource(s, created.key)
    with session_scope(sessions) as s:
        assert repo.get_resource(s, created.key) is None
        with pytest.raises(repo.NotFound):
            repo.delete_resource(s, created.key)


def test_the_stored_text_is_the_object_after_every_write(sessions):
    with session_scope(sessions) as s:
        created = repo.create_resource(s, _new(labels={"a": "b"}))
    with session_scope(sessions) as s:
        assert json.loads(repo.get_stored(s, created.key).text) == repo.to_object(created)
        updated = repo.update_status(s, {"state": "Running"}, uid=created.uid)
    with session_scope(sessions) as s:
        stored = repo.get_stored(s, created.key)
        assert json.loads(stored.text) == repo.to_object(updated) == repo.to_object(repo.get_resource(s, created.key))
        assert (stored.namespace, stored.name, stored.version) == ("default", "x", "v1beta1")
        page = repo.list_page(s, "ome.io", "benchmarkjobs", "default", limit=10)
    assert page.items == [stored]


def test_a_row_stored_before_the_text_was_kept_is_rendered_on_read(sessions):
    with session_scope(sessions) as s:
        created = repo.create_resource(s, _new())
        s.execute(update(ResourceRow).values(object_json=None))
    with session_scope(sessions) as s:
        assert json.loads(repo.get_stored(s, created.key).text) == repo.to_object(created)
        assert [json.loads(i.text) for i in repo.list_page(s, "ome.io", "benchmarkjobs", limit=10).items] == [
            repo.to_object(created)]


def _history(sessions):
    from infra import events

    with session_scope(sessions) as s:
        return events.changes(s, "ome.io", "benchmarkjobs", None, after=0, upto=events.latest_version(s), limit=10_000)


@pytest.mark.parametrize("store", ["sessions", "pg_sessions"])
def test_concurrent_writes_each_get_a_version_and_one_change(store, request):
    import threading

    sessions = request.getfixturevalue(store)
    with session_scope(sessions) as s:
        created = repo.create_resource(s, _new())

    def writer(i: int) -> None:
        for j in range(10):
            with session_scope(sessions) as s:
                repo.update_status(s, {"state": f"{i}-{j}"}, uid=created.uid)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    history = _history(sessions)
    versions = [c.version for c in history]
    assert len(history) == 41 and versions == sorted(set(versions)) and history[0].type == "ADDED"
    assert all(c.object["metadata"]["resourceVersion"] == str(c.version) for c in history)
    with session_scope(sessions) as s:
        stored = json.loads(repo.get_stored(s, created.key).text)
    assert stored == history[-1].object and stored["status"] == {"state": stored["status"]["state"]}


def test_a_writer_building_its_object_does_not_hold_up_other_writers(pg_sessions, monkeypatch):
    """The version counter is taken inside the write's one statement: a writer still working on
    its object (here stopped in the middle of it) holds no lock another writer waits for."""
    import threading

    with session_scope(pg_sessions) as s:
        slow, other = repo.create_resource(s, _new("slow")), repo.create_resource(s, _new("other"))
    building, release = threading.Event(), threading.Event()
    real = repo._json_text

    def stopped_for_slow(obj):
        if obj["metadata"]["name"] == "slow":
            building.set()
            release.wait()
        return real(obj)

    monkeypatch.setattr(repo, "_json_text", stopped_for_slow)
    done = []

    def slow_write():
        with session_scope(pg_sessions) as s:
            done.append(repo.update_status(s, {"state": "Running"}, uid=slow.uid))

    thread = threading.Thread(target=slow_write)
    thread.start()
    try:
        assert building.wait(60)
        with session_scope(pg_sessions) as s:
            s.execute(text("SET LOCAL lock_timeout = '30s'"))  # a lock held by the stopped writer fails this
            moved = repo.update_status(s, {"state": "Running"}, uid=other.uid)
    finally:
        release.set()
        thread.join()
    assert moved.resource_version < done[0].resource_version
    assert [c.object["metadata"]["name"] for c in _history(pg_sessions)][-2:] == ["other", "slow"]
