"""The service's settings: one frozen model, read from the environment by ``load_settings``.

Nothing is read at import time; every entry point calls ``load_settings()`` once and passes
the result down. The database defaults to a per-user SQLite file (``default_database_url``),
never to one in the working directory. Importing this module and checking a SQLite URL costs no
SQLAlchemy import: ``slaplan plan`` starts fast when there is no database to read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, ValidationInfo, field_validator

from infra.database_url import check_database_url, database_exists, database_label, default_database_url, sqlite_file
from profiler.emulator.speed import MAX_SPEED, MIN_SPEED

BROKER_SCHEMES = frozenset({"redis", "rediss", "amqp", "amqps"})
UNECHOED = ("api_token", "database_url", "broker_url")  # may hold secrets: errors do not repeat them
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
DEFAULT_LIST_PAGE_ITEMS = 500  # kubectl's own chunk size
MAX_LIST_PAGE_ITEMS = 10_000
# What SLAPLAN_ONLINE_ENGINE_COMMAND (and the prefill and decode commands) may name, filled in for
# each engine it starts: ``devices`` its GPU indices on this machine (for CUDA_VISIBLE_DEVICES),
# ``side_port`` a free port of its own (a KV-transfer side channel or bootstrap server).
ENGINE_COMMAND_FIELDS = ("model", "gpu", "backend", "tp", "pp", "dp", "ep", "max_batch", "max_num_tokens", "host", "port",
                         "devices", "side_port")
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
# A host name or IPv4 address (letters, digits, dots, dashes), or * for any; IPv6: see _is_host.
_HOST = re.compile(r"\*|[a-z0-9]([a-z0-9.-]*[a-z0-9])?")
_ORIGIN = re.compile(r"https?://([a-z0-9]([a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:.]+\])(:[0-9]{1,5})?")


class Settings(BaseModel):
    """Where the state lives, where work is queued, and how the API protects itself."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # no endless waits or NaN limits

    database_url: str = Field(
        description="SQLAlchemy URL (load_settings' default: the per-user SQLite file, default_database_url); "
        "a relative SQLite path is resolved against the working directory",
    )
    broker_url: str | None = Field(
        default=None, description="Celery broker (e.g. redis://host:6379/0); None = embedded, in-process"
    )
    api_token: SecretStr | None = Field(default=None, description="bearer token required by mutating calls")
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, gt=0, description="largest request body accepted")
    require_token_for_reads: bool = Field(
        default=False,
        description="every request but the health probes needs api_token, reads too (the dashboard then "
        "needs a client that sends the token)",
    )
    list_page_items: int = Field(
        default=DEFAULT_LIST_PAGE_ITEMS,
        gt=0,
        le=MAX_LIST_PAGE_ITEMS,
        description="most objects one list response holds, whatever limit the client asks for; the rest "
        "follow with the continue token",
    )
    cluster: Literal["none", "kubeconfig", "in-cluster", "auto"] = Field(
        default="none",
        description="where autoApply deploys: none (never), a kubeconfig, the pod's service account, or auto "
        "(in-cluster inside a pod, else the kubeconfig)",
    )
    kubeconfig: str | None = Field(default=None, description="kubeconfig path (None: $KUBECONFIG or ~/.kube/config)")
    kube_context: str | None = Field(default=None, description="kubeconfig context (None: its current context)")
    deploy_check_seconds: float = Field(default=15.0, ge=0.1, description="how often an applied deployment is checked")
    allow_unauthenticated_apply: bool = Field(
        default=False,
        description="accept autoApply with a cluster configured and no api_token (anyone reaching the API could deploy)",
    )
    broker_visibility_timeout_s: float = Field(
        default=3600.0,
        ge=1,
        description="Redis broker: seconds a task taken by a worker may stay unacknowledged before Redis hands it "
        "to another worker; longer than the longest task (tasks are acknowledged when they finish)",
    )
    lease_seconds: float = Field(
        default=15.0,
        ge=1,
        le=3600,
        description="a worker's hold on the request it works on, renewed every third of it; work whose worker "
        "stopped renewing is queued again this long after the last renewal",
    )
    online_target: Literal["auto", "local", "kubernetes"] = Field(
        default="auto",
        description="where online DGDRs deploy their candidates: local engine processes, the cluster, or auto "
        "(the cluster when one is configured, else local)",
    )
    online_engine_command: str | None = Field(
        default=None,
        description="local engine command template ({model} {port} {host} {tp} …); None = slaplan's emulator",
    )
    online_prefill_command: str | None = Field(
        default=None,
        description="local command template of a disaggregated unit's prefill engine (fields as the engine "
        "command); with online_decode_command, disaggregated units run behind slaplan's local router",
    )
    online_decode_command: str | None = Field(
        default=None, validate_default=True,
        description="local command template of a disaggregated unit's decode engine")
    online_disagg_handoff: Literal["plain", "vllm", "sglang"] = Field(
        default="plain",
        description="how the local router hands a request from the prefill to the decode engine: plain (prefill "
        "one token, then decode the request; the emulator), vllm (kv_transfer_params, a KV connector such as "
        "NixlConnector), sglang (bootstrap host, port and room sent to both engines)",
    )
    online_emulator_speed: float = Field(default=1.0, ge=MIN_SPEED, le=MAX_SPEED,
                                         description="local emulators: >1 faster than the model")
    online_frontend_url: str = Field(
        default="http://{name}-frontend.{namespace}.svc.cluster.local:8000",
        description="kubernetes: where a candidate DGD's frontend answers ({name}, {namespace}); the default "
        "is the operator's service, reachable from inside the cluster",
    )
    online_max_trials: int = Field(default=8, gt=0, description="runs measured per online DGDR (a unit at one "
                                                                "concurrency each), unless it says")
    online_max_minutes: float = Field(default=240.0, ge=1, description="wall time of one online DGDR, unless it says")
    online_reuse_runs: bool = Field(default=True, description="an online DGDR reuses runs earlier online DGDRs of "
                                    "the same workload measured, unless it says")
    online_heartbeat_seconds: int = Field(
        default=60, gt=0, description="a running trial's heartbeat; one silent for twice this is failed and retried"
    )
    allowed_hosts: tuple[str, ...] = Field(
        default=LOOPBACK_HOSTS,
        description="names the Host header may give (no port; * for any): a request for another name is refused, "
        "so a web page cannot reach the API by pointing its own DNS name at this server",
    )
    trusted_origins: tuple[str, ...] = Field(
        default=(),
        description="origins (scheme://host[:port]) besides the server's own whose pages may write, e.g. the public "
        "address of a proxy that rewrites Host",
    )
    allow_unauthenticated_writes: bool = Field(
        default=False,
        description="accept writes without api_token on a server listening on a non-loopback address "
        "(anyone reaching it could create and delete objects)",
    )
    model_dirs: tuple[str, ...] = Field(
        default=(),
        description="absolute directories under which requests arriving over the network may name a local model "
        "directory; none by default: such requests name catalog or Hugging Face models only",
    )

    @field_validator("database_url")
    @classmethod
    def _database(cls, value: str) -> str:
        """A SQLAlchemy URL of a database slaplan runs on (parsed only; nothing is connected)."""
        return check_database_url(value)

    @field_validator("api_token")
    @classmethod
    def _token(cls, value: SecretStr | None) -> SecretStr | None:
        """The token without surrounding whitespace (a Secret made from a file ends in a newline);
        one that is nothing but whitespace is refused."""
        if value is None:
            return None
        token = value.get_secret_value().strip()
        if not token:
            raise ValueError("must not be empty or only whitespace")
        return SecretStr(token)

    @field_validator("broker_url")
    @classmethod
    def _broker(cls, value: str | None) -> str | None:
        """A Celery broker URL of a transport slaplan's workers can use (parsed only)."""
        scheme, sep, _ = (value or "").partition("://")
        if value is None or (sep and scheme in BROKER_SCHEMES):
            return value
        raise ValueError(f"not a broker URL: expected {', '.join(s + '://…' for s in sorted(BROKER_SCHEMES))}")

    @field_validator("allowed_hosts", "trusted_origins", mode="before")
    @classmethod
    def _split_commas(cls, value: object) -> object:
        """A comma-separated string (an environment variable) as its non-empty, lower-case items."""
        if isinstance(value, str):
            return tuple(item.strip().lower() for item in value.split(",") if item.strip())
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Host names or addresses without a port (an IPv6 address without brackets), or ``*``."""
        hosts = tuple(host.lower().removeprefix("[").removesuffix("]") for host in value)
        bad = next((host for host in hosts if not _is_host(host)), None)
        if bad is not None:
            raise ValueError(f"{bad!r} is not a host name or address (give names without scheme or port, or *)")
        return hosts

    @field_validator("trusted_origins")
    @classmethod
    def _origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Origins as browsers send them: ``http(s)://host[:port]``, no path."""
        origins = tuple(origin.lower().rstrip("/") for origin in value)
        bad = next((origin for origin in origins if not _ORIGIN.fullmatch(origin)), None)
        if bad is not None:
            raise ValueError(f"{bad!r} is not an origin: expected http(s)://host[:port]")
        return origins

    @field_validator("model_dirs", mode="before")
    @classmethod
    def _split_paths(cls, value: object) -> object:
        """A list of paths separated as in PATH (an environment variable) as its non-empty items."""
        if isinstance(value, str):
            return tuple(item for item in value.split(os.pathsep) if item.strip())
        return value

    @field_validator("model_dirs")
    @classmethod
    def _model_dirs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Absolute directories, normalised (no ``..``); the file system is not consulted."""
        relative = next((path for path in value if not os.path.isabs(path)), None)
        if relative is not None:
            raise ValueError(f"{relative!r} is not an absolute path")
        return tuple(os.path.normpath(path) for path in value)

    @field_validator("online_engine_command", "online_prefill_command", "online_decode_command")
    @classmethod
    def _engine_command(cls, value: str | None) -> str | None:
        """A command template naming only the fields a local engine is started with."""
        return value if value is None else _template(value, ENGINE_COMMAND_FIELDS)

    @field_validator("online_decode_command")
    @classmethod
    def _both_roles(cls, value: str | None, info: ValidationInfo) -> str | None:
        """The prefill and decode commands come together (one without the other runs nothing)."""
        if "online_prefill_command" in info.data and (value is None) != (info.data["online_prefill_command"] is None):
            raise ValueError("set together with SLAPLAN_ONLINE_PREFILL_COMMAND: a disaggregated unit needs both")
        return value

    @field_validator("online_frontend_url")
    @classmethod
    def _frontend_url(cls, value: str) -> str:
        """A URL template naming only a candidate deployment's ``{name}`` and ``{namespace}``."""
        return _template(value, ("name", "namespace"))

    @field_validator("require_token_for_reads")
    @classmethod
    def _reads_need_a_token(cls, value: bool, info: ValidationInfo) -> bool:
        """Reads can require the token only when there is one (``api_token`` is validated first)."""
        if value and info.data.get("api_token") is None:
            raise ValueError("needs SLAPLAN_API_TOKEN to be set")
        return value

    @property
    def embedded(self) -> bool:
        """True when no broker is configured: API and worker share one process."""
        return self.broker_url is None

    @property
    def database_file(self) -> Path | None:
        """The file of a SQLite database (None: a server's database, or SQLite in memory)."""
        return sqlite_file(self.database_url)

    @property
    def database_exists(self) -> bool:
        """False only for a SQLite file that does not exist yet: nothing is stored there to read."""
        return database_exists(self.database_url)

    @property
    def database_label(self) -> str:
        """Where the database is, for messages: a SQLite file's path, or the URL without its password."""
        return database_label(self.database_url)


