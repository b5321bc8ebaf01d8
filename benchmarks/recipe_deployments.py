"""What the recipes InferenceX ran the calibration data's disaggregated rows with state about them:
worker counts and engine shapes, the decode engines' running-sequence limit, speculative decoding.

InferenceX (SemiAnalysis; its benchmark repository, Apache-2.0) lists, per deployment in
``.github/configs/nvidia-master.yaml``, the clients it measures, each role's workers and engine
(GPUs, expert parallelism, attention DP), whether it decodes speculatively (``spec-decoding``) and
the recipe it runs (``CONFIG_FILE``); TensorRT-LLM recipes are named for their decode
``max_batch_size`` per attention rank and their drafted tokens (``…_tep8_batch4_eplb0_mtp3``).
This script reads that file at the last commit on or before each disaggregated row's measurement
date (``measured=`` in its provenance) and matches the row to its entries: same model, GPU,
precision, engine, lengths and clients, and
- a row that records its worker counts: the same workers and engine shapes; it gains the decode
  limit (its own columns stay as they are);
- a row that does not: the same GPUs per prefill and decode engine (its source spells an engine's
  GPUs as its ``tp``); it gains the workers, the engine shapes and the limit.
Only entries that name their recipe are read (older ones run scripts that set the engines
themselves, and the config's shapes are placeholders). Entries with and without speculative
decoding that both match leave the row's speculation unknown:
only what they agree on is written; a deployment's speculative entries may be listed under a name
of their own (``dsr1-fp8-b200-dynamo-sglang-mtp``) and are matched as its entries, and one whose
recipe names no drafted tokens takes them from ``--speculation`` (``data/recipe_speculation.csv``:
the drafted tokens the recipe files themselves set, SGLang's EAGLE ``speculative-num-steps``), or
leaves the speculation unknown too. Entries that match but disagree
(another worker count, shape or limit), or only speculative ones naming no drafted tokens, leave
the row out. Only facts are carried over, with the config's commit, URL and licence.

Before GB200 deployments entered that config, InferenceX ran them from its GB200 launch script
(``runners/launch_gb200-nv.sh``), whose TensorRT-LLM sweeps call Dynamo's ``submit_disagg.sh`` with
the context workers (one 4-GPU tray each), the generation workers and their engine (``tep``: TP and
EP over its GPUs; ``dep``: attention DP and EP), ``max_batch_size`` per rank, drafted tokens, and
clients per generation worker (Dynamo's ``bench.sh`` multiplies them by the generation workers).
The dated source files record those runs as aggregated rows that spell the deployment's GPUs as
``tp``; such a row is matched by its lengths, clients and GPUs (``num_gpus``), and gains
``mode`` disagg with the deployment, as the config's entries are read (what the entries agree on).
Context engines are read as Dynamo's own GB200 configs of these sweeps deploy them: attention DP
over the tray's 4 GPUs with EP 4 (``configs/gb200/*/ctx*_gen*.yaml`` in ai-dynamo/dynamo).

    python benchmarks/recipe_deployments.py INFERENCEX_GIT_DIR [--data CSV] [--out CSV] [--speculation CSV|none]

INFERENCEX_GIT_DIR: a clone of SemiAnalysisAI/InferenceX (its history is read with ``git``).
"""

from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from api.commands.calibrate import RECIPE_COLUMNS, RECIPE_KEY, default_data_path, read_rows  # noqa: E402

REPO = "SemiAnalysisAI/InferenceX"
CONFIG = ".github/configs/nvidia-master.yaml"
LAUNCHER = "runners/launch_gb200-nv.sh"  # GB200 sweeps run before the config held them
TRAY_GPUS = 4  # GPUs of one GB200 compute tray: one context worker of the launch script's sweeps
# ./submit_disagg.sh "mtp=on" "tep" ctx gen gen_tp batch max_tokens "memory" mtp eplb "clients per gen worker"
SUBMIT = re.compile(r'submit_disagg\.sh "mtp=(?:on|off)" "(tep|dep)" (\d+) (\d+) (\d+) (\d+) \d+ "[\d.]+" (\d+) \d+ "([\d ]+)"')
LENGTHS = re.compile(r'"\$isl" = "(\d+)" \] && \[ "\$osl" = "(\d+)"')
LICENCE = "from the benchmark configuration of SemiAnalysisAI/InferenceX (Apache-2.0)"
# Calibration data's model id -> InferenceX model prefix; backend -> disaggregated framework.
PREFIXES = {"deepseek-ai/DeepSeek-R1": "dsr1", "deepseek-ai/DeepSeek-V3": "dsr1", "moonshotai/Kimi-K2.5": "kimik2.5",
            "zhipuai/GLM-5": "glm5"}
FRAMEWORKS = {"trtllm": "dynamo-trt", "sglang": "dynamo-sglang", "vllm": "dynamo-vllm"}
SPECULATIVE_SUFFIX = "-mtp"  # a deployment's entry of speculative sweeps, beside the plain one
BATCH, DRAFTED = re.compile(r"_batch(\d+)_"), re.compile(r"_mtp(\d+)")
COLUMNS = (*RECIPE_KEY, "mode", *RECIPE_COLUMNS, "recipe", "config", "url", "licence")


