"""Submitting a DGDR or BenchmarkJob from the dashboard: the form, and the handler that
parses the pasted YAML, creates the object through the same code as the REST API, and points
every validation error at the line of the field it names."""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

import yaml

from api.dashboard.html import page
from api.objects import BadBody, load_yaml_documents

PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
# The form's CSRF token (double submit): a cookie only this site's pages are sent with, repeated
# by the form's script in a header; a page of another site can set neither.
CSRF_COOKIE = "slaplan-csrf"
CSRF_HEADER = "x-csrf-token"
_CSRF_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)

EXAMPLE_DGDR = """apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeploymentRequest
metadata:
  name: llama-8b-h100
  namespace: default
spec:
  modelName: meta-llama/Llama-3.1-8B-Instruct
  backend: vllm
  sla:
    ttft: 300   # ms, time to first token
    itl: 15     # ms, inter-token latency
    isl: 2000   # input tokens
    osl: 300    # output tokens
  gpu:
    type: h100_sxm
    minNumGPUsPerEngine: 1
    maxNumGPUsPerEngine: 8
  online: false
  autoApply: false
"""

EXAMPLE_BENCH = """# Benchmarks an engine emulator on the machine the slaplan worker runs on: no cluster, no GPU.
# Start the emulator there first:
#   slaplan emulate --model Qwen/Qwen3-8B --gpu h100_sxm --port 8000
apiVersion: ome.io/v1beta1
kind: BenchmarkJob
metadata:
  name: qwen3-8b-local
  namespace: default
  annotations:
    slaplan.io/ttft-ms: "300"   # SLA lines on the charts
    slaplan.io/itl-ms: "15"
spec:
  endpoint:
    endpoint:
      url: http://127.0.0.1:8000
      apiFormat: openai
      modelName: Qwen/Qwen3-8B
  task: text-to-text
  trafficScenarios: ["D(500,100)"]
  numConcurrency: [1, 4, 16]
  maxTimePerIteration: 1        # minutes
  maxRequestsPerIteration: 40
  additionalRequestParams:
    ignore_eos: "true"          # answers run to the scenario's output length
  outputLocation:
    storageUri: pvc://benchmarks/results
"""


def field_line(text: str, field: str) -> int | None:
    """The 1-based line of ``field`` (``spec.sla.ttft``, ``spec.trafficScenarios[1]``) in the
    YAML ``text``, or of its deepest ancestor present (a missing field points at its parent)."""
    try:
        node = yaml.compose(text)
    except (yaml.YAMLError, RecursionError):  # not YAML, or nested beyond what the parser follows
        return None
    if node is None:
        return None
    line = None
    for name, index in PATH_PART.findall(field or ""):
        if isinstance(node, yaml.MappingNode) and name:
            pair = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == name), None)
            if pair is None:
                break
            line, node = pair[0].start_mark.line + 1, pair[1]
        elif isinstance(node, yaml.SequenceNode) and index:
            i = int(index)
            if i >= len(node.value):
                break
            node = node.value[i]
            line = node.start_mark.line + 1
        else:
            break
    return line