def _is_host(host: str) -> bool:
    """Whether ``host`` is ``*``, a host name, or an IP address (IPv6 without brackets)."""
    import ipaddress

    if _HOST.fullmatch(host):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _template(value: str, fields: tuple[str, ...]) -> str:
    """``value`` when it is a ``str.format`` template whose fields are all among ``fields``."""
    from string import Formatter

    try:
        used = [name for _, name, _, _ in Formatter().parse(value) if name is not None]
    except ValueError as exc:
        raise ValueError(f"not a template ({exc}); write a literal brace as {{{{ or }}}}") from None
    unknown = [name for name in used if name not in fields]
    if unknown:
        raise ValueError(f"unknown field {{{unknown[0]}}}: the template may use {', '.join('{' + f + '}' for f in fields)}")
    return value


class SettingsError(ValueError):
    """A ``SLAPLAN_*`` variable with a value slaplan cannot use; the message names the variable."""


# Environment variable → settings field (values are validated by the model).
ENV_FIELDS = {
    "SLAPLAN_DATABASE_URL": "database_url",
    "SLAPLAN_BROKER_URL": "broker_url",
    "SLAPLAN_API_TOKEN": "api_token",
    "SLAPLAN_MAX_BODY_BYTES": "max_body_bytes",
    "SLAPLAN_REQUIRE_TOKEN_FOR_READS": "require_token_for_reads",
    "SLAPLAN_LIST_PAGE_ITEMS": "list_page_items",
    "SLAPLAN_KUBECONFIG": "kubeconfig",
    "SLAPLAN_CLUSTER": "cluster",
    "SLAPLAN_KUBE_CONTEXT": "kube_context",
    "SLAPLAN_DEPLOY_CHECK_SECONDS": "deploy_check_seconds",
    "SLAPLAN_ALLOW_UNAUTHENTICATED_APPLY": "allow_unauthenticated_apply",
    "SLAPLAN_BROKER_VISIBILITY_TIMEOUT": "broker_visibility_timeout_s",
    "SLAPLAN_LEASE_SECONDS": "lease_seconds",
    "SLAPLAN_ONLINE_TARGET": "online_target",
    "SLAPLAN_ONLINE_ENGINE_COMMAND": "online_engine_command",
    "SLAPLAN_ONLINE_PREFILL_COMMAND": "online_prefill_command",
    "SLAPLAN_ONLINE_DECODE_COMMAND": "online_decode_command",
    "SLAPLAN_ONLINE_DISAGG_HANDOFF": "online_disagg_handoff",
    "SLAPLAN_ONLINE_EMULATOR_SPEED": "online_emulator_speed",
    "SLAPLAN_ONLINE_FRONTEND_URL": "online_frontend_url",
    "SLAPLAN_ONLINE_MAX_TRIALS": "online_max_trials",
    "SLAPLAN_ONLINE_MAX_MINUTES": "online_max_minutes",
    "SLAPLAN_ONLINE_HEARTBEAT_SECONDS": "online_heartbeat_seconds",
    "SLAPLAN_ONLINE_REUSE_RUNS": "online_reuse_runs",
    "SLAPLAN_ALLOWED_HOSTS": "allowed_hosts",
    "SLAPLAN_TRUSTED_ORIGINS": "trusted_origins",
    "SLAPLAN_ALLOW_UNAUTHENTICATED_WRITES": "allow_unauthenticated_writes",
    "SLAPLAN_MODEL_DIRS": "model_dirs",
}


def load_settings(env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
    """Build settings from ``SLAPLAN_*`` variables of ``env`` (default: the process environment).

    Keyword ``overrides`` win over the environment (tests and CLI flags use them). Without
    SLAPLAN_DATABASE_URL (or a ``database_url`` override) the database is the per-user SQLite file
    of ``env``'s XDG_DATA_HOME or HOME. A value that does not fit raises ``SettingsError`` naming
    its variable (or keyword).
    """
    env = os.environ if env is None else env
    values: dict[str, object] = {field: env[var] for var, field in ENV_FIELDS.items() if env.get(var)}
    values.setdefault("database_url", default_database_url(env))
    if env.get("SLAPLAN_KUBECONFIG") and not env.get("SLAPLAN_CLUSTER"):
        values["cluster"] = "kubeconfig"
    values.update(overrides)
    try:
        return Settings(**values)
    except ValidationError as exc:
        fields = {f: v for v, f in ENV_FIELDS.items()}
        problems = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else ""
            name = field if field in overrides else fields.get(field, field)
            got = "" if field in UNECHOED else f" (got {values.get(field)!r})"
            problems.append(f"{name}: {error['msg'].removeprefix('Value error, ')}{got}")
        raise SettingsError("; ".join(problems)) from None
