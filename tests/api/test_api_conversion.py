"""DGDR version conversion: a DGDR stored as v1alpha1 is served through the v1beta1 path and vice
versa (get, list, watch, writes), converted field by field; what the other version cannot say
rides in an annotation, so converting back gives the original exactly."""

from __future__ import annotations

import copy

import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from api.conversion import ANNOTATION, convert_dgdr
from planner.request import parse_dgdr
from procs import start_serve, stop

pytestmark = pytest.mark.slow

GROUP, PLURAL = "nvidia.com", "dynamographdeploymentrequests"

ALPHA = {
    "apiVersion": f"{GROUP}/v1alpha1",
    "kind": "DynamoGraphDeploymentRequest",
    "metadata": {"name": "alpha", "namespace": "conv", "annotations": {"owner": "team-a"}},
    "spec": {
        "modelName": "Qwen/Qwen3-32B",
        "backend": "sglang",
        "sla": {"ttft": 400, "itl": 15, "isl": 2000},
        "gpu": {"type": "h200_sxm", "minNumGPUsPerEngine": 2, "maxNumGPUsPerEngine": 4, "pricePerHour": 3.5},
        "online": False,
        "deploymentOverrides": {"name": "served-qwen", "labels": {"tier": "gold"}, "workersImage": "nvcr.io/w:1"},
    },
}

BETA = {
    "apiVersion": f"{GROUP}/v1beta1",
    "kind": "DynamoGraphDeploymentRequest",
    "metadata": {"name": "beta", "namespace": "conv"},
    "spec": {
        "model": "Qwen/Qwen3-32B",
        "backend": "sglang",  # thorough needs a named backend
        "hardware": {"gpuSku": "h200_sxm", "totalGpus": 16, "numGpusPerNode": 8},
        "workload": {"isl": 3000, "requestRate": 2.5},
        "sla": {"ttft": 600, "itl": 25, "optimizationType": "throughput"},
        "searchStrategy": "thorough",
        "image": "nvcr.io/profiler:1",
        "overrides": {"dgd": {"metadata": {"namespace": "serving"}, "spec": {"envs": []}}},
    },
}


def _meaning(obj: dict) -> dict:
    """What the planner reads from a DGDR, but for fields one version cannot say."""
    r = parse_dgdr(obj)
    keep = ("model", "backend", "online", "search_strategy", "gpu", "isl_tokens", "osl_tokens", "ttft_ms", "itl_ms", "auto_apply", "request_rate",
            "concurrency", "total_gpus", "gpus_per_node", "gpu_price_per_hour", "deployment_name",
            "deployment_namespace", "labels")
    return {k: getattr(r, k) for k in keep}


def test_alpha_to_beta_maps_fields_keeps_meaning_and_round_trips():
    beta = convert_dgdr(copy.deepcopy(ALPHA), "v1beta1")
    assert beta["apiVersion"] == f"{GROUP}/v1beta1"
    spec = beta["spec"]
    assert spec["model"] == "Qwen/Qwen3-32B" and spec["backend"] == "sglang"
    assert spec["hardware"] == {"gpuSku": "h200_sxm", "pricePerGpuHour": 3.5}
    assert spec["workload"] == {"isl": 2000, "osl": 500}  # v1alpha1's default osl, written out
    assert spec["autoApply"] is False  # the versions' defaults differ: written out
    assert spec["overrides"] == {"dgd": {"metadata": {"name": "served-qwen", "labels": {"tier": "gold"}}}}
    assert ANNOTATION in beta["metadata"]["annotations"] and beta["metadata"]["annotations"]["owner"] == "team-a"
    assert "minNumGPUsPerEngine" in beta["metadata"]["annotations"][ANNOTATION]
    assert _meaning(beta) == _meaning(ALPHA)
    assert convert_dgdr(beta, "v1alpha1") == ALPHA


def test_beta_to_alpha_maps_fields_keeps_meaning_and_round_trips():
    alpha = convert_dgdr(copy.deepcopy(BETA), "v1alpha1")
    spec = alpha["spec"]
    assert spec["modelName"] == "Qwen/Qwen3-32B" and spec["backend"] == "sglang"
    assert spec["gpu"] == {"type": "h200_sxm"} and spec["hardware"] == {"totalGpus": 16, "numGpusPerNode": 8}
    assert spec["workload"] == {"isl": 3000, "osl": 1000, "requestRate": 2.5}
    assert spec["online"] is True  # thorough: profiled on real deployments
    assert spec["autoApply"] is True and spec["deploymentOverrides"] == {"namespace": "serving"}
    lost = alpha["metadata"]["annotations"][ANNOTATION]
    assert all(word in lost for word in ("optimizationType", "image", "envs")) and "thorough" not in lost
    assert _meaning(alpha) == _meaning(BETA)
    assert convert_dgdr(alpha, "v1beta1") == BETA


