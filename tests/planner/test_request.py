"""Parsing DynamoGraphDeploymentRequests (both API versions) into PlanRequest."""

from __future__ import annotations

import copy
import json

import pytest

from planner.request import MAX_ENGINE_GPUS, RequestError, load_documents, parse_dgdr, parse_documents
from paths import ROOT

SHARED_EXAMPLES = ROOT.parent / "shared" / "examples" / "dynamo"
EXAMPLES = ROOT / "examples"


def _alpha(**spec_overrides) -> dict:
    spec = {
        "modelName": "meta-llama/Llama-3.1-70B-Instruct",
        "backend": "vllm",
        "sla": {"ttft": 500, "itl": 20},
        "gpu": {"type": "h200_sxm"},
    }
    spec.update(spec_overrides)
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeploymentRequest",
        "metadata": {"name": "llama"},
        "spec": spec,
    }


def _beta(**spec_overrides) -> dict:
    spec = {
        "model": "Qwen/Qwen3-32B",
        "hardware": {"gpuSku": "h100_sxm"},
        "sla": {"ttft": 300.0, "itl": 25.0},
    }
    spec.update(spec_overrides)
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeploymentRequest",
        "metadata": {"name": "qwen", "namespace": "serving"},
        "spec": spec,
    }


YAML_REQUEST = """apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeploymentRequest
metadata:
  name: llama
spec:
  modelName: meta-llama/Llama-3.1-70B-Instruct
  sla: {ttft: 500, itl: 20, isl: 3000}
  gpu: {type: h200_sxm}
"""


def _causes(obj: dict) -> list[tuple[str, str]]:
    with pytest.raises(RequestError) as info:
        parse_dgdr(obj)
    return info.value.causes


def _paths(obj: dict) -> set[str]:
    return {path for path, _ in _causes(obj)}


# ----------------------------------------------------------------------------- v1alpha1


def test_v1alpha1_defaults():
    req = parse_dgdr(_alpha())
    assert req.name == "llama" and req.namespace == "default"
    assert req.model == "meta-llama/Llama-3.1-70B-Instruct"
    assert req.backend == "vllm" and req.gpu == "h200_sxm"
    assert (req.ttft_ms, req.itl_ms) == (500.0, 20.0)
    assert (req.isl_tokens, req.osl_tokens) == (3000, 500)
    assert (req.min_gpus_per_engine, req.max_gpus_per_engine) == (1, 8)
    assert req.online is False and req.auto_apply is False
    assert req.search_strategy == "rapid"


def test_v1alpha1_backend_defaults_to_trtllm():
    obj = _alpha()
    del obj["spec"]["backend"]
    assert parse_dgdr(obj).backend == "trtllm"


def test_v1alpha1_full_shape():
    obj = _alpha(
        sla={"ttft": 400, "itl": 15, "isl": 2000, "osl": 300},
        gpu={"type": "h100_sxm", "minNumGPUsPerEngine": 2, "maxNumGPUsPerEngine": 16, "pricePerHour": 3.0},
        online=True,
        autoApply=True,
        deploymentOverrides={
            "name": "llama-prod",
            "namespace": "serving",
            "labels": {"team": "a"},
            "annotations": {"note": "x"},
            "workersImage": "registry/vllm-runtime:1",
        },
        profilingConfig={"configMapRef": {"name": "cfg"}},
        hardware={"numGpusPerNode": 8, "totalGpus": 32},
        workload={"isl": 1000, "requestRate": 2.5},
    )
    req = parse_dgdr(obj)
    assert req.gpu == "h100_sxm"
    assert (req.isl_tokens, req.osl_tokens) == (1000, 300)  # workload.isl wins over sla.isl
    assert (req.min_gpus_per_engine, req.max_gpus_per_engine) == (2, 16)
    assert req.gpu_price_per_hour == 3.0
    assert (req.gpus_per_node, req.total_gpus) == (8, 32)
    assert req.request_rate == 2.5 and req.concurrency is None
    assert req.online and req.auto_apply
    assert (req.deployment_name, req.deployment_namespace) == ("llama-prod", "serving")
    assert req.labels == {"team": "a"} and req.annotations == {"note": "x"}
    assert req.image == "registry/vllm-runtime:1"