def parse_text(text: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(object, None) or (None, error document) for the pasted text."""
    if not text.strip():
        return None, {"message": "Paste or upload a DGDR or BenchmarkJob first.", "causes": [
            {"field": "", "message": "the manifest is empty", "line": None}]}
    try:
        docs = load_yaml_documents(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        return None, {"message": "This is not valid YAML.", "causes": [{"field": "", "message": f"YAML: {problem}", "line": line}]}
    except BadBody as exc:
        return None, {"message": "This manifest holds a value the API does not store.",
                      "causes": [{"field": "", "message": str(exc), "line": None}]}
    if len(docs) != 1 or not isinstance(docs[0], dict):
        return None, {"message": "Submit exactly one object (a mapping with apiVersion, kind, metadata and spec).",
                      "causes": [{"field": "", "message": f"found {len(docs)} documents" if len(docs) != 1 else "not a mapping", "line": 1}]}
    return docs[0], None


def target_of(obj: dict[str, Any]):
    """(kind, group, version) the object is for, or an error document."""
    from api.kinds import SERVED

    api_version = str(obj.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    kind_name = obj.get("kind")
    for kind in SERVED:
        if kind.kind == kind_name and kind.group == group and version in kind.versions:
            return (kind, group, version), None
    served = "; ".join(f"{k.kind} ({', '.join(k.group + '/' + v for v in k.versions)})" for k in SERVED)
    field = "apiVersion" if any(k.kind == kind_name for k in SERVED) else "kind"  # kind may be any JSON value
    return None, {"message": f"This dashboard accepts {served}.", "causes": [
        {"field": field, "message": f"Unsupported value: {obj.get(field)!r}", "line": None}]}


def with_lines(text: str, error: dict[str, Any]) -> dict[str, Any]:
    causes = []
    for c in error.get("causes") or []:
        line = c.get("line") if c.get("line") is not None else field_line(text, c.get("field") or "")
        causes.append({**c, "line": line})
    return {**error, "causes": causes}


def csrf_token(cookie: str | None) -> str:
    """The form's CSRF token: the browser's cookie when it holds one (other open forms stay
    valid), else a new random one."""
    return cookie if cookie and _CSRF_TOKEN.fullmatch(cookie) else secrets.token_urlsafe(32)


def csrf_matches(cookie: str | None, header: str | None) -> bool:
    """Whether a submit repeats, in its header, the token of its cookie."""
    if not (cookie and header and _CSRF_TOKEN.fullmatch(cookie)):
        return False
    return secrets.compare_digest(cookie.encode(), header.encode())  # bytes: a header may hold any character


def render_submit(token_required: bool, csrf: str) -> str:
    """The submit page; ``csrf`` is the token the form sends back (see ``csrf_token``)."""
    token = ""
    if token_required:
        token = """<div class="field"><label for="token">API token</label>
<input id="token" name="token" type="password" autocomplete="off" aria-describedby="token-help">
<p class="help" id="token-help">This server requires a bearer token to create objects.</p></div>"""
    examples = json.dumps({"dgdr": EXAMPLE_DGDR, "bench": EXAMPLE_BENCH}).replace("<", "\\u003c")
    body = f"""<h1>Submit a request</h1>
<p class="lead">Paste or upload a <strong>DynamoGraphDeploymentRequest</strong> (nvidia.com/v1alpha1 or v1beta1) or a
<strong>BenchmarkJob</strong> (ome.io/v1beta1) as YAML or JSON. It is validated as the REST API validates it; once
accepted you are taken to its page to watch it progress.</p>
<form id="submit-form" class="submit" novalidate>
<input type="hidden" id="csrf" value="{csrf}">
<div class="field"><label for="file">Upload a file</label>
<input id="file" type="file" accept=".yaml,.yml,.json,application/yaml,application/json,text/yaml"></div>
<div class="field">
<div class="label-row"><label for="manifest">Manifest</label>
<span class="inline-buttons"><button type="button" class="link" data-example="dgdr">Use an example DGDR</button>
<button type="button" class="link" data-example="bench">Use an example BenchmarkJob</button></span></div>
<textarea id="manifest" name="manifest" rows="22" spellcheck="false" autocomplete="off" aria-describedby="manifest-help errors"
placeholder="apiVersion: nvidia.com/v1alpha1&#10;kind: DynamoGraphDeploymentRequest&#10;…"></textarea>
<p class="help" id="manifest-help">Errors are shown next to the line of the field they concern.</p>
</div>
{token}
<div class="field actions"><button type="submit" id="submit-button" class="primary">Submit</button>
<span id="submit-status" role="status" aria-live="polite"></span></div>
<div id="errors" class="errors" role="alert" aria-live="assertive" hidden></div>
</form>
<script type="application/json" id="examples">{examples}</script>"""
    return page("Submit", body, current="submit")
