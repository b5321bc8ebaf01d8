"""The throughput benchmark's comparison of predicted and measured output tokens/s per GPU."""

import csv

from benchmark_scripts import load
from profiler.model.calibrate import prepare_rows
from profiler.model.estimate import evaluate
from profiler.model.params import shipped_params

COLUMNS = ["model", "gpu", "backend", "precision", "mode", "isl", "osl", "concurrency", "tp", "attn_dp", "moe_ep",
           "derived_output_tok_s_per_gpu"]


def _benchmark():
    return load("throughput")


def _rows():
    return [
        dict(model="meta-llama/Llama-3.1-8B", gpu="h100_sxm", backend="vllm", precision="bf16", mode="agg",
             isl="1024", osl="256", concurrency="16", tp="1", attn_dp="1", moe_ep="1"),
        dict(model="Qwen/Qwen3-30B-A3B", gpu="b200_sxm", backend="trtllm", precision="fp8", mode="agg",
             isl="2048", osl="512", concurrency="64", tp="1", attn_dp="2", moe_ep="2"),
        dict(model="meta-llama/Llama-3.1-70B", gpu="h100_sxm", backend="vllm", precision="bf16", mode="agg",
             isl="1024", osl="256", concurrency="8", tp="4", attn_dp="1", moe_ep="1"),
    ]


def _write(path, rows):
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def test_errors_and_bias_against_known_factors(tmp_path, capsys):
    """Measurements 20% below the model on two rows, a word instead of a number on the third: 25%
    error, +25% bias, n 2; the word and a row the model cannot predict are named, and neither
    stops the others."""
    rows = _rows()
    predicted = evaluate(prepare_rows(rows).batch, shipped_params())["output_tok_s_per_gpu"]
    rows[0]["derived_output_tok_s_per_gpu"] = str(predicted[0] / 1.25)
    rows[1]["derived_output_tok_s_per_gpu"] = str(predicted[1] / 1.25)
    rows[2]["derived_output_tok_s_per_gpu"] = "fast"
    rows.append(dict(rows[0], model="no-such/model", derived_output_tok_s_per_gpu="100"))
    path = tmp_path / "published.csv"
    _write(path, rows)

    assert _benchmark().main(["--data", str(path)]) == 0
    out = capsys.readouterr().out
    assert "4 rows, 3 predicted" in out
    assert "row 4 not predicted" in out and "no-such/model" in out
    assert "derived_output_tok_s_per_gpu is not a number in row(s) 3" in out
    overall = next(line for line in out.splitlines() if line.startswith("all "))
    assert overall.split()[1:] == ["2", "25.0%", "+25%"]
    by_gpu = {line.split()[1]: line.split()[2:] for line in out.splitlines() if line.startswith("gpu ")}
    assert by_gpu == {"b200_sxm": ["1", "25.0%", "+25%"], "h100_sxm": ["1", "25.0%", "+25%"]}


def test_missing_file_is_named(tmp_path, capsys):
    assert _benchmark().main(["--data", str(tmp_path / "absent.csv")]) == 1
    assert "--data" in capsys.readouterr().err