def test_v1alpha1_gpu_from_hardware_and_price_from_hardware():
    obj = _alpha(gpu=None, hardware={"gpuSku": "b200_sxm", "pricePerGpuHour": 5.0})
    del obj["spec"]["gpu"]
    req = parse_dgdr(obj)
    assert req.gpu == "b200_sxm" and req.gpu_price_per_hour == 5.0


def test_v1alpha1_upstream_example_parses_once_a_gpu_is_named():
    path = SHARED_EXAMPLES / "v1alpha1_dgdr_profile_sla.yaml"
    if not path.exists():
        pytest.skip(f"upstream examples not found beside the repository ({path.parent})")
    (doc,) = load_documents(path.read_text(), path.name)
    # The upstream sample names no GPU; slaplan needs one, and says so with both field names.
    causes = _causes(copy.deepcopy(doc))
    assert [p for p, _ in causes] == ["spec.gpu.type"]
    assert "spec.hardware.gpuSku" in causes[0][1]
    doc["spec"]["gpu"] = {"type": "h200_sxm"}
    req = parse_dgdr(doc)
    assert req.model == "Qwen/Qwen3-0.6B" and req.backend == "vllm"
    # SLA read from the later upstream shape: profilingConfig.config.sla
    assert (req.ttft_ms, req.itl_ms, req.isl_tokens, req.osl_tokens) == (200.0, 20.0, 3000, 150)
    assert req.auto_apply is True
    assert req.image == "nvcr.io/nvidian/dynamo-dev/vllm-runtime:dep-554.0"


def test_v1alpha1_profiling_config_hardware_bounds():
    obj = _alpha(
        profilingConfig={
            "config": {"hardware": {"min_num_gpus_per_engine": 2, "max_num_gpus_per_engine": 4, "num_gpus_per_node": 4}}
        }
    )
    req = parse_dgdr(obj)
    assert (req.min_gpus_per_engine, req.max_gpus_per_engine, req.gpus_per_node) == (2, 4, 4)


# ----------------------------------------------------------------------------- v1beta1


def test_v1beta1_defaults():
    req = parse_dgdr(_beta())
    assert req.name == "qwen" and req.namespace == "serving"
    assert req.backend == "vllm"  # auto -> vllm
    assert req.gpu == "h100_sxm"
    assert (req.isl_tokens, req.osl_tokens) == (4000, 1000)
    assert req.auto_apply is True and req.search_strategy == "rapid"


def test_v1beta1_full_shape():
    obj = _beta(
        backend="sglang",
        hardware={"gpuSku": "h200_sxm", "numGpusPerNode": 8, "totalGpus": 16, "vramMb": 141557, "pricePerGpuHour": 3.5},
        workload={"isl": 3000, "osl": 500, "concurrency": 64},
        sla={"ttft": 200.0, "itl": 10.0, "e2eLatency": 8000.0, "optimizationType": "throughput"},
        searchStrategy="thorough",
        autoApply=False,
        image="nvcr.io/nvidia/ai-dynamo/dynamo-planner:1.4.0",
        overrides={"dgd": {"metadata": {"name": "qwen-prod", "labels": {"team": "b"}}}, "profilingJob": {}},
        features={"mocker": {"enabled": False}},
    )
    req = parse_dgdr(obj)
    assert req.backend == "sglang" and req.gpu == "h200_sxm"
    assert (req.gpus_per_node, req.total_gpus, req.gpu_price_per_hour) == (8, 16, 3.5)
    assert (req.isl_tokens, req.osl_tokens, req.concurrency) == (3000, 500, 64)
    assert (req.ttft_ms, req.itl_ms, req.e2e_ms) == (200.0, 10.0, 8000.0)
    assert req.search_strategy == "thorough" and req.online and req.auto_apply is False
    assert req.deployment_name == "qwen-prod" and req.labels == {"team": "b"}


