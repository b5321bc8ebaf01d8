"""The service's settings: one frozen model, read from the environment by ``load_settings``.

Nothing is read at import time; every entry point calls ``load_settings()`` once and passes
the result down.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

DEFAULT_DATABASE_URL = "sqlite:///slaplan.db"
DEFAULT_MAX_BODY_BYTES = 1024 * 1024


class Settings(BaseModel):
    """Where the state lives, where work is queued, and how the API protects itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    database_url: str = Field(
        default=DEFAULT_DATABASE_URL,
        description="SQLAlchemy URL; a relative SQLite path is resolved against the working directory",
    )
    broker_url: str | None = Field(
        default=None, description="Celery broker (e.g. redis://host:6379/0); None = embedded, in-process"
    )
    api_token: SecretStr | None = Field(default=None, description="bearer token required by mutating calls")
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, gt=0, description="largest request body accepted")
    cluster: Literal["none", "kubeconfig", "in-cluster", "auto"] = Field(
        default="none",
        description="where autoApply deploys: none (never), a kubeconfig, the pod's service account, or auto "
        "(in-cluster inside a pod, else the kubeconfig)",
    )
    kubeconfig: str | None = Field(default=None, description="kubeconfig path (None: $KUBECONFIG or ~/.kube/config)")
    kube_context: str | None = Field(default=None, description="kubeconfig context (None: its current context)")
    deploy_check_seconds: float = Field(default=15.0, gt=0, description="how often an applied deployment is checked")

    @property
    def embedded(self) -> bool:
        """True when no broker is configured: API and worker share one process."""
        return self.broker_url is None


def load_settings(env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
    """Build settings from ``SLAPLAN_*`` variables of ``env`` (default: the process environment).

    Keyword ``overrides`` win over the environment (tests and CLI flags use them).
    """
    env = os.environ if env is None else env
    values: dict[str, object] = {}
    if env.get("SLAPLAN_DATABASE_URL"):
        values["database_url"] = env["SLAPLAN_DATABASE_URL"]
    if env.get("SLAPLAN_BROKER_URL"):
        values["broker_url"] = env["SLAPLAN_BROKER_URL"]
    if env.get("SLAPLAN_API_TOKEN"):
        values["api_token"] = env["SLAPLAN_API_TOKEN"]
    if env.get("SLAPLAN_MAX_BODY_BYTES"):
        values["max_body_bytes"] = int(env["SLAPLAN_MAX_BODY_BYTES"])
    if env.get("SLAPLAN_KUBECONFIG"):
        values["kubeconfig"] = env["SLAPLAN_KUBECONFIG"]
        values["cluster"] = "kubeconfig"
    if env.get("SLAPLAN_CLUSTER"):
        values["cluster"] = env["SLAPLAN_CLUSTER"]
    if env.get("SLAPLAN_KUBE_CONTEXT"):
        values["kube_context"] = env["SLAPLAN_KUBE_CONTEXT"]
    if env.get("SLAPLAN_DEPLOY_CHECK_SECONDS"):
        values["deploy_check_seconds"] = float(env["SLAPLAN_DEPLOY_CHECK_SECONDS"])
    values.update(overrides)
    return Settings(**values)
