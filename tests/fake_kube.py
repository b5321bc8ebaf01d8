"""An in-process fake of the Kubernetes API server's custom-resource endpoints, for tests.

It speaks enough of the API for the official ``kubernetes`` client: discovery (``/apis``,
``/apis/{group}/{version}``), server-side apply (``PATCH`` with ``application/apply-patch+yaml``
and a ``fieldManager``; ``force``; ``dryRun=All``), GET, list, DELETE and the status
subresource (merge patch). Every applied object is validated against the real CRD schemas
(``infra.crds.validate`` on ``../shared/crds`` and ``tests/data/crds``) and refused with ``422 Invalid`` and its causes,
as the API server refuses it, so a wrong manifest fails the test that applies it.

Simplifications: one field manager's apply owns labels, annotations and spec as a whole (no
per-field ownership merge); objects are stored as applied (no defaulting, no conversion
between versions); no watch. Tests change what controllers would: ``set_status`` (e.g. a
DGD's ``status.state``) and ``remove``.

Usage::

    fake = FakeKube(served=[("nvidia.com", "v1beta1", "DynamoGraphDeployment")])
    fake.start()
    fake.write_kubeconfig(tmp_path / "kubeconfig")
    ...
    fake.stop()
"""


import copy
import json
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from procs import free_port
from paths import CRD_DIRS, SHARED

CRD_DIR = SHARED / "crds"
SKIP_REASON = "../shared/crds (the real CRD schemas the fake API server enforces) is not beside the repository"

# What slaplan deploys, as a cluster with every operator installed serves it.
DEPLOYABLE = (
    ("nvidia.com", "v1alpha1", "DynamoGraphDeployment"),
    ("nvidia.com", "v1beta1", "DynamoGraphDeployment"),
    ("ome.io", "v1beta1", "InferenceService"),
    ("workload.serving.volcano.sh", "v1alpha1", "ModelServing"),
    ("workload.serving.volcano.sh", "v1alpha1", "AutoscalingPolicy"),
    ("kubeai.org", "v1", "Model"),
)