def test_v1beta1_e2e_only_implies_ttft_and_itl_bounds():
    req = parse_dgdr(_beta(sla={"e2eLatency": 10000.0}, workload={"osl": 101}))
    assert req.e2e_ms == 10000.0 and req.ttft_ms == 10000.0 and req.itl_ms == pytest.approx(100.0)


def test_v1beta1_upstream_sample():
    path = SHARED_EXAMPLES / "v1beta1_dgdr_sample.yaml"
    if not path.exists():
        pytest.skip(f"upstream examples not found beside the repository ({path.parent})")
    (req,) = parse_documents(path.read_text(), path.name)
    assert req.model == "Qwen/Qwen3-0.6B" and req.backend == "trtllm" and req.gpu == "h200_sxm"
    assert (req.isl_tokens, req.osl_tokens, req.ttft_ms, req.itl_ms) == (3000, 500, 50.0, 10.0)
    assert req.gpus_per_node == 8 and req.search_strategy == "thorough" and req.auto_apply


# ----------------------------------------------------------------------------- bad input


def test_sla_ttft_must_be_positive():
    causes = _causes(_alpha(sla={"ttft": 0, "itl": 20}))
    assert ("spec.sla.ttft", "must be greater than 0") in causes


def test_one_output_token_has_no_itl_and_is_rejected_wherever_it_is_set():
    assert ("spec.sla.osl", "must be at least 2") in _causes(_alpha(sla={"ttft": 500, "itl": 20, "osl": 1}))
    assert ("spec.workload.osl", "must be at least 2") in _causes(_beta(workload={"osl": 1}))
    assert parse_dgdr(_beta(workload={"osl": 2})).osl_tokens == 2


def test_sla_itl_negative_in_v1beta1():
    assert ("spec.sla.itl", "must be greater than 0") in _causes(_beta(sla={"ttft": 100.0, "itl": -1.0}))


def test_model_name_required():
    obj = _alpha()
    del obj["spec"]["modelName"]
    assert ("spec.modelName", "field required") in _causes(obj)


def test_v1beta1_model_required():
    obj = _beta()
    del obj["spec"]["model"]
    assert ("spec.model", "field required") in _causes(obj)


def test_unknown_backend():
    assert ("spec.backend", "must be one of vllm, sglang, trtllm") in _causes(_alpha(backend="tgi"))
    assert ("spec.backend", "must be one of auto, vllm, sglang, trtllm") in _causes(_beta(backend="tgi"))


def test_trtllm_on_an_amd_gpu_names_the_backend():
    causes = _causes(_alpha(backend="trtllm", gpu={"type": "mi355x"}))
    assert [path for path, _ in causes] == ["spec.backend"]
    assert "AMD" in causes[0][1] and "vllm or sglang" in causes[0][1]
    assert parse_dgdr(_alpha(backend="sglang", gpu={"type": "mi355x"})).gpu == "mi355x"


def test_sla_required():
    obj = _alpha()
    del obj["spec"]["sla"]
    assert ("spec.sla", "field required") in _causes(obj)
    assert ("spec.sla.itl", "field required") in _causes(_alpha(sla={"ttft": 100}))


def test_gpu_type_required_names_both_fields():
    obj = _alpha()
    del obj["spec"]["gpu"]
    causes = _causes(obj)
    assert [p for p, _ in causes] == ["spec.gpu.type"]
    assert "spec.gpu.type" in causes[0][1] and "spec.hardware.gpuSku" in causes[0][1]
    obj = _beta()
    del obj["spec"]["hardware"]
    assert "spec.gpu.type" in _paths(obj)


def test_gpu_type_conflict():
    assert "spec.gpu.type" in _paths(_alpha(hardware={"gpuSku": "h100_sxm"}))


def test_missing_fields_reported_with_other_errors():
    obj = _alpha(backend="tgi")
    del obj["spec"]["modelName"]
    del obj["spec"]["gpu"]
    assert {"spec.backend", "spec.modelName", "spec.gpu.type"} <= _paths(obj)