class Engine(NamedTuple):
    """One role of a config entry: workers, GPUs per engine, expert parallelism, attention DP."""

    workers: int
    gpus: int
    ep: int
    dp: bool

    def columns(self, prefix: str) -> dict[str, int]:
        return {f"{prefix}workers": self.workers, f"{prefix}tp": 1 if self.dp else self.gpus,
                f"{prefix}attn_dp": self.gpus if self.dp else 1, f"{prefix}moe_ep": self.ep}


class Entry(NamedTuple):
    """One deployment a config entry measures at some clients."""

    prefill: Engine
    decode: Engine
    batch: int | None  # decode max_batch_size per attention rank, when the recipe's name says
    drafted: int | None  # tokens drafted per step (0: no speculative decoding; None: not named)
    recipe: str


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def config_at(repo: Path, date: str, path: str = CONFIG) -> str:
    """The commit of ``path`` (the master config) in force on ``date`` (YYYY-MM-DD); empty before it existed."""
    return _git(repo, "log", "-1", "--format=%H", f"--before={date}T23:59:59", "--", path).strip()


def _engine(role: dict) -> Engine:
    return Engine(int(role["num-worker"]), int(role["tp"]), int(role.get("ep") or 1), bool(role.get("dp-attn")))


def read_speculation(path: Path) -> dict[str, int]:
    """Recipe path -> tokens drafted per step, from the recipe files' own speculative settings
    (``recipe_speculation.csv``: recipes whose names do not say)."""
    with open(path, newline="", encoding="utf-8") as f:
        return {row["recipe"]: int(row["spec_tokens"]) for row in csv.DictReader(f)}


def entries(repo: Path, commit: str, drafted_by_recipe: dict[str, int] | None = None) -> dict[tuple, list[Entry]]:
    """(deployment name, ISL, OSL, clients, prefill GPUs, decode GPUs) -> the entries measuring it;
    a speculative recipe whose name gives no drafted tokens takes them from ``drafted_by_recipe``."""
    import yaml

    drafted_by_recipe = drafted_by_recipe or {}

    found: dict[tuple, list[Entry]] = {}
    for name, entry in yaml.safe_load(_git(repo, "show", f"{commit}:{CONFIG}")).items():
        if not isinstance(entry, dict) or not entry.get("disagg"):
            continue
        for lengths in entry.get("seq-len-configs") or []:
            for space in lengths.get("search-space") or []:
                prefill, decode = _engine(space["prefill"]), _engine(space["decode"])
                files = [s.split("=", 1)[1] for role in ("prefill", "decode")
                         for s in space[role].get("additional-settings") or [] if s.startswith("CONFIG_FILE=")]
                if not files:  # older entries run scripts whose engines the config does not state
                    continue
                recipe = files[0]
                batch, drafted = BATCH.search(recipe), DRAFTED.search(recipe)
                spec = space.get("spec-decoding", "none") != "none"
                named = int(drafted.group(1)) if drafted else drafted_by_recipe.get(recipe)
                item = Entry(prefill, decode, int(batch.group(1)) if batch else None, named if spec else 0, recipe)
                for clients in space.get("conc-list") or []:
                    # Some deployments' speculative sweeps are entries of their own ("…-sglang-mtp"):
                    # they measure the same rows.
                    key = (name.removesuffix(SPECULATIVE_SUFFIX), int(lengths["isl"]), int(lengths["osl"]),
                           int(clients), prefill.gpus, decode.gpus)
                    found.setdefault(key, []).append(item)
    return found


def launcher_entries(text: str) -> dict[tuple, list[Entry]]:
    """(ISL, OSL, clients, GPUs of the deployment) -> the launch script's TensorRT-LLM sweeps
    measuring it (``text``: the script)."""
    found: dict[tuple, list[Entry]] = {}
    lengths = None
    for line in text.splitlines():
        if (said := LENGTHS.search(line)):
            lengths = int(said.group(1)), int(said.group(2))
        if not (call := SUBMIT.search(line)) or lengths is None:
            continue
        mode, ctx, gen, tp, batch, drafted, clients = call.groups()
        prefill = Engine(int(ctx), TRAY_GPUS, TRAY_GPUS, True)
        decode = Engine(int(gen), int(tp), int(tp), mode == "dep")
        item = Entry(prefill, decode, int(batch), int(drafted), " ".join(call.group(0).split()))
        for per_worker in clients.split():
            key = (*lengths, int(per_worker) * decode.workers, prefill.workers * prefill.gpus + decode.workers * decode.gpus)
            found.setdefault(key, []).append(item)
    return found


def _launcher_key(row: dict) -> tuple | None:
    """The ``launcher_entries`` key of a GB200 TensorRT-LLM DeepSeek row the source recorded as aggregated, or None."""
    if (row.get("mode"), row["gpu"], row["backend"], PREFIXES.get(row["model"])) != ("agg", "gb200", "trtllm", "dsr1") \
            or not row.get("num_gpus"):
        return None
    return int(row["isl"]), int(row["osl"]), int(float(row["concurrency"])), int(row["num_gpus"])