def test_online_and_thorough_convert_both_ways():
    online = {**ALPHA, "spec": {**ALPHA["spec"], "online": True,
                                "profilingConfig": {"config": {"online": {"max_trials": 3}}}}}
    beta = convert_dgdr(copy.deepcopy(online), "v1beta1")
    assert beta["spec"]["searchStrategy"] == "thorough" and parse_dgdr(beta).online
    assert "max_trials" in beta["metadata"]["annotations"][ANNOTATION]  # budgets: slaplan's v1alpha1 extension
    assert convert_dgdr(beta, "v1alpha1") == online
    assert _meaning(beta) == _meaning(online)
    rapid = {**BETA, "spec": {**BETA["spec"], "searchStrategy": "rapid"}}
    alpha = convert_dgdr(copy.deepcopy(rapid), "v1alpha1")
    assert "online" not in alpha["spec"] and not parse_dgdr(alpha).online  # false, the default
    assert convert_dgdr(alpha, "v1beta1") == rapid


def test_same_version_is_untouched_and_a_plain_object_needs_no_annotation():
    assert convert_dgdr(ALPHA, "v1alpha1") is ALPHA
    plain = {**BETA, "spec": {"model": "m", "backend": "vllm", "hardware": {"gpuSku": "h100_sxm"},
                              "workload": {"isl": 10, "osl": 20}, "sla": {"ttft": 1, "itl": 2}, "autoApply": False}}
    assert ANNOTATION not in (convert_dgdr(plain, "v1alpha1")["metadata"].get("annotations") or {})


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    url, procs = start_serve(tmp_path_factory.mktemp("conversion"))
    with k8s.ApiClient(k8s.Configuration(host=url)) as client:
        yield k8s.CustomObjectsApi(client)
    for proc in procs:
        stop(proc)


def test_served_through_the_other_version_get_list_watch(api):
    api.create_namespaced_custom_object(GROUP, "v1alpha1", "conv", PLURAL, copy.deepcopy(ALPHA))
    api.create_namespaced_custom_object(GROUP, "v1beta1", "conv", PLURAL, copy.deepcopy(BETA))

    as_beta = api.get_namespaced_custom_object(GROUP, "v1beta1", "conv", PLURAL, "alpha")
    assert as_beta["apiVersion"] == f"{GROUP}/v1beta1" and as_beta["spec"]["hardware"]["gpuSku"] == "h200_sxm"
    as_alpha = api.get_namespaced_custom_object(GROUP, "v1alpha1", "conv", PLURAL, "beta")
    assert as_alpha["apiVersion"] == f"{GROUP}/v1alpha1" and as_alpha["spec"]["gpu"]["type"] == "h200_sxm"
    stored = api.get_namespaced_custom_object(GROUP, "v1alpha1", "conv", PLURAL, "alpha")
    assert stored["spec"] == ALPHA["spec"] and ANNOTATION not in stored["metadata"]["annotations"]

    for version, shape in (("v1alpha1", "modelName"), ("v1beta1", "model")):
        items = api.list_namespaced_custom_object(GROUP, version, "conv", PLURAL)["items"]
        assert {i["apiVersion"] for i in items} == {f"{GROUP}/{version}"} and all(shape in i["spec"] for i in items)
        watched = k8s_watch.Watch().stream(api.list_namespaced_custom_object, GROUP, version, "conv", PLURAL, timeout_seconds=1)
        objects = [e["object"] for e in watched]
        assert {o["metadata"]["name"] for o in objects} == {"alpha", "beta"}
        assert all(o["apiVersion"] == f"{GROUP}/{version}" and shape in o["spec"] for o in objects)


def test_writes_through_the_other_version_keep_the_stored_spec(api):
    api.create_namespaced_custom_object(GROUP, "v1alpha1", "conv", PLURAL, {**copy.deepcopy(ALPHA), "metadata": {"name": "kept"}})
    api.patch_namespaced_custom_object(GROUP, "v1beta1", "conv", PLURAL, "kept", {"metadata": {"labels": {"seen": "yes"}}})
    # The worker's own status writes would make the replace below a genuine 409 Conflict, as on
    # Kubernetes; take the view once profiling has ended.
    watched = k8s_watch.Watch().stream(api.list_namespaced_custom_object, GROUP, "v1beta1", "conv", PLURAL,
                                       field_selector="metadata.name=kept", timeout_seconds=60)
    for event in watched:
        if (event["object"].get("status") or {}).get("state") in ("Ready", "Failed"):
            break
    view = api.get_namespaced_custom_object(GROUP, "v1beta1", "conv", PLURAL, "kept")
    replaced = api.replace_namespaced_custom_object(GROUP, "v1beta1", "conv", PLURAL, "kept", view)
    assert replaced["apiVersion"] == f"{GROUP}/v1beta1"
    stored = api.get_namespaced_custom_object(GROUP, "v1alpha1", "conv", PLURAL, "kept")
    assert stored["spec"] == ALPHA["spec"] and stored["metadata"]["generation"] == 1
    assert stored["metadata"]["labels"] == {"seen": "yes"} and "annotations" not in stored["metadata"]