def test_unknown_field_rejected():
    assert ("spec.sla.p99", "unknown field") in _causes(_alpha(sla={"ttft": 1, "itl": 1, "p99": 3}))
    assert ("spec.foo", "unknown field") in _causes(_alpha(foo=1))


def test_wrong_types():
    causes = _causes(_alpha(online="yes", gpu={"type": "h200_sxm", "maxNumGPUsPerEngine": "8"}))
    assert ("spec.online", "must be a boolean (true or false)") in causes
    assert ("spec.gpu.maxNumGPUsPerEngine", "must be an integer") in causes


def test_gpus_per_engine_bounds():
    obj = _alpha(gpu={"type": "h200_sxm", "minNumGPUsPerEngine": 8, "maxNumGPUsPerEngine": 4})
    assert "spec.gpu.minNumGPUsPerEngine" in _paths(obj)
    obj = _alpha(gpu={"type": "h200_sxm", "minNumGPUsPerEngine": 0})
    assert ("spec.gpu.minNumGPUsPerEngine", "must be greater than 0") in _causes(obj)


@pytest.mark.parametrize("value", [1025, 10**9, 99999999999999999999])
def test_gpus_per_engine_are_bounded(value):
    """Planning time grew with the bound (maxNumGPUsPerEngine 100000 took 22 s; 1e9 never ended)."""
    for key in ("minNumGPUsPerEngine", "maxNumGPUsPerEngine"):
        obj = _alpha(gpu={"type": "h200_sxm", key: value}, hardware={"totalGpus": 16})
        assert (f"spec.gpu.{key}", f"must be at most {MAX_ENGINE_GPUS}") in _causes(obj)
    cfg = {"config": {"hardware": {"max_num_gpus_per_engine": value}}}
    assert ("spec.profilingConfig.config.hardware.max_num_gpus_per_engine",
            f"must be at most {MAX_ENGINE_GPUS}") in _causes(_alpha(profilingConfig=cfg))


def test_largest_engine_bound_is_kept():
    req = parse_dgdr(_alpha(gpu={"type": "h200_sxm", "maxNumGPUsPerEngine": MAX_ENGINE_GPUS}))
    assert req.max_gpus_per_engine == MAX_ENGINE_GPUS


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
def test_non_finite_targets_are_named_as_such(value):
    text = YAML_REQUEST.replace("ttft: 500", f"ttft: {value}")
    with pytest.raises(RequestError) as info:
        parse_documents(text, "inf.yaml")
    assert ("spec.sla.ttft", "must be finite") in info.value.causes


def test_workload_load_is_exclusive_and_whole():
    assert "spec.workload" in _paths(_beta(workload={"concurrency": 8, "requestRate": 1.0}))
    assert "spec.workload.concurrency" in _paths(_beta(workload={"concurrency": 2.5}))
    assert ("spec.workload.requestRate", "must be greater than 0") in _causes(_beta(workload={"requestRate": 0}))


def test_search_strategy_enum():
    assert ("spec.searchStrategy", "must be one of rapid, thorough") in _causes(_beta(searchStrategy="fast"))


def test_thorough_is_online_profiling_and_needs_a_named_backend():
    thorough = parse_dgdr(_beta(searchStrategy="thorough", backend="sglang"))
    assert thorough.online is True and thorough.search_strategy == "thorough" and thorough.backend == "sglang"
    rapid = parse_dgdr(_beta(backend="sglang"))
    assert rapid.online is False and rapid.search_strategy == "rapid"
    assert parse_dgdr(_alpha(online=True)).search_strategy == "thorough"  # the same request in v1alpha1
    causes = _causes(_beta(searchStrategy="thorough"))  # backend auto, the default
    assert [path for path, _ in causes] == ["spec.backend"] and "auto is for rapid only" in causes[0][1]
    assert _causes(_beta(searchStrategy="thorough", backend="auto")) == causes


