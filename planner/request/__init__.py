"""Parse DynamoGraphDeploymentRequests (DGDRs) into a :class:`planner.types.PlanRequest`.

Two API versions are accepted, both as documents of kind ``DynamoGraphDeploymentRequest``:

``nvidia.com/v1alpha1`` — the first upstream shape::

    spec:
      modelName: meta-llama/Llama-3.1-70B-Instruct   # required (``model`` accepted too)
      backend: vllm | sglang | trtllm                # default trtllm
      sla: {ttft: 500, itl: 20, isl: 3000, osl: 500}  # ms, ms, tokens, tokens; isl/osl optional
      gpu: {type: h200_sxm, minNumGPUsPerEngine: 1, maxNumGPUsPerEngine: 8, pricePerHour: 3.5}
      online: false
      autoApply: false
      deploymentOverrides: {name, namespace, labels, annotations, workersImage}
      profilingConfig: {configMapRef: {name, key: disagg.yaml}, config: {...}, profilerImage}

  The later upstream v1alpha1 revision (``model`` instead of ``modelName``; the SLA inside the
  free-form ``profilingConfig.config.sla`` and GPU bounds in ``profilingConfig.config.hardware``
  as ``min_num_gpus_per_engine`` / ``max_num_gpus_per_engine`` / ``num_gpus_per_node``;
  ``enableGpuDiscovery``, ``useMocker``, ``runtimeVersionOverride``) parses too. With
  ``online: true``, ``profilingConfig.config.online`` (slaplan) sets the search's budgets and
  sweep: ``max_trials`` (runs measured: a unit at one concurrency each), ``max_wall_time_minutes``
  and ``concurrency`` (the closed-loop clients a run may use); the service's settings fill what is
  missing. A v1alpha1
  request may also carry the v1beta1 blocks ``spec.workload`` (a load) and ``spec.hardware``
  (a GPU budget); ``workload.isl/osl`` win over ``sla.isl/osl``.

``nvidia.com/v1beta1`` — the current upstream shape::

    spec:
      model: Qwen/Qwen3-32B                           # required
      backend: auto | vllm | sglang | trtllm          # default auto (= vllm here)
      hardware: {gpuSku, numGpusPerNode, totalGpus, vramMb, interconnect, rdma, pricePerGpuHour}
      workload: {isl: 4000, osl: 1000, concurrency | requestRate}
      sla: {ttft, itl, e2eLatency, optimizationType}  # ms
      searchStrategy: rapid | thorough                 # default rapid; thorough = online profiling
      autoApply: true
      overrides: {dgd: {...}, profilingJob: {...}}
      image, modelCache, features, runtimeVersionOverride   # accepted; not used by the planner

  ``searchStrategy: thorough`` profiles on real deployments, as v1alpha1 ``online: true`` does
  (with the service's budgets and sweep); it needs a named backend (``auto`` is refused for it, as
  in Dynamo). ``rapid`` plans with the performance model.

Where each value comes from is told in :mod:`planner.request.normalize`. GPUs per engine
(``minNumGPUsPerEngine``, ``maxNumGPUsPerEngine`` and their profiler-config twins) are at most
:data:`MAX_ENGINE_GPUS`. YAML is read by :class:`DocumentLoader`, which the REST API uses for
bodies too: no aliases, no key given twice, no YAML 1.1 base-60 numbers.

Errors are reported all at once as a :class:`RequestError` whose ``causes`` are
``(field_path, message)`` pairs with YAML (camelCase) names, e.g.
``("spec.sla.ttft", "must be greater than 0")``.

The modules: ``versions`` (kind, API versions, their default lengths), ``wire_common``,
``wire_v1alpha1``, ``wire_v1beta1`` (the shapes as sent), ``names`` (DNS-1123 rules), ``errors``,
``loaders`` (YAML and JSON readers), ``normalize`` (spec → request fields), ``parse`` (one
object) and ``documents`` (text of one or many).
"""

from planner.request.documents import load_documents, parse_documents
from planner.request.errors import RequestError
from planner.request.loaders import DocumentLoader, DuplicateKey, RefusedYAML, loads_json
from planner.request.parse import model_field, parse_dgdr
from planner.request.versions import (
    API_VERSIONS,
    KIND,
    V1ALPHA1,
    V1ALPHA1_LENGTHS,
    V1BETA1,
    V1BETA1_LENGTHS,
    Lengths,
    asks_online,
    profiling_label,
)
from planner.request.wire_v1alpha1 import MAX_ENGINE_GPUS

__all__ = [
    "API_VERSIONS",
    "KIND",
    "MAX_ENGINE_GPUS",
    "V1ALPHA1",
    "V1ALPHA1_LENGTHS",
    "V1BETA1",
    "V1BETA1_LENGTHS",
    "DocumentLoader",
    "DuplicateKey",
    "Lengths",
    "RefusedYAML",
    "RequestError",
    "asks_online",
    "load_documents",
    "loads_json",
    "model_field",
    "parse_dgdr",
    "parse_documents",
    "profiling_label",
]
