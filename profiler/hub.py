"""Load a model's architecture by catalog name, local config.json or Hugging Face id.

The I/O edge of the model catalog: reads files and, for names the catalog does not know,
fetches ``config.json`` from the Hugging Face Hub (cached by ``huggingface_hub``; honours
``HF_HUB_OFFLINE``). Failures become ModelError with a readable message.

A name that arrives over the network must not reach the server's files: callers pass the
directories local models may lie under (``local_roots``); a path outside them is only a name,
and fails as any unknown name does, without the file system being consulted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from profiler.model.errors import ModelError, UnknownName
from profiler.model.model_catalog import is_hub_id, model_from_config, model_names, resolve_model
from profiler.model.models import Model

_TRUE = {"1", "true", "yes", "on"}
# org/name; the Hub allows at most 96 characters each (huggingface_hub.utils.validate_repo_id).
# Largest config.json read (bytes). Real ones are a few KB, quantised ones with module lists
# some hundred KB; anything larger is not a model config and is refused unread.
MAX_CONFIG_BYTES = 4 * 1024 * 1024


def _read_config(path: Path) -> dict:
    """The JSON object of ``path``, reading at most ``MAX_CONFIG_BYTES`` (+1 to see it is larger)."""
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ModelError("model", f"cannot read {path}: {exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ModelError("model", f"{path} is larger than {MAX_CONFIG_BYTES} bytes: not a model config")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ModelError("model", f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ModelError("model", f"{path} is not valid JSON: {exc}") from None


def _allowed_path(name: str, local_roots: Sequence[str | Path] | None) -> bool:
    """Whether ``name`` may be looked up as a local path: any name when ``local_roots`` is None
    (the command line: the user's own files), else only an absolute path under one of them
    (decided on the text alone; ``..`` is normalised away first)."""
    if local_roots is None:
        return True
    if not os.path.isabs(name):
        return False
    path = Path(os.path.normpath(name))
    return any(path.is_relative_to(os.path.normpath(root)) for root in local_roots)


def _inside(path: Path, local_roots: Sequence[str | Path] | None) -> bool:
    """Whether ``path``, its links followed, still lies under one of ``local_roots`` (None: anywhere)."""
    if local_roots is None:
        return True
    real = path.resolve()
    return any(real.is_relative_to(Path(root).resolve()) for root in local_roots)


def _local_config(name_or_path: str, local_roots: Sequence[str | Path] | None) -> Path | None:
    """The config.json a local path names (the file itself or one inside a directory); None for a
    name that is no existing path, cannot be one (too long, an unknown ``~user``) or lies outside
    ``local_roots`` (see ``_allowed_path``)."""
    if not _allowed_path(name_or_path, local_roots):
        return None
    path = Path(os.path.expanduser(name_or_path) if local_roots is None else name_or_path)
    try:
        is_dir, is_file = path.is_dir(), path.is_file()
    except OSError:
        return None
    if is_dir:
        candidate = path / "config.json"
        if not candidate.is_file() or not _inside(candidate, local_roots):
            raise ModelError("model", f"directory {path} holds no config.json")
        return candidate
    return path if is_file and _inside(path, local_roots) else None


def _shown(name: str) -> str:
    """``name`` quoted for a message, its start only when it is long."""
    return repr(name) if len(name) <= 100 else f"{name[:60]!r}… ({len(name)} characters)"


def _fetch_config(repo_id: str) -> dict:
    """config.json of a Hub repository; ModelError on any failure."""
    def fail(reason: str) -> ModelError:
        return ModelError("model", f"{repo_id} is not in the catalog and could not be fetched: "
                                   f"{reason}; known: {', '.join(model_names())}")

    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise fail("the huggingface_hub package is not installed") from None
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE
    try:
        path = hf_hub_download(repo_id, "config.json", local_files_only=offline)
    except Exception as exc:  # network, auth, missing repo, offline cache miss, bad id
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        detail = f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__
        if offline:
            detail = f"offline mode (HF_HUB_OFFLINE) and no cached copy ({detail})"
        raise fail(detail) from None
    return _read_config(Path(path))


def _unknown(name: str, local_roots: Sequence[str | Path] | None) -> ModelError:
    """The error for a name that is neither in the catalog nor a Hub id (nor an allowed path)."""
    local = ", a local config.json" if local_roots is None else ", an allowed model directory" if local_roots else ""
    return ModelError("model", f"{_shown(name)} is not a catalog model{local} or a Hugging Face id (org/name); "
                               f"known: {', '.join(model_names())}")


def check_model_name(name: str, *, local_roots: Sequence[str | Path]) -> None:
    """ModelError unless ``name`` could name a model: a catalog name, a Hub id or a path under
    ``local_roots``, judged on the text alone (no file, no network), with the message
    ``load_model`` would give. For requests checked when they arrive."""
    try:
        resolve_model(name)
        return
    except UnknownName:
        pass
    if not (_allowed_path(name, local_roots) or is_hub_id(name)):
        raise _unknown(name, local_roots)


def load_model(name_or_path: str, *, local_roots: Sequence[str | Path] | None = None) -> tuple[Model, str]:
    """(Model, weights precision) for a local config path, a catalog name or a Hub id.

    Order: an existing local ``config.json`` (or a directory holding one) is parsed; a name
    the catalog resolves (``resolve_model``) needs no network; anything else is fetched from
    the Hugging Face Hub. The precision comes from the name for catalog models and from
    ``quantization_config`` / the checkpoint dtype for parsed configs.

    ``local_roots``: where local paths may lie. None (the default, for the command line) is
    anywhere; a request from the network passes the directories its operator allows (``()``:
    none), and a path elsewhere is then treated, and fails, as any other unknown name.
    """
    local = _local_config(name_or_path, local_roots)
    if local is not None:
        config = _read_config(local)
        named = str(config.get("_name_or_path") or "") if isinstance(config, dict) else ""
        hf_id = named if is_hub_id(named) else (local.resolve().parent.name or "local")
        model = model_from_config(config, hf_id)
        return model, model.native_precision
    try:
        return resolve_model(name_or_path)
    except UnknownName:
        pass
    repo_id = name_or_path.strip()
    if not is_hub_id(repo_id):
        raise _unknown(name_or_path, local_roots)
    model = model_from_config(_fetch_config(repo_id), repo_id)
    return model, model.native_precision
