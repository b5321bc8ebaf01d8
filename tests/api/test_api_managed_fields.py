"""Field ownership of server-side apply (``metadata.managedFields``): who set which field, conflicts
between managers and ``force``, removal of fields a manager stops applying — over HTTP, as kubectl
and the kubernetes client send it, and the rules themselves."""

from __future__ import annotations

import pytest
import yaml

from api import managed_fields as mf

GROUP, VERSION = "nvidia.com", "v1alpha1"
PATH = f"/apis/{GROUP}/{VERSION}/namespaces/default/dynamographdeploymentrequests"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
MERGE = {"Content-Type": "application/merge-patch+json"}


def dgdr(name: str, *, labels: dict | None = None, **spec) -> dict:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DynamoGraphDeploymentRequest",
            "metadata": {"name": name, **({"labels": labels} if labels else {})},
            "spec": {"modelName": "Qwen/Qwen3-32B", "backend": "vllm", "sla": {"ttft": 500, "itl": 20},
                     "gpu": {"type": "h200_sxm"}, "autoApply": False, **spec}}
    return body


@pytest.fixture
def client(tmp_path):
    from api_client import api_client

    from api.app import create_app
    from infra import migrate
    from infra.settings import load_settings

    settings = load_settings({}, database_url=f"sqlite:///{tmp_path / 'mf.db'}")
    migrate.upgrade(settings)
    app = create_app(settings)
    app.state.enqueue = lambda _kind, _uid: None  # no worker: specs stay editable (Pending)
    yield api_client(app)
    app.state.engine.dispose()


def apply(client, body: dict, manager: str, **params):
    return client.patch(f"{PATH}/{body['metadata']['name']}", content=yaml.safe_dump(body), headers=APPLY,
                        params={"fieldManager": manager, **params})


def owners(obj: dict) -> dict[tuple[str, str], frozenset]:
    """(manager, operation) → the fields it owns, as dotted paths."""
    return {(e["manager"], e["operation"]): frozenset(".".join(p) for p in mf.from_fields_v1(e["fieldsV1"]))
            for e in obj["metadata"].get("managedFields", [])}


def test_create_records_the_manager_from_the_query_or_the_user_agent(client):
    made = client.post(PATH, json=dgdr("a", labels={"team": "x"}), params={"fieldManager": "ci"}).json()
    assert owners(made) == {("ci", "Update"): {
        "metadata.labels.team", "spec.modelName", "spec.backend", "spec.sla.ttft", "spec.sla.itl", "spec.gpu.type",
        "spec.autoApply"}}
    entry = made["metadata"]["managedFields"][0]
    assert (entry["apiVersion"], entry["fieldsType"]) == (f"{GROUP}/{VERSION}", "FieldsV1")
    assert entry["fieldsV1"]["f:spec"]["f:sla"] == {"f:itl": {}, "f:ttft": {}}
    by_agent = client.post(PATH, json=dgdr("b"), headers={"User-Agent": "OpenAPI-Generator/37.0.1/python"}).json()
    assert [e["manager"] for e in by_agent["metadata"]["managedFields"]] == ["OpenAPI-Generator"]


def test_an_update_moves_the_fields_it_changes_to_its_manager(client):
    client.post(PATH, json=dgdr("moved"), params={"fieldManager": "creator"})
    patched = client.patch(f"{PATH}/moved", json={"spec": {"sla": {"ttft": 300}}}, headers=MERGE,
                           params={"fieldManager": "tuner"}).json()
    got = owners(patched)
    assert got[("tuner", "Update")] == {"spec.sla.ttft"}
    assert "spec.sla.ttft" not in got[("creator", "Update")] and "spec.sla.itl" in got[("creator", "Update")]
    # the same value again changes nothing: ownership stays where it is
    again = client.patch(f"{PATH}/moved", json={"spec": {"sla": {"itl": 20}}}, headers=MERGE,
                         params={"fieldManager": "tuner"}).json()
    assert owners(again) == got


