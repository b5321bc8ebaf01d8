"""Settings from the environment: the broker's visibility timeout reaches Celery; bad values
are refused with the variable's name, by ``load_settings`` and by the CLI."""

from __future__ import annotations

import os
import subprocess

import pytest

from infra.settings import SettingsError, load_settings
from procs import SLAPLAN
from workers.celery_app import make_celery


def test_visibility_timeout_reaches_the_redis_transport():
    settings = load_settings({"SLAPLAN_BROKER_URL": "redis://127.0.0.1:6379/11", "SLAPLAN_BROKER_VISIBILITY_TIMEOUT": "7200"})
    assert settings.broker_visibility_timeout_s == 7200
    app = make_celery(settings)
    assert app.conf.broker_transport_options["visibility_timeout"] == 7200


def test_visibility_timeout_defaults_to_an_hour_and_is_redis_only():
    redis_app = make_celery(load_settings({"SLAPLAN_BROKER_URL": "redis://127.0.0.1:6379/11"}))
    assert redis_app.conf.broker_transport_options["visibility_timeout"] == 3600
    embedded = make_celery(load_settings({}))
    assert "visibility_timeout" not in embedded.conf.broker_transport_options


@pytest.mark.parametrize("value", ["soon", "0", "-5"])
def test_bad_visibility_timeout_names_the_variable(value):
    with pytest.raises(SettingsError, match="SLAPLAN_BROKER_VISIBILITY_TIMEOUT") as info:
        load_settings({"SLAPLAN_BROKER_VISIBILITY_TIMEOUT": value})
    assert repr(value) in str(info.value)


def test_override_errors_name_the_keyword():
    with pytest.raises(SettingsError, match="max_body_bytes"):
        load_settings({}, max_body_bytes=0)


def test_the_token_is_never_echoed_in_errors():
    with pytest.raises(SettingsError) as info:
        load_settings({"SLAPLAN_API_TOKEN": "s3cret", "SLAPLAN_MAX_BODY_BYTES": "big"})
    assert "SLAPLAN_MAX_BODY_BYTES" in str(info.value) and "s3cret" not in str(info.value)


def test_cli_refuses_a_bad_setting_in_one_line(tmp_path):
    env = {**os.environ, "SLAPLAN_BROKER_VISIBILITY_TIMEOUT": "soon", "SLAPLAN_DATABASE_URL": f"sqlite:///{tmp_path}/x.db"}
    done = subprocess.run([*SLAPLAN, "migrate"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "SLAPLAN_BROKER_VISIBILITY_TIMEOUT" in done.stderr and "Traceback" not in done.stderr
