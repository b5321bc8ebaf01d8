"""The resource repository: domain objects out, optimistic concurrency, generations."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import update

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
