"""The app of each API process of ``slaplan serve --processes N``. uvicorn starts those processes
afresh and builds their app by importing ``create`` by name, so what the parent knows reaches
them through the environment: the settings (``SLAPLAN_*``, the database exported by the parent)
and ``OPTIONS_ENV``, the listen address and log level."""

from __future__ import annotations

import json
import logging
import os

OPTIONS_ENV = "_SLAPLAN_SERVE_OPTIONS"  # JSON {"listen_host": str, "log_level": int}, set by the parent


def options(listen_host: str, log_level: int) -> str:
    """The value of ``OPTIONS_ENV`` for processes listening on ``listen_host``, logging at ``log_level``."""
    return json.dumps({"listen_host": listen_host, "log_level": log_level})


def create():
    """One API process's app: the API and its dispatcher, no worker (several dispatchers share
    the outbox through the database; see ``workers.dispatcher``)."""
    from api.app import create_app
    from api.commands.serving_heap import prepare_to_serve
    from infra.settings import load_settings

    given = json.loads(os.environ[OPTIONS_ENV])
    logging.basicConfig(level=given["log_level"], format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(load_settings(), listen_host=given["listen_host"])
    prepare_to_serve()
    return app