def _gpus(row: dict, prefix: str) -> int:
    return int(row[f"{prefix}tp"] or 1) * int(row[f"{prefix}attn_dp"] or 1)


def _key(row: dict) -> tuple | None:
    """The ``entries`` key of a disaggregated row, or None."""
    prefix = PREFIXES.get(row["model"])
    if row.get("mode") != "disagg" or not prefix or row["backend"] not in FRAMEWORKS:
        return None
    name = f"{prefix}-{row['precision']}-{row['gpu'].removesuffix('_sxm')}-{FRAMEWORKS[row['backend']]}"
    return name, int(row["isl"]), int(row["osl"]), int(float(row["concurrency"])), _gpus(row, "p_"), _gpus(row, "d_")


def _recorded_shape(row: dict, prefix: str) -> tuple[int, int, bool]:
    dp = int(row[f"{prefix}attn_dp"] or 1)
    return int(row[f"{prefix}workers"]), _gpus(row, prefix), dp > 1


def facts(row: dict, found: list[Entry]) -> tuple[dict, str] | None:
    """What the entries ``found`` for ``row`` agree on, and the recipe named; None when nothing."""
    recorded = bool(row.get("p_workers") and row.get("d_workers"))
    if recorded:  # the row's own deployment: its workers and attention DP must be the entry's
        found = [e for e in found if (e.prefill.workers, e.prefill.gpus, e.prefill.dp) == _recorded_shape(row, "p_")
                 and (e.decode.workers, e.decode.gpus, e.decode.dp) == _recorded_shape(row, "d_")]
    if not found or len({(e.prefill, e.decode) for e in found}) > 1 or all(e.drafted is None for e in found):
        return None  # nothing, a deployment the entries disagree on, or only drafted tokens no name says
    first = found[0]
    said = {} if recorded else first.prefill.columns("p_") | first.decode.columns("d_")
    if len({e.batch for e in found}) == 1 and first.batch:
        said["max_batch"] = first.batch * (first.decode.gpus if first.decode.dp else 1)
    if len({e.drafted for e in found}) == 1:  # the same speculation, named
        said["spec_tokens"] = first.drafted
    if recorded and not said.get("max_batch") and not said.get("spec_tokens"):
        return None  # nothing the row does not already say
    return said, sorted(e.recipe for e in found)[0]


# Where a row's deployment is read from: (the file, its entries from a commit, the row's key in them,
# what the read row gains beside the entries' facts). The config's rows stay in their mode; the launch
# script's were recorded as aggregated and are disaggregated.
SOURCES = ((CONFIG, entries, _key, {}),
           (LAUNCHER, lambda repo, commit: launcher_entries(_git(repo, "show", f"{commit}:{LAUNCHER}")), _launcher_key,
            {"mode": "disagg"}))


def deployments(repo: Path, rows: list[dict], drafted_by_recipe: dict[str, int] | None = None) -> list[dict]:
    """One output row per calibration row the config's entries, or the GB200 launch script's, say something of
    (``drafted_by_recipe``: drafted tokens of speculative recipes whose names do not say)."""
    sources = ((CONFIG, lambda repo, commit: entries(repo, commit, drafted_by_recipe), _key, {}), *SOURCES[1:])
    out, cache = [], {}
    for row in rows:
        measured = re.search(r"measured=(\d{4}-\d\d-\d\d)", row.get("provenance", ""))
        for path, read, key_of, gained in sources:
            key = key_of(row)
            commit = config_at(repo, measured.group(1), path) if key and measured else ""
            if not commit:
                continue
            if (path, commit) not in cache:
                cache[path, commit] = read(repo, commit)
            said = facts(row, cache[path, commit].get(key, []))
            if said is None:
                continue
            values, recipe = said
            out.append({**{k: row[k] for k in RECIPE_KEY}, **gained, **values,
                        "recipe": recipe, "config": f"{REPO}:{path}@{commit[:12]}",
                        "url": f"https://github.com/{REPO}/blob/{commit}/{path}", "licence": LICENCE})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", help="a git clone of SemiAnalysisAI/InferenceX")
    parser.add_argument("--data", help="calibration CSV (default: ../shared/data next to the repository)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "data" / "recipe_deployments.csv"))
    parser.add_argument("--speculation", default=str(ROOT / "benchmarks" / "data" / "recipe_speculation.csv"),
                        help="drafted tokens per step of speculative recipes whose names do not say ('none': unread)")
    args = parser.parse_args(argv)
    path = Path(args.data) if args.data else default_data_path()
    if path is None:
        print("error: --data: calibration data not found", file=sys.stderr)
        return 1
    drafted = {} if args.speculation == "none" else read_speculation(Path(args.speculation))
    written = deployments(Path(args.repo), read_rows(path), drafted)
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(written)
    print(f"wrote {args.out}: {len(written)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
