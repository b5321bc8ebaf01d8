"""`slaplan serve` and `slaplan worker` check their options while parsing them: a bad value is a
usage error (exit 2, one line naming the option) before any setting is read or any database
touched."""

from __future__ import annotations

import pytest

from api.cli import build_parser, main


@pytest.fixture(autouse=True)
def _empty_workdir(tmp_path, monkeypatch):
    """Run in an empty directory with no SLAPLAN_* variables but a broker (the worker needs one)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLAPLAN_BROKER_URL", "redis://127.0.0.1:6379/11")
    return tmp_path


def _refused(capsys, argv: list[str]) -> str:
    """The error line of ``slaplan ARGV``, which must exit 2 through argparse."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


SERVE_LEVELS = "(choose from 'critical', 'error', 'warning', 'info', 'debug', 'trace')"


@pytest.mark.parametrize("argv,says", [
    (["--log-level", "bogus"], f"argument --log-level: invalid choice: 'bogus' {SERVE_LEVELS}"),
    (["--log-level", ""], f"argument --log-level: invalid choice: '' {SERVE_LEVELS}"),
    (["--concurrency", "-3"], "argument --concurrency: must be a positive whole number, got '-3'"),
    (["--concurrency", "0"], "argument --concurrency: must be a positive whole number, got '0'"),
    (["--port", "99999"], "argument --port: must be a TCP port from 1 to 65535, got '99999'"),
    (["--port", "-5"], "argument --port: must be a TCP port from 1 to 65535, got '-5'"),
    (["--port", "0"], "argument --port: must be a TCP port from 1 to 65535, got '0'"),
    (["--port", "http"], "argument --port: must be a TCP port from 1 to 65535, got 'http'"),
    (["--processes", "0"], "argument --processes: must be a positive whole number, got '0'"),
    (["--processes", "2", "--worker", "yes"], "--processes: more than one API process needs a broker "
     "(SLAPLAN_BROKER_URL) and --worker no or auto: the embedded worker and its queue live in one process"),
])
def test_serve_refuses_bad_options_before_migrating(capsys, _empty_workdir, argv, says):
    assert _refused(capsys, ["serve", *argv]) == f"slaplan serve: error: {says}"
    assert list(_empty_workdir.iterdir()) == []  # no database was created, let alone migrated


@pytest.mark.parametrize("given,level", [("trace", "trace"), ("WARNING", "warning"), ("Debug", "debug")])
def test_serve_takes_every_uvicorn_level_in_any_case(given, level):
    from uvicorn.config import LOG_LEVELS

    args = build_parser().parse_args(["serve", "--log-level", given, "--port", "65535", "--concurrency", "1"])
    assert args.log_level == level and level in LOG_LEVELS
    assert (args.port, args.concurrency) == (65535, 1)


@pytest.mark.parametrize("argv,says", [
    (["--concurrency", "-1"], "argument --concurrency: must be a positive whole number, got '-1'"),
    (["--concurrency", "0"], "argument --concurrency: must be a positive whole number, got '0'"),  # once: the default
    (["--loglevel", "bogus"], "argument --loglevel: invalid choice: 'BOGUS' "
                              "(choose from 'DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL', 'FATAL')"),
    (["--queues", ","], "argument --queues: no queue given; known: plan, bench"),
    (["--queues", ""], "argument --queues: no queue given; known: plan, bench"),
    (["--queues", "plan,nope"], "argument --queues: unknown queue(s) nope; known: plan, bench"),
])
def test_worker_refuses_bad_options(capsys, argv, says):
    assert _refused(capsys, ["worker", *argv]) == f"slaplan worker: error: {says}"


def test_worker_takes_celery_levels_in_any_case_and_trims_queues():
    args = build_parser().parse_args(["worker", "--loglevel", "warning", "--queues", " bench , ,plan", "--concurrency", "3"])
    assert (args.loglevel, args.queues, args.concurrency) == ("WARNING", ["bench", "plan"], 3)
    assert build_parser().parse_args(["worker"]).queues == ["plan", "bench"]


def test_serve_refuses_tls_options_it_cannot_use(capsys, _empty_workdir):
    from certificates import self_signed

    cert, key = self_signed(_empty_workdir)
    (_empty_workdir / "other").mkdir()
    _other_cert, other_key = self_signed(_empty_workdir / "other")
    pair = "slaplan serve: error: --tls-cert-file and --tls-private-key-file go together: give both"
    assert _refused(capsys, ["serve", "--tls-cert-file", str(cert)]) == pair
    assert _refused(capsys, ["serve", "--tls-private-key-file", str(key)]) == pair
    assert _refused(capsys, ["serve", "--tls-cert-file", str(_empty_workdir / "absent.pem")]) == (
        f"slaplan serve: error: argument --tls-cert-file: not a readable file: '{_empty_workdir / 'absent.pem'}'")
    mismatch = _refused(capsys, ["serve", "--tls-cert-file", str(cert), "--tls-private-key-file", str(other_key)])
    assert mismatch.startswith("slaplan serve: error: --tls-cert-file/--tls-private-key-file: cannot use them: ")
    assert {p.name for p in _empty_workdir.iterdir()} == {"cert.pem", "key.pem", "other"}  # no database


def test_serve_refuses_several_processes_without_a_broker(capsys, _empty_workdir, monkeypatch):
    monkeypatch.delenv("SLAPLAN_BROKER_URL")
    assert _refused(capsys, ["serve", "--processes", "3"]).startswith("slaplan serve: error: --processes: more than one")
    assert list(_empty_workdir.iterdir()) == []
