"""``slaplan plan``: the documented CLI contract (files written, exit codes, all-or-nothing)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from api.cli import main
from paths import ROOT

EXAMPLES = ROOT / "examples"
CRD_DIR = ROOT.parent / "shared" / "crds"

DGDR = """apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeploymentRequest
metadata: {{name: {name}}}
spec:
  modelName: {model}
  backend: vllm
  sla: {{ttft: {ttft}, itl: {itl}, isl: 2000, osl: 300}}
  gpu: {{type: h100_sxm, maxNumGPUsPerEngine: 4}}
"""


def _write(tmp: Path, name: str, model="meta-llama/Llama-3.1-8B-Instruct", ttft=500, itl=30) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(DGDR.format(name=name, model=model, ttft=ttft, itl=itl))
    return path


def test_examples_plan_and_write_valid_dgds(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["plan", *map(str, sorted(EXAMPLES.glob("*.yaml"))), "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "chosen:" in printed and "TTFT = frontend" in printed
    for path in sorted(EXAMPLES.glob("*.yaml")):
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        plan = json.loads((out / f"{name}.plan.json").read_text())
        assert plan["feasible"] is True and plan["mode"] in ("agg", "disagg")
        assert plan["total_gpus"] > 0 and plan["predicted"]["ttft_ms"] > 0
        predicted = plan["predicted"]  # where the time goes, adding up to the totals (rounded to 1e-4 ms)
        assert sum(predicted["ttft_parts"].values()) == pytest.approx(predicted["ttft_ms"], abs=1e-3)
        assert sum(predicted["itl_parts"].values()) == pytest.approx(predicted["itl_ms"], abs=1e-3)
        roles = ("engine",) if plan["mode"] == "agg" else ("prefill", "decode")
        for role in roles:
            assert {"tp", "pp", "dp", "ep", "gpus", "replicas"} <= set(plan[role])
        dgd = yaml.safe_load((out / f"{name}.dgd.yaml").read_text())
        assert dgd["kind"] == "DynamoGraphDeployment"
        if CRD_DIR.is_dir():
            from infra.crds import validate

            assert validate(dgd, CRD_DIR) == []


def test_infeasible_exit_code_and_reason(tmp_path):
    path = _write(tmp_path, "too-fast", itl=0.5)
    rc = main(["plan", str(path), "--out", str(tmp_path / "o"), "--quiet"])
    assert rc == 2
    plan = json.loads((tmp_path / "o" / "too-fast.plan.json").read_text())
    assert plan["feasible"] is False and "ITL" in plan["reason"]
    assert not (tmp_path / "o" / "too-fast.dgd.yaml").exists()


@pytest.mark.parametrize("broken, field", [
    ("apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeploymentRequest\nmetadata: {name: x}\n"
     "spec: {backend: vllm, sla: {ttft: 1, itl: 1}, gpu: {type: h100_sxm}}\n", "spec.modelName"),
    ("apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeploymentRequest\nmetadata: {name: x}\n"
     "spec: {modelName: m, sla: {ttft: -1, itl: 1}, gpu: {type: h100_sxm}}\n", "spec.sla.ttft"),
    ("apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeploymentRequest\nmetadata: {name: x}\n"
     "spec: {modelName: meta-llama/Llama-3.1-8B, sla: {ttft: 1, itl: 1}, gpu: {type: h900}}\n", "spec.gpu.type"),
    ("apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeploymentRequest\nmetadata: {name: x}\n"
     "spec: {modelName: no-such/model, sla: {ttft: 1, itl: 1}, gpu: {type: h100_sxm}}\n", "spec.modelName"),
    ("apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeploymentRequest\nmetadata: {name: x\nspec: [\n", "line"),
])
def test_invalid_input_names_the_field_and_writes_nothing(tmp_path, capsys, monkeypatch, broken, field):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # an unknown model id is looked up on the Hub: fail fast
    good = _write(tmp_path, "good")
    bad = tmp_path / "bad.yaml"
    bad.write_text(broken)
    out = tmp_path / "o"
    rc = main(["plan", str(good), str(bad), "--out", str(out)])
    assert rc == 1
    assert field in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir()), "nothing is written when any input is invalid"


def test_json_format_and_v1beta1(tmp_path):
    path = _write(tmp_path, "fmt")
    rc = main(["plan", str(path), "--out", str(tmp_path / "o"), "--format", "json", "--api-version", "v1beta1",
               "--quiet"])
    assert rc == 0
    dgd = json.loads((tmp_path / "o" / "fmt.dgd.json").read_text())
    assert dgd["apiVersion"] == "nvidia.com/v1beta1"
    if CRD_DIR.is_dir():
        from infra.crds import validate

        assert validate(dgd, CRD_DIR) == []


def test_many_files_in_parallel(tmp_path):
    paths = [_write(tmp_path, f"r{i}", ttft=400 + 50 * i) for i in range(4)]
    rc = main(["plan", *map(str, paths), "--out", str(tmp_path / "o"), "--workers", "2", "--quiet"])
    assert rc == 0
    assert sorted(p.name for p in (tmp_path / "o").glob("*.plan.json")) == [f"r{i}.plan.json" for i in range(4)]


# --- bad input found by fuzzing: one line naming the field or option, nothing written -------------


def _errors(capsys) -> list[str]:
    """The error lines ``plan`` printed (each must be one line: no traceback)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return [line for line in err.splitlines() if line.startswith("error: ")]


