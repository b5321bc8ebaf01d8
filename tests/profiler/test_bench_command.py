"""The genai-bench command built from a BenchmarkJob: OME's flags, the gaps it leaves, the grammar."""

from __future__ import annotations

import json

import pytest

from profiler.bench.spec import StorageSpec, parse_benchmarkjob
from profiler.bench.command import (
    DEFAULT_CONCURRENCY,
    DEFAULT_SCENARIOS,
    BenchOptions,
    ScenarioError,
    bare_base_url,
    build_command,
    check_scenarios,
    output_target,
    parse_scenario,
    request_params,
)

SPEC = {
    "endpoint": {"endpoint": {"url": "http://10.0.0.5:8000/v1/", "apiFormat": "openai", "modelName": "org/m"}},
    "task": "text-to-text",
    "trafficScenarios": ["D(100,20)", "N(480,240)/(300,150)"],
    "numConcurrency": [1, 4],
    "maxTimePerIteration": 2,
    "maxRequestsPerIteration": 50,
    "outputLocation": {"storageUri": "pvc://results/run-a"},
}
OPTS = BenchOptions(executable="genai-bench", model_name="org/m", tokenizer="/tok", folder_name="job-a",
                    local_root="/data")


def _spec(**changes):
    spec = json.loads(json.dumps(SPEC))
    spec.update(changes)
    return parse_benchmarkjob({"spec": spec})


def _flag(argv, name):
    return [argv[i + 1] for i, a in enumerate(argv) if a == name]


def test_command_follows_ome_and_fills_its_gaps():
    cmd = build_command(_spec(additionalRequestParams={"temperature": "0.7", "ignore_eos": "true", "stop": "END"}),
                        "http://10.0.0.5:8000/v1/", OPTS)
    argv = list(cmd.argv)
    assert argv[:2] == ["genai-bench", "benchmark"]
    # genai-bench's openai backend drops ignore_eos; its vllm backend speaks the same API and sends it
    assert _flag(argv, "--api-backend") == ["vllm"] and any("ignore_eos" in n for n in cmd.notes)
    plain = build_command(_spec(additionalRequestParams={"temperature": "0.7"}), "http://10.0.0.5:8000/v1/", OPTS)
    assert _flag(list(plain.argv), "--api-backend") == ["openai"]
    assert _flag(argv, "--api-base") == ["http://10.0.0.5:8000"]  # bare: genai-bench appends /v1/chat/completions
    assert _flag(argv, "--api-model-name") == ["org/m"]
    assert _flag(argv, "--model-tokenizer") == ["/tok"]
    assert _flag(argv, "--task") == ["text-to-text"]
    assert _flag(argv, "--max-time-per-run") == ["2"]  # minutes, as genai-bench takes it
    assert _flag(argv, "--max-requests-per-run") == ["50"]
    assert _flag(argv, "--traffic-scenario") == ["D(100,20)", "N(480,240)/(300,150)"]
    assert _flag(argv, "--num-concurrency") == ["1", "4"]
    assert _flag(argv, "--experiment-base-dir") == ["/data/results/run-a"]
    assert _flag(argv, "--experiment-folder-name") == ["job-a"]
    assert _flag(argv, "--api-key")  # required by genai-bench for openai backends
    assert json.loads(_flag(argv, "--additional-request-params")[0]) == {"temperature": 0.7, "ignore_eos": True, "stop": "END"}
    assert cmd.experiment_dir == "/data/results/run-a/job-a"
    assert cmd.iterations == 4
    assert cmd.timeout_s >= 4 * 2 * 60  # maxTimePerIteration × iterations, plus slack
    assert cmd.env == {}
    assert "--upload-results" not in argv


def test_api_key_is_masked_when_shown_and_offline_sets_hub_offline():
    opts = OPTS.model_copy(update={"api_key": "sk-secret", "offline": True})
    cmd = build_command(_spec(), "http://h:1", opts)
    assert "sk-secret" in cmd.argv and "sk-secret" not in cmd.shown()
    assert cmd.env["HF_HUB_OFFLINE"] == "1"


def test_empty_lists_take_omes_defaults_and_say_so():
    cmd = build_command(_spec(trafficScenarios=[], numConcurrency=[]), "http://h:1", OPTS)
    assert cmd.scenarios == DEFAULT_SCENARIOS
    assert cmd.concurrency == DEFAULT_CONCURRENCY == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert any("trafficScenarios" in n for n in cmd.notes) and any("numConcurrency" in n for n in cmd.notes)


