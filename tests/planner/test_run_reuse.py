"""The rule that picks which stored runs a new online search reuses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from planner import online as search
from planner import plan
from planner.request import parse_dgdr
from planner.run_reuse import RunWorkload, StoredRun, reusable, unit_settings

WORKLOAD = RunWorkload(model="m", gpu="g", backend="vllm", engine="local emulator speed=0.25 slaplan=0.1.0",
                       isl_tokens=100, osl_tokens=20, distribution="D(100,20)", harness="genai-bench 1 min")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _run(unit: str, clients: int, ttft_ms: float = 10.0, *, workload: str | None = None, settings: str | None = None,
         at: int = 0) -> StoredRun:
    return StoredRun(workload=workload or WORKLOAD.key(), unit=unit, settings=settings or unit, concurrency=clients,
                     points=({"concurrency": clients, "ttft_ms": ttft_ms, "itl_ms": 5.0, "output_tok_s": 100.0},),
                     source="default/first", measured_at=T0 + timedelta(seconds=at))


def _same(run):
    return run[0] if run[0] in {"agg tp1", "agg tp2"} else None


def test_only_runs_of_the_same_workload_settings_and_clients_are_reused():
    other_workload = WORKLOAD.model_copy(update={"engine": "local emulator speed=0.5 slaplan=0.1.0"}).key()
    stored = [_run("agg tp1", 1), _run("agg tp1", 4), _run("agg tp2", 4, workload=other_workload),
              _run("agg tp2", 1, settings="another max_batch"), _run("agg tp1", 16), _run("disagg tp1+tp1", 1)]
    assert set(reusable(stored, WORKLOAD.key(), _same, (1, 4))) == {("agg tp1", 1), ("agg tp1", 4)}
    assert reusable(stored, other_workload, _same, (1, 4)) == {("agg tp2", 4): stored[2]}


def test_the_newest_of_a_run_stored_twice_wins():
    old, new = _run("agg tp1", 4, 10.0, at=0), _run("agg tp1", 4, 12.0, at=5)
    assert reusable([new, old], WORKLOAD.key(), _same, (4,)) == {("agg tp1", 4): new}


def test_the_running_sequence_limit_counts_only_up_to_the_clients():
    body = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeploymentRequest", "metadata": {"name": "r"},
            "spec": {"modelName": "meta-llama/Llama-3.1-8B-Instruct", "backend": "vllm",
                     "sla": {"ttft": 1500, "itl": 100, "isl": 100, "osl": 20}, "gpu": {"type": "a100_sxm"}}}
    unit = next(iter(search.units(plan(parse_dgdr(body)).candidates).values()))
    limit = unit.engines[0].max_batch
    lower = unit.model_copy(update={"engines": (unit.engines[0].model_copy(update={"max_batch": limit - 1}),
                                                *unit.engines[1:])})
    assert unit_settings(unit, limit - 1) == unit_settings(lower, limit - 1)  # neither limit binds
    assert unit_settings(unit, limit) != unit_settings(lower, limit)  # the lower limit binds at `limit` clients
    other_precision = unit.model_copy(update={"kv_dtype": "fp8" if unit.kv_dtype != "fp8" else "fp16"})
    assert unit_settings(unit, 1) != unit_settings(other_precision, 1)