def test_apply_conflicts_with_another_managers_field_and_force_takes_it(client):
    assert apply(client, dgdr("shared"), "kubectl").status_code == 201
    client.patch(f"{PATH}/shared", json={"spec": {"sla": {"ttft": 300}}}, headers=MERGE, params={"fieldManager": "tuner"})
    refused = apply(client, dgdr("shared"), "kubectl")  # would set ttft back to 500
    assert refused.status_code == 409
    status = refused.json()
    assert (status["reason"], status["code"]) == ("Conflict", 409)
    assert status["message"] == (f'Apply failed with 1 conflict: conflict with "tuner" using {GROUP}/{VERSION}: '
                                 ".spec.sla.ttft")
    assert status["details"]["causes"] == [{"reason": "FieldManagerConflict", "field": ".spec.sla.ttft",
                                            "message": f'conflict with "tuner" using {GROUP}/{VERSION}'}]
    assert client.get(f"{PATH}/shared").json()["spec"]["sla"]["ttft"] == 300  # nothing changed
    forced = apply(client, dgdr("shared"), "kubectl", force="true")
    assert forced.status_code == 200 and forced.json()["spec"]["sla"]["ttft"] == 500
    got = owners(forced.json())
    assert "spec.sla.ttft" in got[("kubectl", "Apply")] and ("tuner", "Update") not in got


def test_applying_a_value_a_field_already_has_shares_it(client):
    apply(client, dgdr("same"), "first")
    second = apply(client, dgdr("same", labels={"by": "second"}), "second")
    assert second.status_code == 200, second.text
    got = owners(second.json())
    assert "spec.sla.ttft" in got[("first", "Apply")] and "spec.sla.ttft" in got[("second", "Apply")]
    assert "metadata.labels.by" in got[("second", "Apply")] - got[("first", "Apply")]


def test_a_field_the_manager_stops_applying_is_removed_unless_another_owns_it(client):
    assert apply(client, dgdr("pruned", labels={"a": "1", "b": "2"}, online=False), "kubectl").status_code == 201
    client.patch(f"{PATH}/pruned", json={"metadata": {"labels": {"b": "3"}}}, headers=MERGE,
                 params={"fieldManager": "other"})
    after = apply(client, dgdr("pruned"), "kubectl").json()  # no labels, no spec.online
    assert "online" not in after["spec"]
    assert after["metadata"]["labels"] == {"b": "3"}  # a: dropped; b: "other" owns it
    assert owners(after)[("kubectl", "Apply")] == {"spec.modelName", "spec.backend", "spec.sla.ttft",
                                                   "spec.sla.itl", "spec.gpu.type", "spec.autoApply"}


def test_write_options_are_checked(client):
    client.post(PATH, json=dgdr("opts"))
    bad_force = client.patch(f"{PATH}/opts", json={}, headers=MERGE, params={"force": "true"})
    assert bad_force.status_code == 422
    assert bad_force.json()["details"]["causes"][0]["field"] == "force"
    long_manager = client.post(PATH, json=dgdr("long"), params={"fieldManager": "m" * 129})
    assert long_manager.status_code == 422
    assert long_manager.json()["details"]["causes"][0]["field"] == "fieldManager"


def test_a_body_that_sets_managed_fields_replaces_or_clears_them(client):
    made = client.post(PATH, json=dgdr("reset"), params={"fieldManager": "ci"}).json()
    # a PUT of the object as read keeps the tracking (its managedFields are the stored ones)
    put = client.put(f"{PATH}/reset", json={**made, "metadata": {**made["metadata"], "labels": {"x": "y"}}},
                     params={"fieldManager": "editor"}).json()
    assert owners(put)[("editor", "Update")] == {"metadata.labels.x"}
    cleared = client.patch(f"{PATH}/reset", json={"metadata": {"managedFields": [{}]}}, headers=MERGE).json()
    assert "managedFields" not in cleared["metadata"]
    wrong = client.patch(f"{PATH}/reset", json={"metadata": {"managedFields": [{"manager": "x"}]}}, headers=MERGE)
    assert wrong.status_code == 422 and wrong.json()["details"]["causes"][0]["field"].startswith("metadata.managedFields")