@pytest.mark.parametrize("value", ["1000000000", "99999999999999999999"])
def test_absurd_engine_size_is_refused_at_once(tmp_path, capsys, value):
    """Planning time grew with maxNumGPUsPerEngine (100000 took 22 s; 1e9 never finished)."""
    path = tmp_path / "huge.yaml"
    path.write_text(DGDR.format(name="huge", model="meta-llama/Llama-3.1-8B-Instruct", ttft=500, itl=30)
                    .replace("maxNumGPUsPerEngine: 4", f"maxNumGPUsPerEngine: {value}"))
    rc = main(["plan", str(path), "--out", str(tmp_path / "o")])
    assert rc == 1
    assert _errors(capsys) == [f"error: {path}: spec.gpu.maxNumGPUsPerEngine: must be at most 1024"]
    assert not (tmp_path / "o").exists()


def test_oversized_input_is_refused_naming_file_and_limit(tmp_path, capsys):
    from api.commands.plan import MAX_MANIFEST_BYTES

    big = tmp_path / "big.yaml"
    big.write_text(DGDR.format(name="big", model="m/m", ttft=1, itl=1) + "#" * MAX_MANIFEST_BYTES + "\n")
    rc = main(["plan", str(big), "--out", str(tmp_path / "o")])
    assert rc == 1
    assert _errors(capsys) == [f"error: {big}: larger than 1 MiB: not a DGDR manifest"]
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_endless_input_is_read_only_up_to_the_limit(tmp_path, capsys):
    assert main(["plan", "/dev/zero", "--out", str(tmp_path / "o")]) == 1
    assert _errors(capsys) == ["error: /dev/zero: larger than 1 MiB: not a DGDR manifest"]


def test_non_utf8_file_and_stdin_get_the_same_one_line_error(tmp_path, capsys, monkeypatch):
    raw = b"apiVersion: nvidia.com/v1alpha1\nkind: \xff\xfe\n"
    path = tmp_path / "binary.yaml"
    path.write_bytes(raw)
    assert main(["plan", str(path), "--out", str(tmp_path / "o")]) == 1
    from_file = _errors(capsys)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(raw)))
    assert main(["plan", "-", "--out", str(tmp_path / "o")]) == 1
    from_stdin = _errors(capsys)
    message = ": not UTF-8 text (byte 39): a DGDR manifest is YAML or JSON"
    assert from_file == [f"error: {path}{message}"] and from_stdin == [f"error: <stdin>{message}"]
    assert not (tmp_path / "o").exists()


