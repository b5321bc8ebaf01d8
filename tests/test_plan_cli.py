"""``slaplan plan``: the documented CLI contract (files written, exit codes, all-or-nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from api.cli import main

ROOT = Path(__file__).resolve().parent.parent
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
