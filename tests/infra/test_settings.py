"""Settings from the environment: the broker's visibility timeout reaches Celery; bad values
are refused with the variable's name, by ``load_settings`` and by the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.settings import SettingsError, load_settings, sqlite_file
from procs import SLAPLAN
from workers.celery_app import make_celery
from paths import ROOT


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


@pytest.mark.parametrize("variable,value,says", [
    ("SLAPLAN_DEPLOY_CHECK_SECONDS", "inf", "a finite number"),  # a check that never comes
    ("SLAPLAN_ONLINE_MAX_MINUTES", "nan", "a finite number"),
    ("SLAPLAN_ONLINE_MAX_MINUTES", "1e-300", "greater than or equal to 1"),
    ("SLAPLAN_ONLINE_EMULATOR_SPEED", "1e9", "less than or equal to 1000"),
    ("SLAPLAN_ONLINE_EMULATOR_SPEED", "1e-9", "greater than or equal to 0.001"),
])
def test_endless_or_degenerate_numbers_name_the_variable(variable, value, says):
    with pytest.raises(SettingsError) as info:
        load_settings({variable: value})
    assert str(info.value) == f"{variable}: Input should be {says} (got {value!r})"


@pytest.mark.parametrize("variable, value, says", [
    ("SLAPLAN_ONLINE_ENGINE_COMMAND", "llama-server --port {port} {nope}", "unknown field {nope}: the template may use "
     "{model}, {gpu}, {backend}, {tp}, {pp}, {dp}, {ep}, {max_batch}, {max_num_tokens}, {host}, {port}, {devices}, "
     "{side_port}"),
    ("SLAPLAN_ONLINE_PREFILL_COMMAND", "vllm serve {model} {role}", "unknown field {role}: the template may use"),
    ("SLAPLAN_ONLINE_ENGINE_COMMAND", "serve {} --port {port}", "unknown field {}: the template may use"),
    ("SLAPLAN_ONLINE_FRONTEND_URL", "http://{name}.{ns}:8000", "unknown field {ns}: the template may use {name}, {namespace}"),
    ("SLAPLAN_ONLINE_FRONTEND_URL", "http://{name", "not a template (expected '}' before end of string); write a literal "
     "brace as {{ or }}"),
])
def test_templates_are_checked_when_read_not_when_first_used(variable, value, says):
    """A bad template used to fail only when an online DGDR started an engine, without naming the variable."""
    with pytest.raises(SettingsError) as info:
        load_settings({variable: value})
    assert str(info.value).startswith(f"{variable}: {says}")


def test_templates_naming_known_fields_are_accepted():
    settings = load_settings({"SLAPLAN_ONLINE_ENGINE_COMMAND": "vllm serve {model} --port {port} -tp {tp} --x {{y}}",
                              "SLAPLAN_ONLINE_FRONTEND_URL": "http://{name}-frontend.{namespace}:8000"})
    assert settings.online_engine_command == "vllm serve {model} --port {port} -tp {tp} --x {{y}}"


def test_prefill_and_decode_commands_come_together():
    prefill = "vllm serve {model} --port {port} --kv-transfer-config x"
    with pytest.raises(SettingsError, match="^SLAPLAN_ONLINE_DECODE_COMMAND: set together with SLAPLAN_ONLINE_PREFILL"):
        load_settings({"SLAPLAN_ONLINE_PREFILL_COMMAND": prefill})
    with pytest.raises(SettingsError, match="^SLAPLAN_ONLINE_DECODE_COMMAND: set together"):
        load_settings({"SLAPLAN_ONLINE_DECODE_COMMAND": prefill})
    with pytest.raises(SettingsError, match="^SLAPLAN_ONLINE_DISAGG_HANDOFF: Input should be 'plain', 'vllm' or 'sglang'"):
        load_settings({"SLAPLAN_ONLINE_DISAGG_HANDOFF": "nixl"})
    both = load_settings({"SLAPLAN_ONLINE_PREFILL_COMMAND": prefill, "SLAPLAN_ONLINE_DECODE_COMMAND": prefill,
                          "SLAPLAN_ONLINE_DISAGG_HANDOFF": "vllm"})
    assert both.online_prefill_command == both.online_decode_command == prefill and both.online_disagg_handoff == "vllm"


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


@pytest.mark.parametrize("variable,value", [
    ("SLAPLAN_DATABASE_URL", "garbage"),
    ("SLAPLAN_DATABASE_URL", "mysql://user:pw@host/db"),  # a driver slaplan does not install
    ("SLAPLAN_DATABASE_URL", "postgresql://user:pw@host/db"),  # psycopg2's; slaplan uses psycopg
    ("SLAPLAN_BROKER_URL", "garbage"),
    ("SLAPLAN_BROKER_URL", "http://user:pw@host:6379"),
])
def test_unusable_database_or_broker_urls_are_refused_without_echoing_them(variable, value):
    with pytest.raises(SettingsError, match=variable) as info:
        load_settings({variable: value})
    assert value not in str(info.value)  # URLs may carry passwords
    assert "Value error" not in str(info.value)  # the validator's own words, without pydantic's prefix


def test_usable_database_and_broker_urls_are_accepted():
    settings = load_settings({"SLAPLAN_DATABASE_URL": "postgresql+psycopg://postgres@127.0.0.1:5432/x",
                              "SLAPLAN_BROKER_URL": "rediss://127.0.0.1:6380/0"})
    assert settings.broker_url == "rediss://127.0.0.1:6380/0"
    assert load_settings({"SLAPLAN_DATABASE_URL": "sqlite:////tmp/x.db"}).database_url == "sqlite:////tmp/x.db"


@pytest.mark.slow
def test_a_worker_started_without_a_hostname_runs_named_after_its_process(tmp_path, redis_url):
    # The default node name once used a key Celery does not expand, so `slaplan worker` died at start.
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("SLAPLAN_")}
    env.update(SLAPLAN_BROKER_URL=redis_url, SLAPLAN_DATABASE_URL=f"sqlite:///{tmp_path}/w.db")
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        proc = subprocess.Popen([*SLAPLAN, "worker", "--queues", "plan", "--pool", "solo", "--loglevel", "WARNING"],
                                cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        app = make_celery(load_settings({"SLAPLAN_BROKER_URL": redis_url}))
        mine = f"slaplan-{proc.pid}@"
        names: list[str] = []
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline and not any(n.startswith(mine) for n in names):
            names = [name for reply in app.control.ping(timeout=1.0) for name in reply]
        assert proc.poll() is None, log.read_text()
        assert any(n.startswith(mine) for n in names), (names, log.read_text())
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_an_unreachable_database_is_one_line_naming_the_variable(tmp_path):
    env = {**os.environ, "SLAPLAN_DATABASE_URL": "postgresql+psycopg://postgres@127.0.0.1:1/none"}
    done = subprocess.run([*SLAPLAN, "migrate"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "cannot use the database (SLAPLAN_DATABASE_URL)" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("value", ["s3cret\n", "  s3cret\r\n", "\ts3cret"])
def test_the_token_loses_surrounding_whitespace(value):
    # A Secret made from a file ends in a newline; the server strips the token it receives, so an
    # unstripped configured token refused every write.
    assert load_settings({"SLAPLAN_API_TOKEN": value}).api_token.get_secret_value() == "s3cret"


@pytest.mark.parametrize("env,overrides", [({"SLAPLAN_API_TOKEN": "\n"}, {}), ({"SLAPLAN_API_TOKEN": " \t "}, {}),
                                           ({}, {"api_token": ""})])
def test_a_token_of_only_whitespace_is_refused(env, overrides):
    with pytest.raises(SettingsError) as info:
        load_settings(env, **overrides)
    name = "api_token" if overrides else "SLAPLAN_API_TOKEN"
    assert str(info.value) == f"{name}: must not be empty or only whitespace"


@pytest.mark.parametrize("variable,value,least", [
    ("SLAPLAN_BROKER_VISIBILITY_TIMEOUT", "1e-300", "1"),  # Redis would hand every task to another worker at once
    ("SLAPLAN_BROKER_VISIBILITY_TIMEOUT", "0.5", "1"),
    ("SLAPLAN_DEPLOY_CHECK_SECONDS", "1e-300", "0.1"),  # checks the cluster without pause
    ("SLAPLAN_DEPLOY_CHECK_SECONDS", "0.05", "0.1"),
])
def test_tiny_intervals_are_refused(variable, value, least):
    with pytest.raises(SettingsError) as info:
        load_settings({variable: value})
    assert str(info.value) == f"{variable}: Input should be greater than or equal to {least} (got {value!r})"


def test_the_smallest_intervals_are_accepted():
    settings = load_settings({"SLAPLAN_BROKER_VISIBILITY_TIMEOUT": "1", "SLAPLAN_DEPLOY_CHECK_SECONDS": "0.1"})
    assert (settings.broker_visibility_timeout_s, settings.deploy_check_seconds) == (1, 0.1)


def test_the_origin_and_model_settings_are_read_from_lists():
    settings = load_settings({
        "SLAPLAN_ALLOWED_HOSTS": "Slaplan.example, [::1],10.0.0.5",
        "SLAPLAN_TRUSTED_ORIGINS": "https://slaplan.example/, http://[::1]:8080",
        "SLAPLAN_ALLOW_UNAUTHENTICATED_WRITES": "true",
        "SLAPLAN_MODEL_DIRS": os.pathsep.join(["/models", "/data/../srv/models"]),
    })
    assert settings.allowed_hosts == ("slaplan.example", "::1", "10.0.0.5")
    assert settings.trusted_origins == ("https://slaplan.example", "http://[::1]:8080")
    assert settings.allow_unauthenticated_writes is True
    assert settings.model_dirs == ("/models", "/srv/models")
    defaults = load_settings({})
    assert defaults.allowed_hosts == ("localhost", "127.0.0.1", "::1")
    assert (defaults.trusted_origins, defaults.model_dirs, defaults.allow_unauthenticated_writes) == ((), (), False)


@pytest.mark.parametrize("variable, value, says", [
    ("SLAPLAN_ALLOWED_HOSTS", "http://slaplan.example", "is not a host name or address"),
    ("SLAPLAN_ALLOWED_HOSTS", "slaplan.example:8080", "is not a host name or address"),
    ("SLAPLAN_ALLOWED_HOSTS", "cafe.de:8080", "is not a host name or address"),
    ("SLAPLAN_TRUSTED_ORIGINS", "slaplan.example", "is not an origin"),
    ("SLAPLAN_TRUSTED_ORIGINS", "https://slaplan.example/ui", "is not an origin"),
    ("SLAPLAN_MODEL_DIRS", "models", "is not an absolute path"),
])
def test_bad_origin_and_model_settings_name_the_variable(variable, value, says):
    with pytest.raises(SettingsError) as info:
        load_settings({variable: value})
    assert str(info.value).startswith(f"{variable}: ") and says in str(info.value)


def test_the_default_database_is_the_per_user_file_of_the_environment_given(tmp_path):
    data = tmp_path / "data"
    assert load_settings({"XDG_DATA_HOME": str(data)}).database_file == data / "slaplan" / "slaplan.db"
    # unset, empty or relative (the XDG specification says to ignore it): under HOME
    for env in ({}, {"XDG_DATA_HOME": ""}, {"XDG_DATA_HOME": "relative/data"}):
        settings = load_settings({**env, "HOME": str(tmp_path)})
        assert settings.database_file == tmp_path / ".local" / "share" / "slaplan" / "slaplan.db"
    assert load_settings({"XDG_DATA_HOME": str(data), "SLAPLAN_DATABASE_URL": "sqlite:////srv/s.db"}).database_file \
        == Path("/srv/s.db")


@pytest.mark.parametrize("url,file", [
    ("sqlite:///rel/s.db", Path.cwd() / "rel" / "s.db"),  # relative to the working directory, as SQLite opens it
    ("sqlite:////abs/s.db", Path("/abs/s.db")),
    ("sqlite+pysqlite:////abs/s.db", Path("/abs/s.db")),
    ("sqlite:///file:/abs/s.db?mode=ro&uri=true", Path("/abs/s.db")),
    ("sqlite://", None),  # in memory
    ("sqlite:///:memory:", None),
    ("postgresql+psycopg://u@h:5432/db", None),
])
def test_the_database_file_is_where_sqlite_opens_it(url, file):
    assert sqlite_file(url) == file


def test_settings_with_a_sqlite_database_do_not_import_sqlalchemy(tmp_path):
    """`slaplan plan` with no database to read starts without SQLAlchemy (a third of a second)."""
    code = ("import sys; from infra.settings import load_settings; "
            f"s = load_settings({{'SLAPLAN_DATABASE_URL': 'sqlite:///{tmp_path}/x.db'}}); "
            "print(s.database_exists, s.database_label, 'sqlalchemy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", f"{tmp_path}/x.db", "False"], done.stderr