def test_longest_valid_names_get_short_distinct_file_names(tmp_path, capsys):
    """253 characters is a valid name, but '<name>.dgd.yaml' was too long a file name (OSError
    after the other requests' files were written)."""
    names = ["a" * 253, "a" * 252 + "b"]
    paths = [tmp_path / f"long{i}.yaml" for i in range(2)]
    for path, name in zip(paths, names):
        path.write_text(DGDR.format(name=name, model="meta-llama/Llama-3.1-8B-Instruct", ttft=500, itl=30))
    out = tmp_path / "o"
    assert main(["plan", *map(str, paths), "--out", str(out), "--quiet", "--target", "all"]) == 0
    files = sorted(p.name for p in out.iterdir())
    assert len(files) == 2 * 5 and all(len(f) <= 255 for f in files)
    plans = sorted(json.loads(p.read_text())["name"] for p in out.glob("*.plan.json"))
    assert plans == sorted(names)
    assert "error" not in capsys.readouterr().err


def test_file_stems_are_the_name_or_a_deterministic_short_form():
    from api.commands.plan import MAX_STEM, file_stem

    assert file_stem("llama-70b") == "llama-70b" and file_stem("a" * MAX_STEM) == "a" * MAX_STEM
    long = file_stem("a" * 253)
    assert long == file_stem("a" * 253) != file_stem("a" * 252 + "b")
    assert len(long) == MAX_STEM and long.startswith("a" * (MAX_STEM - 9) + "-")


