"""Load a model's architecture by catalog name, local config.json or Hugging Face id.

The I/O edge of the model catalog: reads files and, for names the catalog does not know,
fetches ``config.json`` from the Hugging Face Hub (cached by ``huggingface_hub``; honours
``HF_HUB_OFFLINE``). Failures become ModelError with a readable message.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from profiler.errors import ModelError, UnknownName
from profiler.model_catalog import model_from_config, model_names, resolve_model
from profiler.models import Model

_TRUE = {"1", "true", "yes", "on"}
# org/name; the Hub allows at most 96 characters each (huggingface_hub.utils.validate_repo_id).
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")


def _read_config(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError("model", f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ModelError("model", f"{path} is not valid JSON: {exc}") from None


def _local_config(name_or_path: str) -> Path | None:
    """The config.json a local path names (the file itself or one inside a directory); None for a
    name that is no existing path, or cannot be one (too long, an unknown ``~user``)."""
    path = Path(os.path.expanduser(name_or_path))
    try:
        is_dir, is_file = path.is_dir(), path.is_file()
    except OSError:
        return None
    if is_dir:
        candidate = path / "config.json"
        if not candidate.is_file():
            raise ModelError("model", f"directory {path} holds no config.json")
        return candidate
    return path if is_file else None


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


def load_model(name_or_path: str) -> tuple[Model, str]:
    """(Model, weights precision) for a local config path, a catalog name or a Hub id.

    Order: an existing local ``config.json`` (or a directory holding one) is parsed; a name
    the catalog resolves (``resolve_model``) needs no network; anything else is fetched from
    the Hugging Face Hub. The precision comes from the name for catalog models and from
    ``quantization_config`` / the checkpoint dtype for parsed configs.
    """
    local = _local_config(name_or_path)
    if local is not None:
        config = _read_config(local)
        named = str(config.get("_name_or_path") or "") if isinstance(config, dict) else ""
        hf_id = named if re.fullmatch(r"[\w.-]+/[\w.-]+", named) else (local.resolve().parent.name or "local")
        model = model_from_config(config, hf_id)
        return model, model.native_precision
    try:
        return resolve_model(name_or_path)
    except UnknownName:
        pass
    repo_id = name_or_path.strip()
    if not _HUB_ID.fullmatch(repo_id):
        raise ModelError("model", f"{_shown(name_or_path)} is not a catalog model, a local config.json or a "
                                  f"Hugging Face id (org/name); known: {', '.join(model_names())}")
    model = model_from_config(_fetch_config(repo_id), repo_id)
    return model, model.native_precision
