"""Decode engines' running-sequence limits of the calibration data's disaggregated rows, from the
recipes InferenceX ran them with.

The calibration data's ``d_bs`` is the clients per decode engine (or per attention rank), not the
engine's limit. InferenceX (SemiAnalysis; its benchmark repository, Apache-2.0) lists, per
deployment in ``.github/configs/nvidia-master.yaml``, the clients it measures and the recipe it
runs (``CONFIG_FILE``): TensorRT-LLM recipes are named for their decode ``max_batch_size``
(``ctx1_gen3_tep8_batch4_…``: three TP-8 decode engines of at most 4 running sequences; ``dep``
engines hold that many per attention-DP rank). This script reads that file at the last commit on
or before each disaggregated row's measurement date (``measured=`` in its provenance) and writes
the limit of every row a recipe describes: same model, GPU, precision and engine, lengths,
clients, prefill and decode workers and engine shapes, and no speculative decoding (the rows
record none). A row two recipes describe with different limits is left out. Only a limit (a
fact) is carried over, with the file's commit and URL and the licence.

    python benchmarks/recipe_limits.py INFERENCEX_GIT_DIR [--data CSV] [--out CSV]

INFERENCEX_GIT_DIR: a clone of SemiAnalysisAI/InferenceX (its history is read with ``git``).
"""

from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from api.commands.calibrate import LIMIT_KEY, default_data_path, read_rows  # noqa: E402

REPO = "SemiAnalysisAI/InferenceX"
CONFIG = ".github/configs/nvidia-master.yaml"
LICENCE = "limits from the recipes of SemiAnalysisAI/InferenceX (Apache-2.0)"
# Calibration data's model id -> InferenceX model prefix; backend -> disaggregated framework.
PREFIXES = {"deepseek-ai/DeepSeek-V3": "dsr1", "moonshotai/Kimi-K2.5": "kimik2.5"}
FRAMEWORKS = {"trtllm": "dynamo-trt", "sglang": "dynamo-sglang", "vllm": "dynamo-vllm"}
BATCH = re.compile(r"_batch(\d+)_")
COLUMNS = (*LIMIT_KEY, "model", "gpu", "backend", "precision", "max_batch", "decode_batch_per_rank",
           "decode_attn_dp", "recipe", "config", "url", "licence")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def config_at(repo: Path, date: str) -> str:
    """The commit of the master config in force on ``date`` (YYYY-MM-DD)."""
    return _git(repo, "log", "-1", "--format=%H", f"--before={date}T23:59:59", "--", CONFIG).strip()


def _shape(role: dict) -> tuple[int, int, bool]:
    """(workers, GPUs per engine, attention DP) of one role of a search-space entry."""
    return int(role["num-worker"]), int(role["tp"]), bool(role.get("dp-attn"))


def recipes(repo: Path, commit: str) -> dict[tuple, set[tuple[int, str]]]:
    """(deployment name, ISL, OSL, clients, prefill shape, decode shape) -> {(decode batch per
    rank, recipe)} of the speculative-decoding-free entries whose recipe is named for its batch."""
    import yaml

    found: dict[tuple, set[tuple[int, str]]] = {}
    for name, entry in yaml.safe_load(_git(repo, "show", f"{commit}:{CONFIG}")).items():
        if not isinstance(entry, dict) or not entry.get("disagg"):
            continue
        for lengths in entry.get("seq-len-configs") or []:
            for space in lengths.get("search-space") or []:
                if space.get("spec-decoding", "none") != "none":
                    continue
                prefill, decode = space["prefill"], space["decode"]
                files = [s.split("=", 1)[1] for role in (prefill, decode)
                         for s in role.get("additional-settings") or [] if s.startswith("CONFIG_FILE=")]
                batch = BATCH.search(files[0]) if files else None
                if not batch:
                    continue
                for clients in space.get("conc-list") or []:
                    key = (name, int(lengths["isl"]), int(lengths["osl"]), int(clients), _shape(prefill), _shape(decode))
                    found.setdefault(key, set()).add((int(batch.group(1)), files[0]))
    return found


def _row_key(row: dict) -> tuple | None:
    """The ``recipes`` key a disaggregated row with worker counts would have, or None."""
    prefix = PREFIXES.get(row["model"])
    if row.get("mode") != "disagg" or not row.get("p_workers") or not prefix:
        return None
    name = f"{prefix}-{row['precision']}-{row['gpu'].removesuffix('_sxm')}-{FRAMEWORKS[row['backend']]}"

    def shape(p: str) -> tuple[int, int, bool]:
        dp = int(row[f"{p}attn_dp"] or 1)
        return int(row[f"{p}workers"]), dp if dp > 1 else int(row[f"{p}tp"]), dp > 1

    return (name, int(row["isl"]), int(row["osl"]), int(float(row["concurrency"])), shape("p_"), shape("d_"))


def limits(repo: Path, rows: list[dict]) -> list[dict]:
    """One output row per calibration row a single recipe limit describes."""
    out, cache = [], {}
    for row in rows:
        key, measured = _row_key(row), re.search(r"measured=(\d{4}-\d\d-\d\d)", row.get("provenance", ""))
        if key is None or not measured:
            continue
        commit = config_at(repo, measured.group(1))
        if not commit:  # measured before the config existed
            continue
        if commit not in cache:
            cache[commit] = recipes(repo, commit)
        found = cache[commit].get(key, set())
        if len({batch for batch, _ in found}) != 1:
            continue
        batch, recipe = sorted(found)[0]
        dp = key[5][1] if key[5][2] else 1
        out.append({**{k: row[k] for k in LIMIT_KEY}, **{k: row[k] for k in ("model", "gpu", "backend", "precision")},
                    "max_batch": batch * dp, "decode_batch_per_rank": batch, "decode_attn_dp": dp, "recipe": recipe,
                    "config": f"{REPO}:{CONFIG}@{commit[:12]}",
                    "url": f"https://github.com/{REPO}/blob/{commit}/{CONFIG}", "licence": LICENCE})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", help="a git clone of SemiAnalysisAI/InferenceX")
    parser.add_argument("--data", help="calibration CSV (default: ../shared/data next to the repository)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "data" / "recipe_limits.csv"))
    args = parser.parse_args(argv)
    path = Path(args.data) if args.data else default_data_path()
    if path is None:
        print("error: --data: calibration data not found", file=sys.stderr)
        return 1
    written = limits(Path(args.repo), read_rows(path))
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(written)
    print(f"wrote {args.out}: {len(written)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
