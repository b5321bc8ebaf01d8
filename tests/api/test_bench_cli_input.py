"""``slaplan bench``: a manifest or option it cannot run is refused before any endpoint is
tried, one line per field or option at fault, exit code 2."""

from __future__ import annotations

import pytest
import yaml

from api.cli import main

JOB = {"apiVersion": "ome.io/v1beta1", "kind": "BenchmarkJob", "metadata": {"name": "tiny"},
       "spec": {"endpoint": {"endpoint": {"url": "http://127.0.0.1:1", "modelName": "m", "apiFormat": "openai"}},
                "task": "text-to-text", "trafficScenarios": ["D(100,20)"], "numConcurrency": [1],
                "maxTimePerIteration": 1, "maxRequestsPerIteration": 4,
                "outputLocation": {"storageUri": "file://results"}}}


def _bench(tmp_path, job: dict, *options: str) -> int:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return main(["bench", str(path), "--offline", "--root", str(tmp_path / "root"), *options])


@pytest.mark.parametrize("change, lines", [
    ({"apiVersion": "ome.io/v1"}, ["apiVersion: must be 'ome.io/v1beta1', got 'ome.io/v1'"]),
    ({"apiVersion": None}, ["apiVersion: must be 'ome.io/v1beta1', got None"]),
    ({"kind": None}, ["kind: must be 'BenchmarkJob', got None"]),
    ({"metadata": ["tiny"]}, ["metadata: must be a mapping"]),
    ({"metadata": {"name": ["a"]}}, ["metadata.name: must be a lowercase DNS name (RFC 1123), got ['a']"]),
    ({"metadata": {"name": "Not_A_Name"}},
     ["metadata.name: must be a lowercase DNS name (RFC 1123), got 'Not_A_Name'"]),
])
def test_a_manifest_that_is_not_a_benchmarkjob_names_each_field(tmp_path, capsys, change, lines):
    code = _bench(tmp_path, {**JOB, **change})
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {line}" for line in lines]
    assert not (tmp_path / "root").exists()  # nothing was run


def test_manifest_and_spec_errors_are_reported_together(tmp_path, capsys):
    job = {**JOB, "kind": "Job", "spec": {**JOB["spec"], "maxTimePerIteration": -1}}
    assert _bench(tmp_path, job) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "error: kind: must be 'BenchmarkJob', got 'Job'"
    assert err[1].startswith("error: spec.maxTimePerIteration: ")


@pytest.mark.parametrize("value, says", [
    ("http://[::1", "not a URL (Invalid port: ':1'): 'http://[::1'"),
    ("", "must be an http:// or https:// URL with a host, got ''"),
    ("ftp://host", "must be an http:// or https:// URL with a host, got 'ftp://host'"),
])
def test_an_endpoint_that_is_not_an_http_url_is_a_usage_error(tmp_path, capsys, value, says):
    with pytest.raises(SystemExit) as exit_:
        _bench(tmp_path, JOB, "--endpoint", value)
    assert exit_.value.code == 2
    assert f"argument --endpoint: {says}" in capsys.readouterr().err


@pytest.mark.parametrize("value, says", [("inf", "a finite number"), ("nan", "a finite number"),
                                         ("-1", "greater than or equal to 0")])
def test_a_ready_timeout_that_never_ends_names_its_option_or_variable(tmp_path, capsys, monkeypatch, value, says):
    assert _bench(tmp_path, JOB, "--ready-timeout", value) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: --ready-timeout: Input should be {says}"]
    monkeypatch.setenv("SLAPLAN_BENCH_READY_TIMEOUT", value)
    assert _bench(tmp_path, JOB) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: SLAPLAN_BENCH_READY_TIMEOUT: Input should be {says}"]


@pytest.mark.parametrize("text, says", [
    ("kind: BenchmarkJob\nkind: BenchmarkJob\n", "not a valid manifest: line 2, column 1: duplicate key 'kind' (first at line 1)"),
    ("a: &x {b: 1}\nc: *x\n", "not a valid manifest: line 2, column 4: a YAML alias (*x): anchors and aliases are "
                              "not supported, write the value out"),
    ("a: [\n", "not a valid manifest: line 2, column 1: expected the node content, but found '<stream end>'"),
    ("- 1\n", "holds no object"),
])
def test_a_job_file_is_read_as_plan_reads_manifests(tmp_path, capsys, text, says):
    path = tmp_path / "job.yaml"
    path.write_text(text)
    assert main(["bench", str(path), "--offline"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {path}: {says}"]


def test_a_job_file_that_is_not_utf8_or_too_large_is_refused_unread(tmp_path, capsys):
    from api.commands.plan import MAX_MANIFEST_BYTES

    binary, big = tmp_path / "binary.yaml", tmp_path / "big.yaml"
    binary.write_bytes(b"kind: \xff\xfe\n")
    big.write_text(yaml.safe_dump(JOB) + "#" * MAX_MANIFEST_BYTES + "\n")
    assert main(["bench", str(binary), "--offline"]) == 2
    assert main(["bench", str(big), "--offline"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {binary}: not UTF-8 text (byte 7)",
        f"error: {big}: larger than 1 MiB: not a BenchmarkJob manifest"]
