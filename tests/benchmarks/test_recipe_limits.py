"""Decode limits read from the recipes a benchmark repository's master config names
(benchmarks/recipe_limits.py), against a real git repository made for the test."""

from __future__ import annotations

import subprocess

import yaml

from tests.benchmark_scripts import load

recipe_limits = load("recipe_limits")


def _entry(clients: list[int], decode_workers: int, decode_dp: bool, recipe: str, spec: str | None = None) -> dict:
    space = {"conc-list": clients,
             "prefill": {"num-worker": 1, "tp": 8, "ep": 8, "dp-attn": True,
                         "additional-settings": [f"CONFIG_FILE={recipe}"]},
             "decode": {"num-worker": decode_workers, "tp": 8, "ep": 8, "dp-attn": decode_dp}}
    return space | ({"spec-decoding": spec} if spec else {})


def _repo(tmp_path, spaces: list[dict], date: str):
    repo = tmp_path / "bench"
    config = repo / recipe_limits.CONFIG
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump({"dsr1-fp8-gb200-dynamo-trt": {
        "disagg": True, "seq-len-configs": [{"isl": 8192, "osl": 1024, "search-space": spaces}]}}))
    env = {"GIT_AUTHOR_DATE": f"{date}T12:00:00", "GIT_COMMITTER_DATE": f"{date}T12:00:00",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "config"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)
    return repo


def _row(clients: int, decode_workers: int, decode_dp: int, measured: str = "2026-02-05") -> dict:
    return {"provenance": f"db; config_id=1; measured={measured}T00:00:00.000Z", "model": "deepseek-ai/DeepSeek-V3",
            "gpu": "gb200", "backend": "trtllm", "precision": "fp8", "mode": "disagg", "isl": "8192", "osl": "1024",
            "concurrency": str(clients), "p_workers": "1", "p_tp": "1", "p_attn_dp": "8", "d_workers": str(decode_workers),
            "d_tp": "1" if decode_dp > 1 else "8", "d_attn_dp": str(decode_dp)}


def test_limits_come_from_the_recipe_in_force_for_the_rows_engines(tmp_path):
    repo = _repo(tmp_path, [
        _entry([6], 3, False, "recipes/gb200-fp8/8k1k/stp/ctx1_gen3_tep8_batch1_eplb0_mtp0_6.yaml"),
        _entry([6], 3, False, "recipes/gb200-fp8/8k1k/mtp/ctx1_gen3_tep8_batch2_eplb0_mtp3_6.yaml", spec="mtp"),
        _entry([18], 3, False, "recipes/gb200-fp8/8k1k/stp/ctx1_gen3_tep8_batch4_eplb0_mtp0_18.yaml"),
        _entry([512], 1, True, "recipes/gb200-fp8/8k1k/stp/ctx1_gen1_dep8_batch64_eplb0_mtp0_512.yaml"),
        _entry([40], 1, True, "recipes/gb200-fp8/8k1k/stp/ctx1_gen1_dep8_batch8_eplb0_mtp0.yaml"),
        _entry([40], 1, True, "recipes/gb200-fp8/8k1k/stp/ctx1_gen1_dep8_batch16_eplb0_mtp0.yaml"),
    ], "2026-02-01")
    rows = [_row(6, 3, 1), _row(18, 3, 1), _row(512, 1, 8), _row(40, 1, 8), _row(24, 3, 1),
            _row(6, 3, 1, measured="2026-01-20")]
    found = recipe_limits.limits(repo, rows)
    # the speculative-decoding recipe is not the row's; a dep engine holds the batch on each rank;
    # two recipes with different limits, no recipe at those clients, or no config yet: no limit
    assert [(r["concurrency"], r["max_batch"], r["decode_batch_per_rank"], r["decode_attn_dp"]) for r in found] == [
        ("6", 1, 1, 1), ("18", 4, 4, 1), ("512", 512, 64, 8)]
    assert all(r["url"].startswith(f"https://github.com/{recipe_limits.REPO}/blob/") for r in found)
    assert found[0]["recipe"].endswith("batch1_eplb0_mtp0_6.yaml") and "Apache-2.0" in found[0]["licence"]