def _status(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure" if code >= 400 else "Success",
            "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return body


class FakeKube:
    """The fake API server: its state, the ASGI app over it, and a uvicorn thread serving it."""

    def __init__(self, served=DEPLOYABLE, *, token: str | None = "fake-token",
                 forbidden_namespaces: tuple[str, ...] = (), crd_dir: Path | tuple[Path, ...] = CRD_DIRS):
        from infra.crds import find_crds, plural

        self.crd_dir = crd_dir
        self.token = token
        self.forbidden = set(forbidden_namespaces)
        # (group, version) -> {kind: plural}; each must have a real schema
        self.served: dict[tuple[str, str], dict[str, str]] = {}
        for group, version, kind in served:
            if not find_crds(f"{group}/{version}", kind, crd_dir):
                raise ValueError(f"no CRD for {kind} {group}/{version} in {crd_dir}")
            self.served.setdefault((group, version), {})[kind] = plural(f"{group}/{version}", kind, crd_dir)
        self.objects: dict[tuple[str, str, str, str], dict[str, Any]] = {}  # (group, plural, ns, name)
        self.requests: list[tuple[str, str]] = []  # (method, path) of every call
        self._lock = threading.Lock()
        self._rv = 0
        self._server = None
        self._thread = None
        self.url = ""

    # ----------------------------------------------------------------- test controls

    def key(self, api_version: str, kind: str, namespace: str, name: str) -> tuple[str, str, str, str]:
        group, _, version = api_version.rpartition("/")
        return group, self.served[(group, version)][kind], namespace, name

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict | None:
        with self._lock:
            found = self.objects.get(self.key(api_version, kind, namespace, name))
            return copy.deepcopy(found)

    def set_status(self, api_version: str, kind: str, namespace: str, name: str, status: dict) -> None:
        """What the operator does: merge ``status`` into the object's status."""
        with self._lock:
            obj = self.objects[self.key(api_version, kind, namespace, name)]
            obj["status"] = {**(obj.get("status") or {}), **status}
            obj["metadata"]["resourceVersion"] = self._next_rv()

    def remove(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        """What ``kubectl delete`` does."""
        with self._lock:
            self.objects.pop(self.key(api_version, kind, namespace, name), None)

    def write_kubeconfig(self, path: Path, *, token: str | None = None) -> Path:
        """A kubeconfig with one context pointing at this server."""
        user = {"token": token if token is not None else self.token} if (token or self.token) else {}
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": user}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester", "namespace": "default"}}],
        }
        Path(path).write_text(yaml.safe_dump(config))
        return Path(path)

    # ----------------------------------------------------------------- serving

    def start(self) -> str:
        import uvicorn

        port = free_port()
        self._server = uvicorn.Server(uvicorn.Config(self.app(), host="127.0.0.1", port=port, log_level="warning",
                                                     lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, name="fake-kube", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the fake API server did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._thread.join(10)

    # ----------------------------------------------------------------- the API

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def app(self):
        from fastapi import FastAPI, Request
        from fastapi.responses import JSONResponse

        api = FastAPI()

        def reply(body: dict, code: int = 200) -> JSONResponse:
            return JSONResponse(body, status_code=code)

        def fail(code: int, reason: str, message: str, details: dict | None = None) -> JSONResponse:
            return reply(_status(code, reason, message, details), code)

        @api.middleware("http")
        async def auth(request: Request, call_next):
            self.requests.append((request.method, request.url.path))
            if self.token is not None and request.headers.get("authorization") != f"Bearer {self.token}":
                return fail(401, "Unauthorized", "Unauthorized")
            return await call_next(request)

        @api.get("/version")
        def version():
            return {"major": "1", "minor": "31", "gitVersion": "v1.31.0-fake"}

        @api.get("/apis")
        def groups():
            by_group: dict[str, list[str]] = {}
            for group, version in self.served:
                by_group.setdefault(group, []).append(version)
            out = []
            for group, versions in by_group.items():
                listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
                out.append({"name": group, "versions": listed, "preferredVersion": listed[-1]})
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": out}

        @api.get("/apis/{group}/{version}")
        def resources(group: str, version: str):
            kinds = self.served.get((group, version))
            if kinds is None:
                return fail(404, "NotFound", "the server could not find the requested resource")
            listed = []
            for kind, plural in kinds.items():
                listed.append({"name": plural, "singularName": kind.lower(), "namespaced": True, "kind": kind,
                               "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]})
                listed.append({"name": f"{plural}/status", "singularName": "", "namespaced": True, "kind": kind,
                               "verbs": ["get", "patch", "update"]})
            return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}",
                    "resources": listed}

        def kind_of(group: str, version: str, plural: str) -> str | None:
            return next((k for k, p in self.served.get((group, version), {}).items() if p == plural), None)

        base = "/apis/{group}/{version}/namespaces/{namespace}/{plural}"

        def guard(group, version, namespace, plural):
            kind = kind_of(group, version, plural)
            if kind is None:
                return None, fail(404, "NotFound", "the server could not find the requested resource")
            if namespace in self.forbidden:
                return None, fail(403, "Forbidden", f'{plural}.{group} is forbidden: User "tester" cannot access '
                                                    f'resource "{plural}" in API group "{group}" in the namespace '
                                                    f'"{namespace}"')
            return kind, None

        @api.get(base)
        def list_objects(group: str, version: str, namespace: str, plural: str):
            kind, error = guard(group, version, namespace, plural)
            if error:
                return error
            with self._lock:
                items = [copy.deepcopy(o) for (g, p, ns, _n), o in self.objects.items()
                         if (g, p, ns) == (group, plural, namespace)]
            return {"apiVersion": f"{group}/{version}", "kind": f"{kind}List",
                    "metadata": {"resourceVersion": str(self._rv)}, "items": items}

        @api.get(base + "/{name}")
        @api.get(base + "/{name}/status")
        def get_object(group: str, version: str, namespace: str, plural: str, name: str):
            _kind, error = guard(group, version, namespace, plural)
            if error:
                return error
            with self._lock:
                obj = self.objects.get((group, plural, namespace, name))
                if obj is None:
                    return fail(404, "NotFound", f'{plural}.{group} "{name}" not found',
                                {"name": name, "group": group, "kind": plural})
                return copy.deepcopy(obj)

        @api.delete(base + "/{name}")
        def delete_object(group: str, version: str, namespace: str, plural: str, name: str):
            _kind, error = guard(group, version, namespace, plural)
            if error:
                return error
            with self._lock:
                obj = self.objects.pop((group, plural, namespace, name), None)
            if obj is None:
                return fail(404, "NotFound", f'{plural}.{group} "{name}" not found')
            return reply({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                          "details": {"name": name, "group": group, "kind": plural, "uid": obj["metadata"]["uid"]}})

        @api.patch(base + "/{name}/status")
        async def patch_status(request: Request, group: str, version: str, namespace: str, plural: str, name: str):
            _kind, error = guard(group, version, namespace, plural)
            if error:
                return error
            if request.headers.get("content-type", "").split(";")[0] != "application/merge-patch+json":
                return fail(415, "UnsupportedMediaType", "only merge patches of status are supported here")
            patch = json.loads(await request.body())
            with self._lock:
                obj = self.objects.get((group, plural, namespace, name))
                if obj is None:
                    return fail(404, "NotFound", f'{plural}.{group} "{name}" not found')
                obj["status"] = {**(obj.get("status") or {}), **(patch.get("status") or {})}
                obj["metadata"]["resourceVersion"] = self._next_rv()
                return copy.deepcopy(obj)

        @api.patch(base + "/{name}")
        async def apply(request: Request, group: str, version: str, namespace: str, plural: str, name: str):
            kind, error = guard(group, version, namespace, plural)
            if error:
                return error
            ctype = request.headers.get("content-type", "").split(";")[0]
            if ctype != "application/apply-patch+yaml":
                return fail(415, "UnsupportedMediaType", f"this fake serves server-side apply only, not {ctype}")
            query = request.query_params
            manager = query.get("fieldManager")
            if not manager:
                return fail(400, "BadRequest", "PATCH with application/apply-patch+yaml requires a fieldManager")
            dry_run = query.get("dryRun") == "All"
            force = query.get("force") == "true"
            try:
                body = yaml.safe_load(await request.body())
            except yaml.YAMLError as exc:
                return fail(400, "BadRequest", f"the body is not YAML: {exc}")
            problem = _identity_problem(body, group, version, kind, namespace, name)
            if problem:
                return fail(400, "BadRequest", problem)
            causes = self._causes(body)
            if causes:
                listed = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
                return fail(422, "Invalid", f'{kind}.{group} "{name}" is invalid: [{listed}]',
                            {"name": name, "group": group, "kind": kind, "causes": causes})
            with self._lock:
                key = (group, plural, namespace, name)
                before = self.objects.get(key)
                if before is not None and not force:
                    owners = {m["manager"] for m in before["metadata"].get("managedFields") or []}
                    if owners - {manager}:
                        return fail(409, "Conflict", f"Apply failed with conflicts: fields are managed by "
                                                     f"{', '.join(sorted(owners - {manager}))}")
                after = self._merged(before, body, manager, f"{group}/{version}")
                if not dry_run:
                    self.objects[key] = after
                return reply(copy.deepcopy(after), 201 if before is None else 200)

        return api

    def _causes(self, obj: dict) -> list[dict]:
        from infra.crds import validate

        causes = []
        for error in validate(obj, self.crd_dir):
            _file, _, rest = error.partition(": ")
            field, _, message = rest.partition(": ")
            cause = {"reason": "FieldValueInvalid", "field": field, "message": message or rest}
            if cause not in causes:  # the same error from two releases' CRDs is reported once
                causes.append(cause)
        return causes

    def _merged(self, before: dict | None, applied: dict, manager: str, api_version: str) -> dict:
        """The object after ``manager`` applies ``applied`` (its labels, annotations and spec)."""
        meta = applied.get("metadata") or {}
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if before is None:
            out = {"apiVersion": api_version, "kind": applied["kind"],
                   "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": str(uuid.uuid4()),
                                "creationTimestamp": now, "generation": 1}}
            changed = True
        else:
            out = copy.deepcopy(before)
            watched = lambda o: ((o.get("metadata") or {}).get("labels"), (o.get("metadata") or {}).get("annotations"),  # noqa: E731
                                 o.get("spec"))
            changed = watched(before) != watched(applied)
            if before.get("spec") != applied.get("spec"):
                out["metadata"]["generation"] = before["metadata"]["generation"] + 1
        for field in ("labels", "annotations"):
            if meta.get(field):
                out["metadata"][field] = dict(meta[field])
            else:
                out["metadata"].pop(field, None)
        out["apiVersion"] = api_version
        out["spec"] = copy.deepcopy(applied.get("spec"))
        if changed:
            out["metadata"]["resourceVersion"] = self._next_rv()
            out["metadata"]["managedFields"] = [{"manager": manager, "operation": "Apply", "apiVersion": api_version,
                                                 "time": now, "fieldsType": "FieldsV1"}]
        return out


def _identity_problem(body: Any, group: str, version: str, kind: str, namespace: str, name: str) -> str | None:
    if not isinstance(body, dict):
        return "the body must be an object"
    if body.get("apiVersion") != f"{group}/{version}" or body.get("kind") != kind:
        return (f"the API version and kind in the data ({body.get('apiVersion')} {body.get('kind')}) do not match "
                f"the request ({group}/{version} {kind})")
    meta = body.get("metadata") or {}
    if meta.get("name") != name:
        return f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
    if meta.get("namespace") not in (None, namespace):
        return "the namespace of the provided object does not match the namespace sent on the request"
    body.setdefault("metadata", {})["namespace"] = namespace
    return None
