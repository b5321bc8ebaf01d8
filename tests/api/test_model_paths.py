"""Model names from the network never reach the server's files: over the API (and the dashboard's
form) and in the worker that plans stored requests, a path is only a name, refused as any unknown
name is, unless it lies under a directory the operator allows (``SLAPLAN_MODEL_DIRS``); the
command line still reads local config files; and no config file is read whole when it is large."""

from __future__ import annotations

import json
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

import pytest

from api.app import create_app
from api_client import api_client, submit_form
from infra import migrate
from infra.db import session_scope
from infra.resources import ResourceCreate, create_resource, get_resource_by_uid
from infra.settings import load_settings
from profiler import hub
from profiler.model.errors import ModelError
from workers import lifecycle, tasks

DGDRS = "/apis/nvidia.com/v1alpha1/namespaces/default/dynamographdeploymentrequests"
# A small Llama in the Hugging Face key style (Llama-3.1-8B's shape).
LLAMA_CONFIG = {
    "model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 14336, "vocab_size": 128256,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


def _spec(model: str) -> dict:
    return {"modelName": model, "backend": "vllm", "sla": {"ttft": 2000, "itl": 50, "isl": 2000, "osl": 300},
            "gpu": {"type": "h100_sxm"}}


def _dgdr(name: str, model: str) -> dict:
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeploymentRequest",
            "metadata": {"name": name}, "spec": _spec(model)}


def _model_dir(parent: Path, name: str) -> Path:
    folder = parent / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(LLAMA_CONFIG))
    return folder


@pytest.fixture
def service(tmp_path):
    """(client, app, allowed models directory): the API on a fresh SQLite database, local models
    allowed under ``tmp_path/models`` only."""
    models = tmp_path / "models"
    models.mkdir()
    settings = load_settings({}, database_url=f"sqlite:///{tmp_path / 'api.db'}", model_dirs=(str(models),))
    migrate.upgrade(settings)
    app = create_app(settings)
    app.state.enqueue = lambda kind, uid: None  # planned by the test, in process
    yield api_client(app), app, models
    app.state.engine.dispose()


def _refusal(client, name: str, model: str) -> tuple[str, str]:
    """(field, message with the model name replaced by NAME) of the refused create."""
    r = client.post(DGDRS, json=_dgdr(name, model))
    assert r.status_code == 422, r.text
    [cause] = r.json()["details"]["causes"]
    return cause["field"], cause["message"].replace(repr(model), "NAME")


def test_server_paths_are_refused_as_any_unknown_name(service, tmp_path):
    client, _app, _models = service
    outside = _model_dir(tmp_path / "elsewhere", "llama")  # a valid model, but not where models are allowed
    (tmp_path / "huge.json").write_bytes(b"{}" + b" " * 1000)
    unknown = _refusal(client, "unknown", "no-such-model")
    assert unknown[0] == "spec.modelName"
    assert "NAME is not a catalog model, an allowed model directory or a Hugging Face id" in unknown[1]
    for i, path in enumerate(["/etc/shadow", "/etc/passwd", "/root", "/nonexistent/dir", str(outside),
                              str(outside / "config.json"), str(tmp_path / "huge.json"), str(tmp_path / "models/../elsewhere/llama")]):
        assert _refusal(client, f"path-{i}", path) == unknown, path


def test_with_no_model_directories_allowed_the_message_names_none():
    with pytest.raises(ModelError) as err:
        hub.check_model_name("/etc/shadow", local_roots=())
    assert err.value.message.startswith("'/etc/shadow' is not a catalog model or a Hugging Face id (org/name)")


def test_the_dashboard_form_refuses_server_paths_alike(service):
    client, _app, _models = service
    answers = []
    for model in ("/etc/shadow", "no-such-model"):
        doc = submit_form(client, json.dumps(_dgdr("form", model))).json()
        assert doc["accepted"] is False and doc["code"] == 422
        [cause] = doc["causes"]
        answers.append((cause["field"], cause["message"].replace(repr(model), "NAME")))
    assert answers[0] == answers[1] and answers[0][0] == "spec.modelName"