def test_nothing_is_written_until_every_request_is_planned(tmp_path, capsys):
    """A file that cannot be written is one line naming it; earlier files were written before (an
    existing plan.json was overwritten by a run that then failed)."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "first.plan.json").write_text("kept")
    (out / "second.dgd.yaml").mkdir()  # cannot be replaced by a file
    paths = [_write(tmp_path, "first"), _write(tmp_path, "second")]
    assert main(["plan", *map(str, paths), "--out", str(out), "--quiet"]) == 1
    assert _errors(capsys) == [f"error: cannot write {out / 'second.dgd.yaml'}: Is a directory"]
    assert (out / "first.plan.json").read_text() == "kept"
    assert sorted(p.name for p in out.iterdir()) == ["first.plan.json", "second.dgd.yaml"]  # no temporary files


def test_model_name_that_cannot_be_a_path_is_not_a_path(tmp_path, capsys):
    path = _write(tmp_path, "longmodel", model="x/" + "y" * 100_000)
    assert main(["plan", str(path), "--out", str(tmp_path / "o")]) == 1
    (error,) = _errors(capsys)
    assert error.startswith(f"error: {path}: longmodel: spec.modelName (v1beta1: spec.model): 'x/yyy")
    assert "(100002 characters) is not a catalog model" in error and len(error) < 2000


def _out_cases(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "afile").write_text("")
    cases = {"": "error: --out: must name a directory (use . for the working directory)",
             str(tmp_path / "afile"): f"error: --out {tmp_path / 'afile'}: cannot be the output directory: "
                                      "exists and is not a directory",
             str(tmp_path / "afile" / "sub"): f"error: --out {tmp_path / 'afile' / 'sub'}: cannot be the output "
                                              "directory: Not a directory"}
    if Path("/proc/self").is_dir():
        cases["/proc/nope"] = "error: --out /proc/nope: cannot be the output directory: No such file or directory"
    return cases


def test_unusable_out_is_refused_before_planning(tmp_path, capsys):
    path = _write(tmp_path, "outs")
    for out, expected in _out_cases(tmp_path).items():
        assert main(["plan", str(path), "--out", out]) == 1, out
        printed = capsys.readouterr()
        assert printed.err == expected + "\n" and printed.out == "", "nothing planned"
    assert not (tmp_path / "outs.plan.json").exists() and not Path("outs.plan.json").exists()


@pytest.mark.parametrize("option, value", [("--top", "0"), ("--top", "-1"), ("--workers", "0"), ("--workers", "-1")])
def test_top_and_workers_must_be_positive(tmp_path, capsys, option, value):
    path = _write(tmp_path, "opts")
    assert main(["plan", str(path), "--out", str(tmp_path / "o"), option, value]) == 1
    assert _errors(capsys) == [f"error: {option}: must be at least 1 (got {value})"]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("argv, says", [
    (["--top", "x"], "argument --top: invalid int value: 'x'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--format", "toml"], "argument --format: invalid choice: 'toml'"),  # the choices' quoting varies by Python
])
def test_usage_errors_exit_1_not_the_infeasible_2(tmp_path, capsys, argv, says):
    path = _write(tmp_path, "usage")
    with pytest.raises(SystemExit) as exit_:
        main(["plan", str(path), "--out", str(tmp_path / "o"), *argv])
    assert exit_.value.code == 1
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"slaplan plan: error: {says}")
    assert not (tmp_path / "o").exists()


def test_written_files_get_the_permissions_of_any_new_file(tmp_path, capsys):
    """Written through temporary files, which are private (0600): the files are not."""
    path = _write(tmp_path, "perms")
    assert main(["plan", str(path), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    (tmp_path / "o" / "reference").write_text("")
    expected = (tmp_path / "o" / "reference").stat().st_mode & 0o777
    assert {p.stat().st_mode & 0o777 for p in (tmp_path / "o").glob("perms.*")} == {expected}


def test_top_shows_that_many_candidates(tmp_path, capsys):
    path = _write(tmp_path, "top")
    assert main(["plan", str(path), "--out", str(tmp_path / "o"), "--top", "2"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line[2:3] in ("→", "✓", "✗")]
    assert len(rows) == 2


def test_workers_never_exceed_the_cpus_or_the_requests():
    import os

    from api.commands.plan import _workers

    cpus = os.cpu_count() or 1
    assert _workers(1000, 1000) == cpus and _workers(1000, 1) == 1 and _workers(None, 3) == 1
    assert _workers(None, 1000) == cpus and _workers(1, 1000) == 1


def test_yaml_that_would_silently_change_the_request_is_refused(tmp_path, capsys):
    dup = _write(tmp_path, "dup")
    dup.write_text(dup.read_text() + "spec: {}\n")
    sixty = _write(tmp_path, "sixty")
    sixty.write_text(sixty.read_text().replace("isl: 2000", "isl: 1:30"))
    assert main(["plan", str(dup), str(sixty), "--out", str(tmp_path / "o")]) == 1
    assert _errors(capsys) == [
        f"error: {dup}: invalid YAML at line 9, column 1: duplicate key 'spec' (first at line 4)",
        f"error: {sixty}: spec.sla.isl: must be an integer"]
    assert not (tmp_path / "o").exists()


def test_kthena_group_chooses_the_modelserving_group_and_its_scaling(tmp_path, capsys):
    """The example (a budget, no load stated) plans a replica range: the seed's group (the default)
    keeps the replicas fixed, the current one adds the AutoscalingPolicy, and the table says which."""
    from api.commands.arguments import KTHENA_GROUPS

    path = EXAMPLES / "llama-70b-h200.dgdr.yaml"
    kinds, scaling = {}, {}
    for label, option in (("default", []), *((g, ["--kthena-group", g]) for g in KTHENA_GROUPS)):
        out = tmp_path / label
        assert main(["plan", str(path), "--out", str(out), "--target", "kthena", *option]) == 0
        objects = list(yaml.safe_load_all((out / "llama-70b-h200.kthena.yaml").read_text()))
        kinds[label] = [(o["apiVersion"], o["kind"]) for o in objects]
        scaling[label] = next(line for line in capsys.readouterr().out.splitlines() if "autoscaling range" in line)
    legacy, current = KTHENA_GROUPS
    assert kinds["default"] == kinds[legacy] == [(f"{legacy}/v1alpha1", "ModelServing")]
    assert kinds[current] == [(f"{current}/v1alpha1", "ModelServing"), (f"{current}/v1alpha1", "AutoscalingPolicy")]
    assert scaling[legacy].endswith(f"fixed at the planned count for ome, kthena {legacy}")
    assert f"kthena {current} (an AutoscalingPolicy" in scaling[current]
    assert scaling[current].endswith("fixed at the planned count for ome")


def test_unknown_kthena_group_names_the_option_as_the_api_names_its_field(tmp_path, capsys):
    path = _write(tmp_path, "group")
    with pytest.raises(SystemExit) as exit_:
        main(["plan", str(path), "--out", str(tmp_path / "o"), "--kthena-group", "volcano.sh"])
    assert exit_.value.code == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "slaplan plan: error: argument --kthena-group: must be one of workload.volcano.sh, "
        "workload.serving.volcano.sh, not 'volcano.sh'")
    assert not (tmp_path / "o").exists()
