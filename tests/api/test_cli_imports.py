"""A command imports only what it uses: registering the sub-commands imports no third-party
library, and `slaplan plan` imports no service library (database, broker, cluster, web) unless
there is a database to read, nor Optuna or SciPy for a space it enumerates and closed-loop
queues. Relations, not timings: ``benchmarks/cli_startup.py`` measures the time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from api.commands.arguments import KTHENA_GROUPS, TARGETS
from planner.manifests import targets
from paths import ROOT

EXAMPLE = ROOT / "examples" / "llama-70b-h200.dgdr.yaml"
SERVICES = ("sqlalchemy", "alembic", "celery", "kombu", "redis", "kubernetes", "fastapi", "starlette", "uvicorn",
            "httpx", "psycopg")
REQUEST = """apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeploymentRequest
metadata: {{name: r}}
spec:
  model: meta-llama/Llama-3.1-8B-Instruct
  backend: vllm
  hardware: {{gpuSku: h100_sxm, totalGpus: 8}}
  workload: {{isl: 2000, osl: 200, {load}}}
  sla: {{ttft: 1000, itl: 50}}
"""
# What the example's plan needs no more of: an enumerated space (no sampler), closed loops (no M/D/c queue)
SEARCH = ("optuna", "scipy")


def _imported_by(tmp_path: Path, *argv: str) -> set[str]:
    """The modules imported by ``slaplan ARGV`` in a fresh process with its own data directory."""
    code = ("import json, sys\nfrom api.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print(json.dumps(sorted(sys.modules)), file=sys.stderr)")
    env = {"PATH": "/usr/bin:/bin", "XDG_DATA_HOME": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def _modules_after(tmp_path: Path, *argv: str) -> set[str]:
    """The top-level packages imported by ``slaplan ARGV`` (``_imported_by``)."""
    return {m.partition(".")[0] for m in _imported_by(tmp_path, *argv)}


def test_registering_the_commands_imports_no_third_party_library(tmp_path):
    loaded = _modules_after(tmp_path, "--help")
    assert not loaded & {"numpy", "pydantic", "yaml", "scipy", "optuna", *SERVICES}


def test_plan_without_a_database_imports_no_service_library(tmp_path):
    imported = _imported_by(tmp_path, "plan", str(EXAMPLE), "--out", str(tmp_path / "out"), "--quiet")
    assert (tmp_path / "out" / "llama-70b-h200.plan.json").is_file()  # it did plan
    assert not {m.partition(".")[0] for m in imported} & {*SERVICES, *SEARCH}
    # an offline plan fills no online search (its stored models are not even built), and a v1alpha1
    # DGDR needs no v1beta1 shapes
    assert {"planner.results", "planner.request.wire_v1alpha1"} <= imported
    assert not imported & {"planner.online_results", "planner.request.wire_v1beta1"}
    # with no database to read, the settings are not built (the database's location is enough), and
    # the model's full answer to `estimate` is not the planner's
    assert "infra.database_url" in imported
    assert not imported & {"infra.settings", "profiler.model.estimate_result"}


def test_plan_reads_a_database_that_exists(tmp_path):
    db = tmp_path / "s.db"
    assert _modules_after(tmp_path, "migrate", "--db", str(db)) >= {"sqlalchemy", "alembic"}
    imported = _imported_by(tmp_path, "plan", str(EXAMPLE), "--out", str(tmp_path / "out"), "--quiet", "--db", str(db))
    loaded = {m.partition(".")[0] for m in imported}
    assert "sqlalchemy" in loaded and "infra.settings" in imported
    assert not loaded & {"celery", "kubernetes", "fastapi", "optuna"}


@pytest.mark.parametrize("load,poisson", [("concurrency: 8", False), ("requestRate: 2.0", True)])
def test_scipy_is_imported_for_poisson_arrivals_only(tmp_path, load, poisson):
    """The M/D/c queue (Erlang C, scipy.special) is for Poisson arrivals; closed loops never wait in it."""
    path = tmp_path / "r.yaml"
    path.write_text(REQUEST.format(load=load))
    loaded = _modules_after(tmp_path, "plan", str(path), "--out", str(tmp_path / "out"), "--quiet")
    assert (tmp_path / "out" / "r.plan.json").is_file()
    assert ("scipy" in loaded) is poisson


def test_the_target_names_commands_offer_are_the_registry_s():
    assert TARGETS == targets.TARGETS


def test_the_kthena_groups_commands_offer_are_the_registry_s_default_first():
    assert set(KTHENA_GROUPS) == set(targets.REGISTRY["kthena"].groups) and len(KTHENA_GROUPS) == 2
    assert KTHENA_GROUPS[0] == targets.Options().kthena_group
