"""How the benchmarks read measured rows with their recipes (benchmarks/accuracy.py
``--recipes``, shared by online_replay.py and throughput.py)."""

import argparse
import csv

import pytest
from benchmark_scripts import load

ROW = dict(provenance="bench", model="deepseek-ai/DeepSeek-R1", gpu="gb200", backend="trtllm", precision="fp4",
           isl="8192", osl="1024", concurrency="64", mode="disagg")


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data")
    load("accuracy").add_recipes_argument(parser)
    return parser.parse_args(argv)


def test_recipes_given_are_read_and_none_or_other_data_reads_the_rows_as_they_are(tmp_path):
    recipes = tmp_path / "recipes.csv"
    with recipes.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[*ROW.keys() - {"mode"}, "p_workers", "d_workers"])
        writer.writeheader()
        writer.writerow({**{k: v for k, v in ROW.items() if k != "mode"}, "p_workers": "2", "d_workers": "3"})
    with_recipes_of = load("accuracy").with_recipes_of

    (row,) = with_recipes_of([ROW], _args(["--data", "other.csv", "--recipes", str(recipes)]))
    assert (row["p_workers"], row["d_workers"]) == ("2", "3")
    assert with_recipes_of([ROW], _args(["--data", "other.csv"])) == [ROW]  # the recipes name the shipped data's rows
    assert with_recipes_of([ROW], _args(["--recipes", "none"])) == [ROW]
    # Without --data the repository's recipes are read: none of them names this made-up row.
    with pytest.raises(ValueError, match="recipe row 1: .*no measured row has them"):
        with_recipes_of([ROW], _args([]))