def test_metadata_name_required_and_dns():
    obj = _alpha()
    del obj["metadata"]["name"]
    assert ("metadata.name", "field required") in _causes(obj)
    obj = _alpha()
    obj["metadata"]["name"] = "Llama_70B"
    assert "metadata.name" in _paths(obj)
    obj = _alpha()
    del obj["metadata"]
    assert "metadata.name" in _paths(obj)


def test_override_names_checked():
    assert "spec.deploymentOverrides.namespace" in _paths(_alpha(deploymentOverrides={"namespace": "Bad NS"}))


def test_label_values_must_be_strings():
    causes = _causes(_alpha(deploymentOverrides={"labels": {"app.kubernetes.io/part-of": 3}}))
    assert causes == [("spec.deploymentOverrides.labels[app.kubernetes.io/part-of]", "must be a string")]


def test_kind_and_api_version():
    obj = _alpha()
    obj["kind"] = "DynamoGraphDeployment"
    assert "kind" in _paths(obj)
    obj = _alpha()
    obj["apiVersion"] = "nvidia.com/v2"
    assert _paths(obj) == {"apiVersion"}


def test_error_str_lists_every_cause():
    obj = _alpha(backend="tgi", sla={"ttft": 0, "itl": 20})
    with pytest.raises(RequestError) as info:
        parse_dgdr(obj)
    text = str(info.value)
    assert "spec.backend: must be one of vllm, sglang, trtllm" in text
    assert "spec.sla.ttft: must be greater than 0" in text
    assert isinstance(info.value, ValueError)


def test_infinite_sla_rejected():
    assert "spec.sla.ttft" in _paths(_alpha(sla={"ttft": float("inf"), "itl": 20}))


# ----------------------------------------------------------------------------- documents


MULTI = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeploymentRequest
metadata: {name: a}
spec:
  modelName: m/a
  backend: sglang
  sla: {ttft: 100, itl: 10}
  gpu: {type: h100_sxm}
---
---
apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeploymentRequest
metadata: {name: b}
spec:
  model: m/b
  hardware: {gpuSku: h200_sxm}
  sla: {ttft: 200, itl: 20}
