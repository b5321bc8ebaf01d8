"""Deployments and decode limits read from a benchmark repository's master config and the recipes
it names (benchmarks/recipe_deployments.py), against a real git repository made for the test."""

from __future__ import annotations

import subprocess

import yaml

from tests.benchmark_scripts import load

recipe_deployments = load("recipe_deployments")


def _entry(clients: list[int], decode_workers: int, decode_dp: bool, recipe: str | None,
           spec: str | None = None) -> dict:
    settings = [f"CONFIG_FILE={recipe}"] if recipe else ["SCRIPT_MODE=8k1k"]
    space = {"conc-list": clients,
             "prefill": {"num-worker": 1, "tp": 8, "ep": 8, "dp-attn": True, "additional-settings": settings},
             "decode": {"num-worker": decode_workers, "tp": 8, "ep": 8, "dp-attn": decode_dp}}
    return space | ({"spec-decoding": spec} if spec else {})


def _repo(tmp_path, spaces: list[dict], date: str, named: dict[str, list[dict]] | None = None):
    """A config of one deployment's ``spaces`` (GB200 TensorRT-LLM), or of the deployments ``named``."""
    repo = tmp_path / "bench"
    config = repo / recipe_deployments.CONFIG
    config.parent.mkdir(parents=True)
    named = named or {"dsr1-fp8-gb200-dynamo-trt": spaces}
    config.write_text(yaml.safe_dump({name: {"disagg": True, "seq-len-configs": [
        {"isl": 8192, "osl": 1024, "search-space": listed}]} for name, listed in named.items()}))
    env = {"GIT_AUTHOR_DATE": f"{date}T12:00:00", "GIT_COMMITTER_DATE": f"{date}T12:00:00",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "config"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)
    return repo


def _row(clients: int, decode_workers: int | None, decode_dp: int, measured: str = "2026-02-05") -> dict:
    """A recorded row (``decode_workers`` given) or one spelled as the dated source files spell it."""
    recorded = decode_workers is not None
    return {"provenance": f"db; measured={measured}T00:00:00.000Z", "model": "deepseek-ai/DeepSeek-V3",
            "gpu": "gb200", "backend": "trtllm", "precision": "fp8", "mode": "disagg", "isl": "8192", "osl": "1024",
            "concurrency": str(clients), "p_workers": "1" if recorded else "", "p_tp": "1" if recorded else "8",
            "p_attn_dp": "8" if recorded else "1", "d_workers": str(decode_workers) if recorded else "",
            "d_tp": "1" if decode_dp > 1 and recorded else "8", "d_attn_dp": str(decode_dp) if recorded else "1"}