# --- the rules, without a server ---------------------------------------------------------------------------


def test_fields_v1_round_trips_and_reads_dot_members():
    paths = {("spec", "sla", "ttft"), ("spec", "gpu"), ("metadata", "labels", "a.b/c")}
    assert mf.from_fields_v1(mf.to_fields_v1(paths)) == paths
    # Kubernetes writes "." for an object a manager owns as such, beside its members
    assert mf.from_fields_v1({"f:spec": {".": {}, "f:x": {}}}) == {("spec",), ("spec", "x")}


def test_apply_over_a_field_owned_above_or_below_it_conflicts():
    current = {"spec": {"gpu": {"type": "h100"}}}
    owned = mf.created("other", "Update", "v", current)
    with pytest.raises(mf.ApplyConflict) as info:
        mf.applied(owned, "me", "v", current, {"spec": {"gpu": "h200"}}, force=False)
    assert [p for _m, _v, p in info.value.conflicts] == [("spec", "gpu")]
    entries, obj = mf.applied(owned, "me", "v", current, {"spec": {"gpu": "h200"}}, force=True)
    assert obj["spec"]["gpu"] == "h200" and [(e.manager, e.operation) for e in entries] == [("me", "Apply")]


def test_a_json_patch_is_carried_out_and_its_fields_recorded(client):
    client.post(PATH, json=dgdr("jp"), params={"fieldManager": "ci"})
    version = client.get(f"{PATH}/jp").json()["metadata"]["resourceVersion"]
    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": version},
           {"op": "add", "path": "/metadata/labels", "value": {"example.com/team": "a"}},
           {"op": "replace", "path": "/spec/sla/ttft", "value": 250}]
    patched = client.patch(f"{PATH}/jp", json=ops, headers={"Content-Type": "application/json-patch+json"},
                           params={"fieldManager": "jp"})
    assert patched.status_code == 200, patched.text
    assert patched.json()["spec"]["sla"]["ttft"] == 250 and patched.json()["metadata"]["labels"] == {"example.com/team": "a"}
    assert owners(patched.json())[("jp", "Update")] == {"spec.sla.ttft", "metadata.labels.example.com/team"}
    stale = client.patch(f"{PATH}/jp", json=ops[:1], headers={"Content-Type": "application/json-patch+json"})
    assert stale.status_code == 422 and "test failed" in stale.json()["message"]
    not_a_list = client.patch(f"{PATH}/jp", json={"spec": {}}, headers={"Content-Type": "application/json-patch+json"})
    assert not_a_list.status_code == 400


def test_kubectl_takes_over_only_what_client_side_apply_set():
    import json

    last = {"metadata": {"labels": {"team": "a"}}}
    current = {"metadata": {"labels": {"team": "a"}, "annotations": {mf.LAST_APPLIED: json.dumps(last)}}}
    config = {"metadata": {"labels": {"team": "b"}}}
    by_csa = mf.created(mf.CLIENT_SIDE_KUBECTL, "Update", "v", {"metadata": {"labels": {"team": "a"}}})
    entries, obj = mf.applied(by_csa, mf.SERVER_SIDE_KUBECTL, "v", current, config, force=False)
    assert obj["metadata"]["labels"] == {"team": "b"}
    assert [e.manager for e in entries] == [mf.SERVER_SIDE_KUBECTL]
    with pytest.raises(mf.ApplyConflict):  # another manager applying: a conflict as any other
        mf.applied(by_csa, "helm", "v", current, config, force=False)
    by_label = mf.created("kubectl-label", "Update", "v", {"metadata": {"labels": {"team": "a"}}})
    with pytest.raises(mf.ApplyConflict):  # a field another manager set, even one the annotation names
        mf.applied(by_label, mf.SERVER_SIDE_KUBECTL, "v", current, config, force=False)