"""


def test_multi_document_yaml_skips_empty_documents():
    docs = load_documents(MULTI, "multi.yaml")
    assert [d["metadata"]["name"] for d in docs] == ["a", "b"]
    reqs = parse_documents(MULTI, "multi.yaml")
    assert [(r.name, r.backend, r.gpu) for r in reqs] == [("a", "sglang", "h100_sxm"), ("b", "vllm", "h200_sxm")]


def test_multi_document_errors_name_the_document():
    text = MULTI.replace("ttft: 200", "ttft: -1")
    with pytest.raises(RequestError) as info:
        parse_documents(text, "multi.yaml")
    assert info.value.causes == [("spec.sla.ttft", "must be greater than 0 (document 2)")]
    assert "multi.yaml" in str(info.value)


def test_other_kinds_rejected():
    text = MULTI + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"
    with pytest.raises(RequestError) as info:
        load_documents(text, "multi.yaml")
    assert {p for p, _ in info.value.causes} == {"kind", "apiVersion"}
    assert all("document 3" in m for _, m in info.value.causes)


def test_malformed_yaml_gives_line_number():
    text = "apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeploymentRequest\nspec:\n  sla: [1, 2\n  gpu: x\n"
    with pytest.raises(RequestError) as info:
        load_documents(text, "bad.yaml")
    assert info.value.line is not None and info.value.line >= 4
    assert f"line {info.value.line}" in str(info.value) and "bad.yaml" in str(info.value)


def test_non_mapping_document():
    with pytest.raises(RequestError):
        load_documents("- a\n- b\n", "list.yaml")
    with pytest.raises(RequestError):
        load_documents("\n---\n", "empty.yaml")


def test_json_input_object_and_array():
    one = json.dumps(_alpha())
    (doc,) = load_documents(one, "req.json")
    assert parse_dgdr(doc).model == "meta-llama/Llama-3.1-70B-Instruct"
    many = json.dumps([_alpha(), _beta()])
    assert [r.name for r in parse_documents(many, "reqs.json")] == ["llama", "qwen"]


def test_malformed_json_gives_line_number():
    with pytest.raises(RequestError) as info:
        load_documents('{\n  "apiVersion": "nvidia.com/v1alpha1",\n  "kind": \n}\n', "bad.json")
    assert info.value.line == 4


def _yaml_causes(text: str) -> list[tuple[str, str]]:
    with pytest.raises(RequestError) as info:
        parse_documents(text, "r.yaml")
    return info.value.causes


def test_duplicate_keys_are_refused_naming_key_and_lines():
    """The last of two keys won: a second ``spec: {}`` replaced the whole spec."""
    assert _yaml_causes(YAML_REQUEST + "spec: {}\n") == [
        ("", "invalid YAML at line 9, column 1: duplicate key 'spec' (first at line 5)")]
    nested = YAML_REQUEST.replace("isl: 3000}", "isl: 3000, ttft: 1}")
    assert _yaml_causes(nested) == [("", "invalid YAML at line 7, column 40: duplicate key 'ttft' (first at line 7)")]


def test_duplicate_keys_are_refused_in_json_too():
    text = '{"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeploymentRequest", "spec": {"a": 1, "a": 2}}'
    with pytest.raises(RequestError) as info:
        load_documents(text, "dup.json")
    assert info.value.causes == [("", "invalid JSON: duplicate key 'a'")]


def test_merge_keys_may_still_be_overridden():
    (req,) = parse_documents(YAML_REQUEST.replace("sla: {", "sla: {<<: {itl: 99}, "), "merge.yaml")
    assert req.itl_ms == 20


def test_base60_numbers_are_strings_not_numbers():
    """YAML 1.1 read ``isl: 1:30`` as 90; YAML 1.2 and Kubernetes read a string."""
    assert _yaml_causes(YAML_REQUEST.replace("isl: 3000", "isl: 1:30")) == [("spec.sla.isl", "must be an integer")]
    labelled = YAML_REQUEST + "  deploymentOverrides: {labels: {window: 12:30}}\n"
    (req,) = parse_documents(labelled, "labels.yaml")
    assert req.labels == {"window": "12:30"}


def test_yaml_aliases_are_refused():
    text = YAML_REQUEST.replace("ttft: 500", "ttft: &t 500").replace("itl: 20", "itl: *t")
    ((field, message),) = _yaml_causes(text)
    assert field == "" and message.startswith("invalid YAML at line 7, column 28: a YAML alias (*t)")


@pytest.mark.parametrize("text", ["a: " + "[" * 5000 + "]" * 5000, "[" * 5000 + "]" * 5000, "n: " + "9" * 5000])
def test_unreadable_nesting_and_numbers_are_request_errors(text):
    assert _yaml_causes(text) == [("", "nested too deeply, or holds a number or date out of range")]


# ----------------------------------------------------------------------------- shipped examples


@pytest.mark.parametrize(
    "name", ["llama-70b-h200.dgdr.yaml", "deepseek-v3-h200.dgdr.yaml", "qwen3-32b-v1beta1.dgdr.yaml"]
)
def test_shipped_examples_parse(name):
    path = EXAMPLES / name
    (req,) = parse_documents(path.read_text(), name)
    assert req.ttft_ms > 0 and req.itl_ms > 0 and req.gpu


def test_llama_example_values():
    (req,) = parse_documents((EXAMPLES / "llama-70b-h200.dgdr.yaml").read_text(), "llama")
    assert (req.model, req.backend, req.gpu) == ("meta-llama/Llama-3.1-70B-Instruct", "vllm", "h200_sxm")
    assert (req.ttft_ms, req.itl_ms, req.isl_tokens, req.osl_tokens) == (500, 20, 3000, 500)
    assert (req.max_gpus_per_engine, req.total_gpus) == (8, 16)


def test_qwen_example_has_request_rate():
    (req,) = parse_documents((EXAMPLES / "qwen3-32b-v1beta1.dgdr.yaml").read_text(), "qwen")
    assert req.request_rate == 4.0 and req.gpu_price_per_hour == 2.5
