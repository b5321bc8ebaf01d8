"""The cluster seam: custom resources on a Kubernetes API server, through the official client.

``Cluster`` is the Protocol workers and commands depend on; ``connect`` builds the real one
from a kubeconfig (``--kubeconfig``/``--context``, ``$KUBECONFIG``, ``~/.kube/config``) or from
the service account of the pod it runs in. Tests pass a Cluster pointed at a fake API server.

Writes are server-side apply (``PATCH`` with ``application/apply-patch+yaml``) under the fixed
field manager ``slaplan``, with ``force=true``: slaplan owns the fields it renders (replicas,
engine arguments, images, labels it sets) and takes them back when someone else (``kubectl
edit``, an autoscaler) changed them; fields slaplan does not render are left to their owners.
A DGD that must keep a human's edits should not be re-applied by slaplan.

The client's ``patch_namespaced_custom_object`` returns None when an apply *creates* (HTTP 201
is missing from its response map in kubernetes 37.x), so every call here reads the raw response
(``_preload_content=False``) and parses the JSON itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol

FIELD_MANAGER = "slaplan"
REQUEST_TIMEOUT_S = (5, 30)  # (connect, read)
IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


class ClusterError(Exception):
    """A cluster call that failed, with a message fit for a user. ``transient`` errors
    (unreachable, 429, 5xx) may succeed when retried; the others will not."""

    transient = False


class NoCluster(ClusterError):
    """No cluster is configured or the configuration cannot be loaded."""


class Unreachable(ClusterError):
    """The API server did not answer, or answered with a server error."""

    transient = True


class Forbidden(ClusterError):
    """The credentials may not do this (HTTP 401/403)."""


class NotServed(ClusterError):
    """The cluster does not serve this group/version/kind: its operator (CRD) is not installed."""

    def __init__(self, group: str, version: str, kind: str, served: tuple[str, ...] = ()):
        self.group, self.version, self.kind, self.served = group, version, kind, served
        other = f" (it serves {', '.join(f'{group}/{v}' for v in served)})" if served else ""
        super().__init__(f"the cluster does not serve {group}/{version} {kind}{other}; install the operator")


class Rejected(ClusterError):
    """The API server refused the object (HTTP 400/409/422); ``causes`` name the fields."""

    def __init__(self, message: str, causes: tuple[str, ...] = ()):
        self.causes = causes
        untold = [c for c in causes if c not in message]
        super().__init__(message + (": " + "; ".join(untold) if untold else ""))


class Cluster(Protocol):
    """What slaplan needs of a cluster: discovery, get, server-side apply, delete."""

    def served(self, group: str) -> dict[str, dict[str, str]]:
        """Served versions of ``group`` (preferred first) → {kind: plural}; {} when not served."""

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""

    def apply(self, obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """Server-side apply ``obj`` (field manager ``slaplan``, forced); the object as stored
        (or as it would be stored, with ``dry_run``)."""

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> bool:
        """Delete the object; False when it did not exist."""


def split_api_version(api_version: str) -> tuple[str, str]:
    """``"nvidia.com/v1alpha1"`` → ``("nvidia.com", "v1alpha1")``."""
    group, _, version = api_version.rpartition("/")
    return group, version


def in_cluster() -> bool:
    """True inside a pod with a service account (the API server's address in the environment)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and IN_CLUSTER_TOKEN.is_file()


def connect(*, kubeconfig: str | None = None, context: str | None = None, mode: str = "auto") -> Cluster:
    """A cluster from a kubeconfig or, with ``mode="in-cluster"`` (or ``auto`` inside a pod),
    the pod's service account. Raises NoCluster when neither can be loaded."""
    import yaml
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    try:
        if mode == "in-cluster" or (mode == "auto" and kubeconfig is None and in_cluster()):
            conf = client.Configuration()
            config.load_incluster_config(client_configuration=conf)
            api = client.ApiClient(conf)
        else:
            path = kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or None
            if path is None and not Path("~/.kube/config").expanduser().is_file():
                raise NoCluster("no cluster configured: pass --kubeconfig, set KUBECONFIG, or run inside a pod")
            api = config.new_client_from_config(config_file=path, context=context, persist_config=False)
    except (ConfigException, OSError, ValueError, TypeError, yaml.YAMLError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NoCluster(f"cannot load the cluster configuration: {reason}") from None
    return KubeCluster(api)


def cluster_from_settings(settings: Any) -> Cluster | None:
    """The cluster the service deploys to, or None when ``settings.cluster`` is ``none``."""
    mode = getattr(settings, "cluster", "none")
    if mode == "none":
        return None
    return connect(kubeconfig=settings.kubeconfig, context=settings.kube_context, mode=mode)


class KubeCluster:
    """``Cluster`` on the official client's ``ApiClient`` (raw JSON in and out)."""

    def __init__(self, api_client: Any):
        from kubernetes import client

        self._api = api_client
        self._custom = client.CustomObjectsApi(api_client)
        self._apis = client.ApisApi(api_client)
        self._discovered: dict[str, dict[str, dict[str, str]]] = {}

    def _call(self, fn, *args, missing_ok: bool = False, **kwargs) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            resp = fn(*args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S, **kwargs)
        except ApiException as exc:
            if exc.status == 404 and missing_ok:
                return None
            raise _error(exc) from None
        except (HTTPError, OSError) as exc:
            host = getattr(self._api.configuration, "host", "the API server")
            raise Unreachable(f"cannot reach the Kubernetes API server at {host}: {exc}") from None
        data = resp.data
        return json.loads(data) if data else {}

    def served(self, group: str) -> dict[str, dict[str, str]]:
        if group not in self._discovered:
            groups = self._call(self._apis.get_api_versions) or {}
            versions: list[str] = []
            for g in groups.get("groups") or []:
                if g.get("name") == group:
                    preferred = (g.get("preferredVersion") or {}).get("version")
                    listed = [v["version"] for v in g.get("versions") or []]
                    versions = sorted(listed, key=lambda v: v != preferred)
            found: dict[str, dict[str, str]] = {}
            for v in versions:
                res = self._call(self._custom.get_api_resources, group, v, missing_ok=True) or {}
                found[v] = {r["kind"]: r["name"] for r in res.get("resources") or [] if "/" not in r.get("name", "/")}
            if not found:  # not installed (yet): ask again next time
                return found
            self._discovered[group] = found
        return self._discovered[group]

    def _plural(self, api_version: str, kind: str) -> tuple[str, str, str]:
        group, version = split_api_version(api_version)
        served = self.served(group)
        plural = served.get(version, {}).get(kind)
        if plural is None:
            raise NotServed(group, version, kind, tuple(v for v, kinds in served.items() if kind in kinds))
        return group, version, plural

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        group, version, plural = self._plural(api_version, kind)
        return self._call(self._custom.get_namespaced_custom_object, group, version, namespace, plural, name,
                          missing_ok=True)

    def apply(self, obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        group, version, plural = self._plural(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        return self._call(
            self._custom.patch_namespaced_custom_object, group, version, meta["namespace"], plural, meta["name"], obj,
            field_manager=FIELD_MANAGER, force=True, dry_run="All" if dry_run else None,
            _content_type="application/apply-patch+yaml",
        )

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> bool:
        group, version, plural = self._plural(api_version, kind)
        return self._call(self._custom.delete_namespaced_custom_object, group, version, namespace, plural, name,
                          missing_ok=True) is not None


def _error(exc: Any) -> ClusterError:
    """A ClusterError for an ``ApiException``, with the server's own message and causes."""
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        body = {}
    message = body.get("message") or f"HTTP {exc.status} {exc.reason or ''}".strip()
    if exc.status in (401, 403):
        return Forbidden(f"forbidden: {message}")
    if exc.status == 429 or (exc.status or 0) >= 500:
        return Unreachable(f"the API server answered {exc.status}: {message}")
    causes = tuple(f"{c.get('field', '')}: {c.get('message', '')}".strip(": ")
                   for c in (body.get("details") or {}).get("causes") or [])
    return Rejected(message, causes)
