"""Offline CRD validation: schema conversion, defaults, CEL rules, real examples and CRDs."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from infra import crds, k8s_cel
from paths import CRD_DIRS, SHARED

CRD_DIR = SHARED / "crds"
EXAMPLES = SHARED / "examples"

needs_shared = pytest.mark.skipif(
    not CRD_DIR.is_dir(), reason="../shared/crds (real CRD schemas) is not beside the repository")


def _example_docs() -> list[tuple[str, int, dict]]:
    if not EXAMPLES.is_dir():
        return []
    out = []
    for path in sorted(EXAMPLES.glob("*/*.yaml")):
        with open(path, encoding="utf-8") as fh:
            for i, doc in enumerate(yaml.safe_load_all(fh)):
                if isinstance(doc, dict) and doc.get("apiVersion") and doc.get("kind"):
                    out.append((f"{path.parent.name}/{path.name}", i, doc))
    return out


def _example(name: str) -> dict:
    with open(EXAMPLES / name, encoding="utf-8") as fh:
        return next(d for d in yaml.safe_load_all(fh) if d and d.get("kind") not in (None, "Namespace"))


# ---------------------------------------------------------------- pure conversion (no files)

def _check(schema: dict, obj) -> list[str]:
    import jsonschema

    return [e.message for e in jsonschema.Draft7Validator(crds.convert_schema(schema)).iter_errors(obj)]


def test_objects_with_properties_are_closed_unless_preserving_unknown_fields():
    closed = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert _check(closed, {"a": "x"}) == []
    assert _check(closed, {"a": "x", "b": 1})
    open_ = dict(closed, **{"x-kubernetes-preserve-unknown-fields": True})
    assert _check(open_, {"a": "x", "b": 1}) == []
    mapping = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert _check(mapping, {"k": 1}) == [] and _check(mapping, {"k": "v"})


def test_nullable_int_or_string_and_exclusive_bounds():
    assert _check({"type": "string", "nullable": True}, None) == []
    assert _check({"type": "string"}, None)
    ios = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
    assert _check(ios, 3) == [] and _check(ios, "50%") == [] and _check(ios, 1.5)
    excl = {"type": "integer", "minimum": 0, "exclusiveMinimum": True}
    assert _check(excl, 1) == [] and _check(excl, 0)


def test_apply_defaults_fills_required_defaults_without_mutating():
    schema = {"type": "object", "properties": {
        "spec": {"type": "object", "required": ["n"], "properties": {
            "n": {"type": "integer", "default": 100},
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "mode": {"type": "string", "default": "hard"}}}}}}}}
    obj = {"spec": {"items": [{}, {"mode": "soft"}]}}
    out = crds.apply_defaults(obj, schema)
    assert out == {"spec": {"n": 100, "items": [{"mode": "hard"}, {"mode": "soft"}]}}
    assert obj == {"spec": {"items": [{}, {"mode": "soft"}]}}
    assert crds.apply_defaults({}, schema) == {}  # no parent, no nested default


def test_format_path():
    assert crds.format_path(["spec", "roles", 0, "name"]) == "spec.roles[0].name"


# ---------------------------------------------------------------- real CRDs and examples

@needs_shared
@pytest.mark.parametrize("name,index,doc", _example_docs(),
                         ids=[f"{n}#{i}" for n, i, _ in _example_docs()])
def test_upstream_examples_validate(name, index, doc):
    if not crds.find_crds(doc["apiVersion"], doc["kind"], CRD_DIR):
        pytest.skip(f"no CRD for {doc['kind']} {doc['apiVersion']} in ../shared/crds")
    assert crds.validate(doc, CRD_DIR) == []


@needs_shared
def test_legacy_kthena_group_has_no_crd():
    with pytest.raises(crds.CRDNotFound):
        crds.validate({"apiVersion": "workload.volcano.sh/v1alpha1", "kind": "ModelServing",
                       "metadata": {"name": "x"}, "spec": {}}, CRD_DIR)


@needs_shared
def test_default_dir_is_found_beside_the_repository():
    assert crds.default_crd_dir().resolve() == CRD_DIR.resolve()


@needs_shared
def test_every_version_file_is_checked_and_named():
    doc = _example("kthena/modelserving_multi-node_TP8xPP2.yaml")
    assert len(crds.find_crds(doc["apiVersion"], doc["kind"], CRD_DIR)) >= 2
    doc = copy.deepcopy(doc)
    doc["spec"]["replicas"] = "one"
    errors = crds.validate(doc, CRD_DIR)
    assert any(e.startswith("kthena-v1.0.0_") and "spec.replicas" in e for e in errors)
    assert any(e.startswith("kthena-main-") and "spec.replicas" in e for e in errors)


def _errors(doc: dict) -> str:
    return "\n".join(crds.validate(doc, CRD_DIR))


@needs_shared
def test_wrong_type_is_rejected_with_its_path():
    doc = copy.deepcopy(_example("ome/isvc_kimi-k2-pd.yaml"))
    doc["spec"]["decoder"]["minReplicas"] = "one"
    assert "spec.decoder.minReplicas:" in _errors(doc)


@needs_shared
def test_unknown_field_in_closed_object_is_rejected():
    doc = copy.deepcopy(_example("kubeai/model_llama-3.1-70b-instruct-fp8-h100_tp2.yaml"))
    doc["spec"]["tensorParallel"] = 2
    assert "spec.tensorParallel: unknown field" in _errors(doc)
    doc = copy.deepcopy(_example("kthena/modelserving_multi-node_TP8xPP2.yaml"))
    doc["spec"]["template"]["roles"][0]["tp"] = 8
    assert "spec.template.roles[0].tp: unknown field" in _errors(doc)


@needs_shared
def test_missing_required_field_is_rejected():
    doc = copy.deepcopy(_example("kthena/modelserving_multi-node_TP8xPP2.yaml"))
    del doc["spec"]["template"]["roles"][0]["workerReplicas"]
    assert "spec.template.roles[0].workerReplicas: required field missing" in _errors(doc)
    doc = copy.deepcopy(_example("kubeai/model_llama-3.1-70b-instruct-fp8-h100_tp2.yaml"))
    del doc["spec"]["url"]
    assert "spec.url: required field missing" in _errors(doc)


@needs_shared
def test_kubeai_target_requests_default_is_applied():
    doc = copy.deepcopy(_example("kubeai/model_llama-3.1-70b-instruct-fp8-h100_tp2.yaml"))
    del doc["spec"]["targetRequests"]
    assert crds.validate(doc, CRD_DIR) == []


@needs_shared
def test_kubeai_cel_rules():
    doc = copy.deepcopy(_example("kubeai/model_llama-3.1-70b-instruct-fp8-h100_tp2.yaml"))
    doc["metadata"]["name"] = "a" * 41
    assert "<root>: name must not exceed 40 characters" in _errors(doc)  # the rule is on the object
    doc["metadata"]["name"] = "a" * 40
    assert crds.validate(doc, CRD_DIR) == []
    doc["spec"]["url"] = "https://huggingface.co/x"
    assert "spec.url: url must start with" in _errors(doc)
    doc["spec"]["url"] = "gs://bucket/model"
    assert "only supported when using a cacheProfile" in _errors(doc)
    doc["spec"]["url"] = "hf://x/y"
    doc["spec"]["minReplicas"], doc["spec"]["maxReplicas"] = 3, 2
    assert "minReplicas should be less than or equal to maxReplicas" in _errors(doc)


@needs_shared
def test_kthena_role_rules():
    base = _example("kthena/modelserving_gpu-pd-disaggregation_1P1D.yaml")
    doc = copy.deepcopy(base)
    doc["spec"]["template"]["roles"][1]["name"] = "prefill"
    assert "spec.template.roles: roles name must be unique" in _errors(doc)
    doc = copy.deepcopy(base)
    doc["spec"]["template"]["roles"][0]["name"] = "prefill-long-x"  # 14 > 12
    assert "spec.template.roles[0].name:" in _errors(doc)
    doc = copy.deepcopy(base)
    roles = doc["spec"]["template"]["roles"]
    for i in range(3):
        extra = copy.deepcopy(roles[0])
        extra["name"] = f"extra{i}"
        roles.append(extra)
    assert "spec.template.roles:" in _errors(doc)  # 5 roles > 4


@needs_shared
def test_invalid_metadata_name_is_rejected():
    doc = copy.deepcopy(_example("ome/isvc_kimi-k2-pd.yaml"))
    doc["metadata"]["name"] = "Kimi_K2"
    assert "metadata.name:" in _errors(doc)


# ---------------------------------------------------------------- CEL rules

@needs_shared
def test_dynamo_v1beta1_cel_rules():
    base = _example("dynamo/v1beta1_vllm_disagg.yaml")
    doc = copy.deepcopy(base)
    doc["spec"]["components"][2]["name"] = "vllmdecodeworker"  # lowerAscii() in the rule
    assert "spec.components: component names must be unique case-insensitively" in _errors(doc)
    doc = copy.deepcopy(base)
    doc["spec"]["restart"] = {"id": "r1"}  # optionalOldSelf: checked on create with no oldSelf
    assert "spec: spec.restart must be unset on create" in _errors(doc)
    doc = copy.deepcopy(base)
    policy = {"domain": "zone", "labelKey": ".".join(["a" * 60] * 5) + "/zone"}  # schema-valid
    doc["spec"]["experimental"] = {"kvTransferPolicy": policy}
    assert "kvTransferPolicy.labelKey: labelKey prefix must be 253 characters or less" in _errors(doc)
    policy["labelKey"] = "topology.kubernetes.io/zone"
    assert crds.validate(doc, CRD_DIR) == []
    annotations = doc["spec"]["components"][1]["podTemplate"].setdefault("metadata", {})
    annotations["annotations"] = {"nvidia.com/vllm-distributed-executor-backend": "RAY"}
    assert crds.validate(doc, CRD_DIR) == []
    annotations["annotations"]["nvidia.com/vllm-distributed-executor-backend"] = "nccl"
    assert "backend annotation must be mp or ray" in _errors(doc)


@needs_shared
def test_dynamo_shared_memory_quantity_rule():
    doc = copy.deepcopy(_example("dynamo/v1alpha1_vllm_disagg.yaml"))
    service = next(iter(doc["spec"]["services"].values()))
    service["sharedMemory"] = {"size": "0"}
    errors = _errors(doc)
    assert "dynamo-main-2026-08_" in errors and "size is required when disabled is false" in errors
    service["sharedMemory"] = {"size": "1Gi"}
    assert crds.validate(doc, CRD_DIR) == []
    service["sharedMemory"] = {"disabled": True}
    assert crds.validate(doc, CRD_DIR) == []


@needs_shared
def test_every_rule_of_the_real_crds_is_evaluated_or_not_applicable():
    rules = [r for folder in CRD_DIRS for path in sorted(folder.glob("*.yaml")) for r in crds.cel_rules(path)]
    assert [r for r in rules if r.status == crds.UNEVALUABLE] == []
    skipped = [r for r in rules if r.status == crds.NOT_APPLICABLE]
    assert skipped and all("oldSelf" in r.rule for r in skipped)
    kubeai = [(r.path, r.rule) for r in skipped if r.crd.startswith("kubeai-")]
    assert ("spec.cacheProfile", "self == oldSelf") in kubeai
    restart = [r for r in rules if "restart" in r.rule]
    assert restart and all(r.status == crds.EVALUATED for r in restart)  # optionalOldSelf


def _write_crd(tmp_path: Path, spec_schema: dict) -> Path:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.test.slaplan.io"},
        "spec": {"group": "test.slaplan.io", "scope": "Namespaced",
                 "names": {"kind": "Widget", "plural": "widgets"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object", "properties": {
                         "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                         "metadata": {"type": "object"}, "spec": spec_schema}}}}]},
    }
    path = tmp_path / "test_widgets.yaml"
    path.write_text(yaml.safe_dump(crd), encoding="utf-8")
    return path


def _widget(spec: dict) -> dict:
    return {"apiVersion": "test.slaplan.io/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}


def test_unevaluable_rule_is_reported_by_name(tmp_path):
    rule = "isURL(self)"  # Kubernetes' url library, which the runtime does not have
    path = _write_crd(tmp_path, {"type": "object", "properties": {
        "endpoint": {"type": "string", "x-kubernetes-validations": [{"rule": rule}]}}})
    (entry,) = crds.cel_rules(path)
    assert (entry.crd, entry.version, entry.path, entry.rule) == ("test_widgets.yaml", "v1", "spec.endpoint", rule)
    assert entry.status == crds.UNEVALUABLE and "isURL" in entry.reason
    errors = crds.validate(_widget({"endpoint": "https://x"}), tmp_path)
    assert len(errors) == 1
    assert errors[0].startswith("test_widgets.yaml: spec.endpoint: CEL rule 'isURL(self)' could not be evaluated")
    assert crds.validate(_widget({}), tmp_path) == []  # a rule on an absent field is not reached


def test_message_expression_field_path_and_runtime_errors(tmp_path):
    rules = [
        {"rule": "self.replicas <= self.max", "fieldPath": ".replicas",
         "messageExpression": "'replicas ' + string(self.replicas) + ' exceeds ' + string(self.max)"},
        {"rule": "self.min >= 0"},
    ]
    path = _write_crd(tmp_path, {"type": "object", "x-kubernetes-validations": rules, "properties": {
        "replicas": {"type": "integer"}, "max": {"type": "integer"}, "min": {"type": "integer"}}})
    assert [r.status for r in crds.cel_rules(path)] == [crds.EVALUATED] * 2
    errors = crds.validate(_widget({"replicas": 5, "max": 4, "min": -1}), tmp_path)
    assert errors == ["test_widgets.yaml: spec.replicas: replicas 5 exceeds 4",
                      "test_widgets.yaml: spec: failed rule: self.min >= 0"]
    (missing,) = crds.validate(_widget({"replicas": 1, "max": 4}), tmp_path)
    assert "spec: " in missing and "evaluating rule 'self.min >= 0'" in missing


def test_quantity_library():
    assert k8s_cel.parse_quantity("1Gi") == 2**30
    assert k8s_cel.parse_quantity("500m") * 2 == 1
    assert k8s_cel.parse_quantity("1.5e3") == 1500 and k8s_cel.parse_quantity("2E") == 2 * 10**18
    with pytest.raises(ValueError):
        k8s_cel.parse_quantity("1 Gi")

    def run(text: str) -> object:
        return k8s_cel.evaluate(k8s_cel.compile_rule(text), None)

    assert run("quantity('1Gi').isGreaterThan(quantity('1G'))") is True
    assert run("quantity('1G').isLessThan(quantity('1Gi'))") is True
    assert run("quantity('500m').compareTo(quantity('0.5')) == 0") is True
    with pytest.raises(k8s_cel.CelEvalError):
        run("quantity('one')")
    with pytest.raises(k8s_cel.CelEvalError):
        run("'1'.isGreaterThan(quantity('0'))")  # a string is not a quantity
