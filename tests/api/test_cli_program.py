"""The ``slaplan`` program (``api.cli.program``: console script and ``python -m api.cli``) against
``api.cli.main`` in-process: a run that registers one sub-command shows the same usage, and a
``plan`` that ends the process at once (no interpreter teardown) prints, writes and exits as
``main`` does. The collector held during start-up (``api.commands.start_up``) is restarted,
and an in-process caller's collector is left as it was."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from api.cli import COMMANDS, build_parser, main
from paths import ROOT
from procs import SLAPLAN

EXAMPLE = ROOT / "examples" / "llama-70b-h200.dgdr.yaml"
INFEASIBLE = """apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeploymentRequest
metadata: {name: tight}
spec:
  modelName: meta-llama/Llama-3.1-70B-Instruct
  backend: vllm
  sla: {ttft: 1, itl: 1, isl: 2000, osl: 300}
  gpu: {type: h100_sxm, maxNumGPUsPerEngine: 8}
"""


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_one_registered_command_shows_the_usage_of_all(command):
    assert build_parser(command).format_help() == build_parser().format_help()
    assert build_parser(command).format_usage() == build_parser().format_usage()


def test_registering_one_command_imports_no_other_command_module():
    code = ("import sys\nfrom api.cli import build_parser\nbuild_parser('plan')\n"
            "import json\nprint(json.dumps(sorted(m for m in sys.modules if m.startswith('api.commands.'))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                          timeout=120)
    loaded = set(json.loads(done.stdout))
    assert "api.commands.plan" in loaded
    assert not loaded & {f"api.commands.{name}" for name in COMMANDS if name != "plan"}


@pytest.mark.parametrize("text,code", [(None, 0), (INFEASIBLE, 2), ("kind: [", 1)])
def test_the_program_prints_writes_and_exits_as_main_does(tmp_path, capsys, text, code):
    source = EXAMPLE
    if text is not None:
        source = tmp_path / "request.yaml"
        source.write_text(text)
    env = {"PATH": "/usr/bin:/bin", "XDG_DATA_HOME": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([*SLAPLAN, "plan", str(source), "--out", str(tmp_path / "a"), "--target", "all"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == code, done.stderr
    monkey = pytest.MonkeyPatch()
    monkey.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    try:
        assert main(["plan", str(source), "--out", str(tmp_path / "b"), "--target", "all"]) == code
    finally:
        monkey.undo()
    printed = capsys.readouterr()
    assert done.stdout.replace(str(tmp_path / "a"), "OUT") == printed.out.replace(str(tmp_path / "b"), "OUT")
    assert done.stderr.replace(str(tmp_path / "a"), "OUT") == printed.err.replace(str(tmp_path / "b"), "OUT")
    if code != 1:
        assert _files(tmp_path / "a") == _files(tmp_path / "b") and _files(tmp_path / "a")
        assert json.loads((tmp_path / "a" / f"{'tight' if text else 'llama-70b-h200'}.plan.json").read_text())


def test_the_collector_held_for_start_up_is_restarted_with_start_up_objects_frozen():
    code = ("import gc\nfrom api.commands import start_up\nstart_up.hold()\nheld = gc.isenabled()\n"
            "start_up.loaded()\nprint(held, gc.isenabled(), gc.get_freeze_count() > 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                          timeout=60)
    assert done.stdout.split() == ["False", "True", "True"]


def test_an_in_process_caller_keeps_its_collector(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    frozen = gc.get_freeze_count()
    assert main(["plan", str(EXAMPLE), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    assert gc.isenabled() and gc.get_freeze_count() == frozen