def test_an_allowed_model_directory_is_planned(service):
    client, app, models = service
    folder = _model_dir(models, "my-llama")
    created = client.post(DGDRS, json=_dgdr("local", str(folder)))
    assert created.status_code == 201, created.text
    uid = created.json()["metadata"]["uid"]
    assert tasks.process_dgdr(app.state.sessions, uid, model_dirs=app.state.settings.model_dirs) == "ready"


def _store(sessions, name: str, model: str) -> str:
    """A DGDR stored directly (as one stored before the API checked names, or by another writer)."""
    with session_scope(sessions) as session:
        return create_resource(session, ResourceCreate(
            group="nvidia.com", version="v1alpha1", kind="DynamoGraphDeploymentRequest",
            plural="dynamographdeploymentrequests", namespace="default", name=name, spec=_spec(model),
            status=lifecycle.dgdr_pending(1, datetime.now(UTC)),
        )).uid


def _failure(sessions, uid: str, model: str) -> str:
    """The stored error of a DGDR the worker failed, with its model name replaced by NAME."""
    assert tasks.process_dgdr(sessions, uid) == "failed"
    with session_scope(sessions) as session:
        status = get_resource_by_uid(session, uid).status
    assert status["state"] == "Failed"
    message = next(c["message"] for c in status["conditions"] if c["status"] == "False" and "spec.modelName" in c["message"])
    return message.replace(repr(model), "NAME").replace(model, "NAME")


def test_the_worker_never_reads_a_stored_path(service, tmp_path, monkeypatch):
    _client, app, _models = service
    sessions = app.state.sessions
    # "org/llama" is a Hub id and, from this working directory, also a directory with a config.json.
    _model_dir(tmp_path / "org", "llama")
    monkeypatch.chdir(tmp_path)
    hub_like = _failure(sessions, _store(sessions, "relative", "org/llama"), "org/llama")
    assert "is not in the catalog and could not be fetched" in hub_like
    assert hub_like == _failure(sessions, _store(sessions, "absent", "no-org/no-llama"), "no-org/no-llama")
    absolute = _failure(sessions, _store(sessions, "shadow", "/etc/shadow"), "/etc/shadow")
    assert absolute == _failure(sessions, _store(sessions, "unknown", "no-such-model"), "no-such-model")
    assert "valid JSON" not in absolute and "config.json" not in absolute


def test_a_link_out_of_an_allowed_directory_is_not_followed(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    outside = _model_dir(tmp_path / "elsewhere", "llama")
    (models / "link").symlink_to(outside)
    with pytest.raises(ModelError, match="holds no config.json"):
        hub.load_model(str(models / "link"), local_roots=[models])
    assert hub.load_model(str(outside))[0].num_layers == 32  # the command line reads any path


def test_a_large_file_is_refused_without_being_read_whole(tmp_path):
    big = tmp_path / "config.json"
    with big.open("wb") as file:
        file.truncate(1 << 30)  # 1 GiB, sparse: no disk used
    tracemalloc.start()
    try:
        with pytest.raises(ModelError, match=f"larger than {hub.MAX_CONFIG_BYTES} bytes"):
            hub.load_model(str(tmp_path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * hub.MAX_CONFIG_BYTES + (1 << 20), peak  # the bounded read, not the gigabyte


def test_the_command_line_plans_a_local_config(tmp_path, capsys):
    from api.cli import main

    folder = _model_dir(tmp_path, "my-llama")
    request = tmp_path / "request.yaml"
    request.write_text(json.dumps(_dgdr("cli", str(folder))))
    assert main(["plan", str(request), "--out", str(tmp_path / "out")]) == 0
    assert "chosen:" in capsys.readouterr().out