def test_recipes_in_force_for_the_rows_engines_say_their_limits_and_deployments(tmp_path):
    repo = _repo(tmp_path, [
        _entry([6], 3, False, "recipes/gb200-fp8/8k1k/stp/ctx1_gen3_tep8_batch1_eplb0_mtp0_6.yaml"),
        _entry([6], 3, False, "recipes/gb200-fp8/8k1k/mtp/ctx1_gen3_tep8_batch2_eplb0_mtp3_6.yaml", spec="mtp"),
        _entry([18], 3, False, "recipes/gb200-fp8/8k1k/stp/ctx1_gen3_tep8_batch4_eplb0_mtp0_18.yaml"),
        _entry([512], 1, True, "recipes/gb200-fp8/8k1k/stp/ctx1_gen1_dep8_batch64_eplb0_mtp0_512.yaml"),
        _entry([40], 1, True, "recipes/gb200-fp8/8k1k/stp/ctx1_gen1_dep8_batch8_eplb0_mtp0.yaml"),
        _entry([40], 1, True, "recipes/gb200-fp8/8k1k/stp/ctx1_gen1_dep8_batch16_eplb0_mtp0.yaml"),
        _entry([12], 2, False, "recipes/gb200-fp8/8k1k/mtp/ctx1_gen2_tep8_batch4_eplb0_mtp3.yaml", spec="mtp"),
        _entry([70], 2, False, "recipes/gb200-fp8/8k1k/stp/ctx1_gen2_tep8_batch4_eplb0_mtp0.yaml"),
        _entry([70], 5, False, "recipes/gb200-fp8/8k1k/stp/ctx1_gen5_tep8_batch4_eplb0_mtp0.yaml"),
        _entry([30], 2, False, None),
    ], "2026-02-01")
    rows = [_row(6, 3, 1), _row(18, 3, 1), _row(512, 1, 8), _row(40, 1, 8), _row(24, 3, 1),
            _row(6, 3, 1, measured="2026-01-20"), _row(18, None, 1), _row(12, None, 1), _row(70, None, 1), _row(30, None, 1)]
    found = recipe_deployments.deployments(repo, rows)
    said = [(r["concurrency"], r.get("p_workers"), r.get("d_workers"), r.get("max_batch"), r.get("spec_tokens"))
            for r in found]
    # recorded rows gain the decode limit (a dep engine holds the batch on each rank); where
    # recipes with and without speculation both match, the limit they disagree on and the
    # speculation are not said; recipes that disagree, none at those clients, or no config yet:
    # nothing. Rows without worker counts gain the deployment, and speculation where only an MTP
    # recipe measures that load; two deployments at one load, or an entry naming no recipe: nothing.
    assert said == [("18", None, None, 4, 0), ("512", None, None, 512, 0), ("18", 1, 3, 4, 0), ("12", 1, 2, 4, 3)]
    assert (found[2]["p_attn_dp"], found[2]["d_tp"], found[2]["d_moe_ep"]) == (8, 8, 8)
    assert all(r["url"].startswith(f"https://github.com/{recipe_deployments.REPO}/blob/") for r in found)
    assert found[0]["recipe"].endswith("batch4_eplb0_mtp0_18.yaml") and "Apache-2.0" in found[0]["licence"]


def test_a_deployments_speculative_entries_listed_apart_leave_its_speculation_unsaid(tmp_path):
    plain = [_entry([16, 64], 3, False, "recipes/b200-fp8/8k1k/stp/low-latency-tep8-1p3d.yaml"),
             _entry([256], 3, False, "recipes/b200-fp8/8k1k/stp/low-latency-tep8-1p3d.yaml")]
    speculative = [_entry([16], 3, False, "recipes/b200-fp8/8k1k/mtp/low-latency-tep8-1p3d.yaml", spec="mtp"),
                   _entry([64], 1, False, "recipes/b200-fp8/8k1k/mtp/low-latency-tep8-1p1d.yaml", spec="mtp"),
                   _entry([8], 3, False, "recipes/b200-fp8/8k1k/mtp/low-latency-tep8-1p3d.yaml", spec="mtp")]
    repo = _repo(tmp_path, [], "2026-02-01", named={"dsr1-fp8-b200-dynamo-sglang": plain,
                                                     "dsr1-fp8-b200-dynamo-sglang-mtp": speculative})
    rows = [_row(c, None, 1) | {"gpu": "b200_sxm", "backend": "sglang", "model": "deepseek-ai/DeepSeek-R1"}
            for c in (16, 64, 256, 8)]
    said = [(r["concurrency"], r.get("d_workers"), r.get("spec_tokens")) for r in
            recipe_deployments.deployments(repo, rows)]
    # 16: both sweeps deploy 1p3d, speculation unknown; 64: they deploy differently, nothing;
    # 256: the plain sweep alone, no speculation; 8: only a speculative sweep naming no drafted tokens.
    assert said == [("16", 3, None), ("256", 3, 0)]