def test_service_metadata_and_engine_backend():
    spec = _spec(serviceMetadata={"engine": "vLLM", "version": "0.10.0", "gpuType": "A100", "gpuCount": 2})
    argv = list(build_command(spec, "http://h:1", OPTS).argv)
    assert _flag(argv, "--server-engine") == ["vLLM"]
    assert _flag(argv, "--server-gpu-type") == ["A100-80G"]  # genai-bench's spelling
    assert _flag(argv, "--server-gpu-count") == ["2"]
    assert _flag(argv, "--api-backend") == ["vllm"]  # OpenAI protocol that also sends ignore_eos


@pytest.mark.parametrize("uri,provider,bucket,prefix", [
    ("s3://bkt/a/b", "aws", "bkt", "a/b"),
    ("gs://bkt", "gcp", "bkt", None),
    ("az://container/x", "azure", "container", "x"),
    ("oci://n/ns1/b/bkt/o/runs", "oci", "bkt", "runs"),
])
def test_object_store_locations_upload(uri, provider, bucket, prefix):
    target = output_target(StorageSpec(storage_uri=uri), "/data")
    flags = list(target.upload_flags)
    assert flags[0] == "--upload-results"
    assert _flag(flags, "--storage-provider") == [provider]
    assert _flag(flags, "--storage-bucket") == [bucket]
    assert _flag(flags, "--storage-prefix") == ([prefix] if prefix else [])
    assert target.base_dir.startswith("/data/")
    if uri.startswith("oci://n/"):
        assert _flag(flags, "--namespace") == ["ns1"]


def test_local_locations():
    assert output_target(StorageSpec(storage_uri="file:///srv/out"), "/data").base_dir == "/srv/out"
    assert output_target(StorageSpec(storage_uri="pvc://claim/sub", path="deeper"), "/data").base_dir == "/data/claim/sub/deeper"
    with pytest.raises(ValueError, match=r"\.\."):
        output_target(StorageSpec(storage_uri="pvc://claim/../../etc"), "/data")


def test_dataset_is_passed():
    spec = _spec(dataset={"storageUri": "hf://org/prompts"}, trafficScenarios=["dataset"])
    assert _flag(list(build_command(spec, "http://h:1", OPTS).argv), "--dataset-path") == ["org/prompts"]
    spec = _spec(dataset={"storageUri": "pvc://data/prompts.jsonl"}, trafficScenarios=[])
    cmd = build_command(spec, "http://h:1", OPTS)
    assert _flag(list(cmd.argv), "--dataset-path") == ["/data/data/prompts.jsonl"] and cmd.scenarios == ("dataset",)
    with pytest.raises(ValueError, match="spec.dataset.storageUri"):
        build_command(_spec(dataset={"storageUri": "s3://b/p"}), "http://h:1", OPTS)


@pytest.mark.parametrize("text,kind,numbers", [
    ("D(100,20)", "D", (100, 20)), ("N(480,240)/(300,150)", "N", (480, 240, 300, 150)),
    ("U(50,100)/(10,20)", "U", (50, 100, 10, 20)), ("U(100,20)", "U", (100, 20)), ("E(512)", "E", (512,)),
    ("R(64,100)", "R", (64, 100)), ("I(512,512)", "I", (512, 512)), ("I(512,512,2)", "I", (512, 512, 2)),
    ("A(100)", "A", (100,)), ("dataset", "dataset", ()),
])
def test_grammar_accepts(text, kind, numbers):
    s = parse_scenario(text)
    assert (s.kind, s.numbers) == (kind, numbers)


@pytest.mark.parametrize("text,message", [
    ("D(100, 20)", "spaces"), ("D(100)", "does not match"), ("X(1,2)", "unknown scenario kind"),
    ("D(0,20)", "positive"), ("U(100,50)/(1,2)", "larger than"), ("N(480,240)", "does not match"), ("", "unknown"),
])
def test_grammar_rejects(text, message):
    with pytest.raises(ValueError, match=message):
        parse_scenario(text)


def test_scenario_errors_name_their_field_and_check_the_task():
    with pytest.raises(ScenarioError) as err:
        check_scenarios(("D(100,20)", "E(128)", "D(1,2,3)", "dataset"), "text-to-text", has_dataset=False)
    fields = [f for f, _ in err.value.causes]
    assert fields == ["spec.trafficScenarios[1]", "spec.trafficScenarios[2]", "spec.trafficScenarios[3]"]
    assert "cannot drive task" in err.value.causes[0][1]
    assert check_scenarios(("E(128)",), "text-to-embeddings", has_dataset=False)[0].kind == "E"


def test_helpers():
    assert bare_base_url("http://h:8000/v1/chat/completions") == "http://h:8000"
    assert bare_base_url("https://h/api/") == "https://h/api"
    assert request_params({"n": "3", "s": "text", "o": '{"a": 1}'}) == {"n": 3, "s": "text", "o": {"a": 1}}