def test_drafted_tokens_the_recipe_files_state_complete_speculative_entries_named_without_them(tmp_path):
    plain = [_entry([16], 3, False, "recipes/b200-fp8/8k1k/stp/low-latency-tep8-1p3d.yaml")]
    speculative = [_entry([16, 8], 3, False, "recipes/b200-fp8/8k1k/mtp/low-latency-tep8-1p3d.yaml", spec="mtp"),
                   _entry([4], 3, False, "recipes/b200-fp8/8k1k/mtp/other-1p3d.yaml", spec="mtp")]
    repo = _repo(tmp_path, [], "2026-02-01", named={"dsr1-fp8-b200-dynamo-sglang": plain,
                                                     "dsr1-fp8-b200-dynamo-sglang-mtp": speculative})
    table = tmp_path / "speculation.csv"
    table.write_text("recipe,spec_tokens\nrecipes/b200-fp8/8k1k/mtp/low-latency-tep8-1p3d.yaml,2\n")
    rows = [_row(c, None, 1) | {"gpu": "b200_sxm", "backend": "sglang", "model": "deepseek-ai/DeepSeek-R1"}
            for c in (16, 8, 4)]
    said = [(r["concurrency"], r.get("d_workers"), r.get("spec_tokens")) for r in
            recipe_deployments.deployments(repo, rows, recipe_deployments.read_speculation(table))]
    # 16: plain and speculative sweeps both measure it, speculation still unknown; 8: only the
    # speculative sweep, its recipe file drafts 2 a step; 4: a recipe the table does not hold, nothing.
    assert said == [("16", 3, None), ("8", 3, 2)]


LAUNCHER = '''
if [ "$isl" = "1024" ] && [ "$osl" = "1024" ]; then
    if [ "$mtp_mode" = "on" ]; then
        ./submit_disagg.sh "mtp=on" "tep" 1 4 8 32 128 "0.9" 3 0 "1 2 36"
        ./submit_disagg.sh "mtp=on" "dep" 2 1 16 128 256 "0.7" 1 0 "2150"
    else
        ./submit_disagg.sh "mtp=off" "tep" 1 4 8 128 128 "0.9" 0 0 "1 2 64"
    fi
elif [ "$isl" = "8192" ] && [ "$osl" = "1024" ]; then
        ./submit_disagg.sh "mtp=off" "dep" 4 1 32 16 16 "0.7" 0 0 "256"
fi
'''


def _aggregated(isl: int, clients: int, gpus: int) -> dict:
    return {"provenance": "src; measured=2025-11-17T00:00:00.000Z", "model": "deepseek-ai/DeepSeek-R1", "gpu": "gb200",
            "backend": "trtllm", "precision": "fp4", "mode": "agg", "isl": str(isl), "osl": "1024",
            "concurrency": str(clients), "tp": str(gpus), "moe_tp": str(gpus), "moe_ep": "1", "num_gpus": str(gpus)}


def test_gb200_launch_script_sweeps_read_aggregated_rows_as_their_deployments(tmp_path):
    repo = tmp_path / "bench"
    script = repo / recipe_deployments.LAUNCHER
    script.parent.mkdir(parents=True)
    script.write_text(LAUNCHER)
    env = {"GIT_AUTHOR_DATE": "2025-11-10T12:00:00", "GIT_COMMITTER_DATE": "2025-11-10T12:00:00",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "launcher"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)
    rows = [_aggregated(1024, 8, 36), _aggregated(1024, 144, 36), _aggregated(1024, 2150, 24),
            _aggregated(8192, 256, 48), _aggregated(8192, 256, 40), {**_aggregated(1024, 2150, 24), "mode": "disagg",
                                                                 **dict.fromkeys(("p_tp", "p_attn_dp", "d_tp", "d_attn_dp"), "")}]
    found = recipe_deployments.deployments(repo, rows)
    said = [(r["concurrency"], r["mode"], r["p_workers"], r["p_attn_dp"], r["d_workers"], r["d_tp"], r["d_attn_dp"],
             r.get("max_batch"), r.get("spec_tokens")) for r in found]
    # clients are per generation worker; a load both MTP sweeps measure gets the deployment only;
    # a row of other GPUs, or one the source already records as disaggregated, nothing
    assert said == [("8", "disagg", 1, 4, 4, 8, 1, None, None), ("144", "disagg", 1, 4, 4, 8, 1, 32, 3),
                    ("2150", "disagg", 2, 4, 1, 1, 16, 2048, 1), ("256", "disagg", 4, 4, 1, 1, 32, 512, 0)]
    assert found[0]["url"].endswith(recipe_deployments.LAUNCHER) and "Apache-2.0" in found[0]["licence"]
