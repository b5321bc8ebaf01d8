"""The ``slaplan estimate`` contract: ``--csv IN --out OUT`` keeps every row, in order, with
four prediction columns; one configuration prints a summary or JSON; errors name the field."""

from __future__ import annotations

import csv
import json
import re

import pytest

from api.cli import main

HEADER = ["model", "gpu", "backend", "precision", "mode", "isl", "osl", "concurrency", "tp", "pp", "attn_dp",
          "moe_tp", "moe_ep", "p_workers", "p_tp", "p_pp", "p_attn_dp", "p_moe_ep", "p_bs", "d_workers", "d_tp",
          "d_pp", "d_attn_dp", "d_moe_ep", "d_bs", "num_gpus", "ttft_ms", "tpot_ms", "note"]
PRED = ["pred_ttft_ms", "pred_tpot_ms", "pred_output_tok_s_per_gpu", "pred_error"]


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def read_csv(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def test_csv_keeps_every_row_in_order_with_errors_inline(tmp_path):
    good = ["meta-llama/Llama-3.1-70B-Instruct", "h100_sxm", "vllm", "bf16", "agg", "1024", "256", "16", "4",
            "1", "1", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "4", "300.5", "25.1", "first"]
    bad = ["acme/NoSuchModel", "h100_sxm", "vllm", "bf16", "agg", "1024", "256", "16", "4", "1", "1", "", "", "",
           "", "", "", "", "", "", "", "", "", "", "", "4", "", "", "second"]
    disagg = ["Qwen/Qwen3-32B", "h200_sxm", "sglang", "fp8", "disagg", "4096", "512", "64", "", "", "", "", "",
              "2", "2", "1", "1", "1", "", "1", "4", "1", "1", "1", "", "8", "", "", "third"]
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    write_csv(src, HEADER, [good, bad, disagg])
    assert main(["estimate", "--csv", str(src), "--out", str(dst)]) == 0
    fields, rows = read_csv(dst)
    assert fields == HEADER + PRED
    assert [r["note"] for r in rows] == ["first", "second", "third"]
    assert rows[0]["ttft_ms"] == "300.5"  # input values pass through untouched
    for row in (rows[0], rows[2]):
        assert row["pred_error"] == ""
        assert all(float(row[c]) > 0 for c in PRED[:3])
    assert rows[1]["pred_error"].startswith("model:") and "acme/NoSuchModel" in rows[1]["pred_error"]
    assert all(rows[1][c] == "" for c in PRED[:3])


def test_csv_missing_optional_columns_and_bad_values(tmp_path):
    header = ["model", "gpu", "isl", "osl", "concurrency", "tp"]  # no backend, mode, measurements...
    rows = [
        ["meta-llama/Llama-3.1-8B", "h100", "512", "128", "4", "1"],
        ["meta-llama/Llama-3.1-8B", "h100", "0", "128", "4", "1"],  # zero-length prompt
        ["meta-llama/Llama-3.1-8B", "h100", "512", "128", "4", "3"],  # tp does not divide 32 heads
        ["meta-llama/Llama-3.1-8B", "tpu9", "512", "128", "4", "1"],  # unknown GPU
        ["meta-llama/Llama-3.1-405B", "h100", "512", "128", "4", "1"],  # does not fit
        ["meta-llama/Llama-3.1-8B", "h100", "512", "lots", "4", "1"],  # not a number
        ["meta-llama/Llama-3.1-8B", "h100", "512", "128"],  # ragged: concurrency and tp missing
        ["meta-llama/Llama-3.1-8B", "h100", "512", "inf", "4", "1"],  # not finite
        ["meta-llama/Llama-3.1-8B", "h100", "512", "128", "inf", "1"],  # not finite
        ["meta-llama/Llama-3.1-8B", "h100", "512", "128", "4", "0"],  # no GPUs per engine
        ["meta-llama/Llama-3.1-8B", "h100", "512", "128", "4", "1.5"],  # not an integer
    ]
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    write_csv(src, header, rows)
    assert main(["estimate", "--csv", str(src), "--out", str(dst)]) == 0
    fields, out = read_csv(dst)
    assert fields == header + PRED
    assert len(out) == len(rows)
    assert out[0]["pred_error"] == "" and float(out[0]["pred_tpot_ms"]) > 0
    errors = [r["pred_error"] for r in out[1:]]
    assert errors[0] == "isl: must be an integer ≥ 1, got '0'"
    assert errors[1].startswith("engine.tp:")
    assert errors[2].startswith("gpu:") and "h100_sxm" in errors[2]
    assert errors[3].startswith("engine:") and "GiB" in errors[3]
    assert errors[4].startswith("osl:")
    assert errors[5] == "concurrency: missing"
    assert errors[6] == "osl: must be finite, got 'inf'" and errors[7] == "concurrency: must be finite, got 'inf'"
    assert errors[8] == "tp: must be an integer ≥ 1, got '0'" and errors[9] == "tp: must be an integer ≥ 1, got '1.5'"
    assert all(r["pred_ttft_ms"] == "" for r in out[1:])


def test_csv_matches_the_python_api(tmp_path):
    from profiler.model.config import Parallel, ServingConfig
    from profiler.model.estimate import estimate

    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    write_csv(src, ["model", "gpu", "backend", "mode", "isl", "osl", "concurrency", "tp"],
              [["meta-llama/Llama-3.1-70B", "h100_sxm", "trtllm", "agg", "2000", "500", "32", "8"]])
    assert main(["estimate", "--csv", str(src), "--out", str(dst)]) == 0
    row = read_csv(dst)[1][0]
    ref = estimate(ServingConfig(model="meta-llama/Llama-3.1-70B", gpu="h100_sxm", backend="trtllm",
                                 engine=Parallel(tp=8), isl_tokens=2000, osl_tokens=500, concurrency=32))
    assert float(row["pred_ttft_ms"]) == pytest.approx(ref.ttft_ms, rel=1e-5)
    assert float(row["pred_tpot_ms"]) == pytest.approx(ref.itl_ms, rel=1e-5)
    assert float(row["pred_output_tok_s_per_gpu"]) == pytest.approx(ref.output_tok_s_per_gpu, rel=1e-5)


def test_csv_engine_limits_match_the_python_api_and_bad_ones_are_row_errors(tmp_path):
    from profiler.model.config import Parallel, ServingConfig
    from profiler.model.estimate import estimate

    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    base = ["openai/gpt-oss-20b", "h100_sxm", "trtllm", "agg", "1024", "1024", "3000", "1"]
    write_csv(src, ["model", "gpu", "backend", "mode", "isl", "osl", "concurrency", "tp", "max_batch", "max_num_tokens"],
              [base + ["384", "2048"], base + ["", ""], base + ["-3", "2048"]])
    assert main(["estimate", "--csv", str(src), "--out", str(dst)]) == 0
    limited, default, bad = read_csv(dst)[1]
    ref = estimate(ServingConfig(model="openai/gpt-oss-20b", gpu="h100_sxm", backend="trtllm", engine=Parallel(tp=1),
                                 isl_tokens=1024, osl_tokens=1024, concurrency=3000, max_batch=384, max_num_tokens=2048))
    assert float(limited["pred_output_tok_s_per_gpu"]) == pytest.approx(ref.output_tok_s_per_gpu, rel=1e-5)
    assert float(limited["pred_tpot_ms"]) < float(default["pred_tpot_ms"])  # fewer sequences a step
    assert bad["pred_error"].startswith("max_batch:") and not bad["pred_ttft_ms"]


def test_csv_unreadable_input_fails_cleanly(tmp_path, capsys):
    assert main(["estimate", "--csv", str(tmp_path / "absent.csv"), "--out", str(tmp_path / "o.csv")]) == 1
    assert "error: --csv" in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()


def test_one_configuration_summary(capsys):
    assert main(["estimate", "--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--tp", "4",
                 "--isl", "2000", "--osl", "200", "--concurrency", "16"]) == 0
    out = capsys.readouterr().out
    for word in ("TTFT", "p90", "p99", "ITL", "tok/s per GPU", "tok/s per user", "req/s", "weights",
                 "KV capacity", "h100_sxm"):
        assert word in out


def test_one_configuration_json_disagg(capsys):
    assert main(["estimate", "--model", "Qwen/Qwen3-32B-FP8", "--gpu", "h200", "--mode", "disagg",
                 "--prefill-tp", "2", "--decode-tp", "4", "--prefill-workers", "2", "--rate", "3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["config"]["precision"] == "fp8"
    assert data["estimate"]["total_gpus"] == 2 * 2 + 4
    assert set(data["estimate"]["memory"]) == {"prefill", "decode"}
    assert data["estimate"]["ttft_p99_ms"] >= data["estimate"]["ttft_p90_ms"]


def test_several_loads_give_a_table_and_a_json_sweep_matching_single_estimates(capsys):
    from profiler.model.config import Parallel, ServingConfig
    from profiler.model.estimate import estimate

    argv = ["estimate", "--model", "meta-llama/Llama-3.1-70B", "--gpu", "h100", "--tp", "8", "--isl", "4096",
            "--osl", "512", "--concurrency", "1", "64", "2048"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].split()[:2] == ["clients", "TTFT"]
    rows = [line.split() for line in lines[3:6]]
    assert [r[0] for r in rows] == ["1", "64", "2048"]
    assert rows[2][-1] == "saturated" and rows[0][-1] != "saturated"
    assert lines[6].startswith("memory/GPU")
    assert main(argv + ["--json"]) == 0
    sweep = json.loads(capsys.readouterr().out)["sweep"]
    assert [s["config"]["concurrency"] for s in sweep] == [1, 64, 2048]
    for s in sweep:
        ref = estimate(ServingConfig(model="meta-llama/Llama-3.1-70B", gpu="h100", engine=Parallel(tp=8),
                                     isl_tokens=4096, osl_tokens=512, concurrency=s["config"]["concurrency"]))
        assert s["estimate"]["ttft_ms"] == pytest.approx(ref.ttft_ms, rel=1e-12)
        assert s["estimate"]["itl_ms"] == pytest.approx(ref.itl_ms, rel=1e-12)
    assert main(["estimate", "--model", "meta-llama/Llama-3.1-70B", "--gpu", "h100", "--tp", "8",
                 "--rate", "0.5", "-2"]) == 1
    assert capsys.readouterr().err == "error: --rate: Input should be greater than 0\n"


def test_json_is_strict_when_a_queue_grows_without_bound(capsys):
    # One TP1 prefill GPU cannot prefill 50 requests/s of 8k prompts: TTFT is unbounded, which
    # strict JSON writes as null (not Infinity, which JSON parsers reject).
    assert main(["estimate", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--mode", "disagg",
                 "--isl", "8192", "--osl", "256", "--rate", "50", "--json"]) == 0
    out = capsys.readouterr().out
    assert "Infinity" not in out
    est = json.loads(out)["estimate"]
    assert est["saturated"] is True and est["ttft_ms"] is None and est["ttft_parts"]["queueing_ms"] is None
    assert est["itl_ms"] > 0
    assert main(["estimate", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--mode", "disagg",
                 "--isl", "8192", "--osl", "256", "--rate", "50"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == "TTFT        mean unbounded   p90 unbounded   p99 unbounded"
    assert lines[3].endswith(" ms + queue wait unbounded")


def test_a_rate_above_capacity_is_unbounded_in_the_table_and_the_summary(capsys):
    argv = ["estimate", "--model", "meta-llama/Llama-3.1-70B", "--gpu", "h200_sxm", "--tp", "8", "--rate"]
    assert main(argv + ["0.5", "100"]) == 0
    rows = capsys.readouterr().out.splitlines()[3:5]
    assert "unbounded" not in rows[0] and "saturated" not in rows[0]
    assert rows[1].split()[1:4] == ["unbounded"] * 3 and rows[1].endswith("saturated")
    assert main(argv + ["100"]) == 0
    out = capsys.readouterr().out
    assert "mean unbounded" in out and "the queue grows without bound, so TTFT is unbounded" in out


def test_a_mean_ttft_above_its_p90_says_why(capsys):
    from profiler.model.config import Parallel, ServingConfig
    from profiler.model.estimate import estimate

    def at(rate: float):
        return estimate(ServingConfig(model="meta-llama/Llama-3.1-70B", gpu="h200_sxm", engine=Parallel(tp=8),
                                      isl_tokens=4000, osl_tokens=1000, request_rate=rate))

    light = [r for r in (0.05, 0.5) if at(r).ttft_ms > at(r).ttft_p90_ms]
    assert light, "a light Poisson load: fewer than 10% wait"
    assert main(["estimate", "--model", "meta-llama/Llama-3.1-70B", "--gpu", "h200_sxm", "--tp", "8", "--rate",
                 str(light[0])]) == 0
    assert "mean above p90: fewer than 10% of requests wait" in capsys.readouterr().out


def test_a_model_that_does_not_fit_says_the_usable_memory_and_the_fraction(capsys):
    from profiler.model.engine import MAX_MEMORY_FRACTION, MEMORY_FRACTION, RESERVED_GIB
    from profiler.model.gpus import get_gpu

    assert main(["estimate", "--model", "meta-llama/Llama-3.1-70B", "--gpu", "h200_sxm", "--tp", "1"]) == 1
    err = capsys.readouterr().err
    gpu = get_gpu("h200_sxm")
    usable = gpu.memory_bytes * MAX_MEMORY_FRACTION / 2**30 - RESERVED_GIB
    assert f"the {usable:.1f} GiB an engine can use" in err and f"{gpu.memory_gib:.1f} GiB" in err
    assert f"raised to {MAX_MEMORY_FRACTION} from vllm's {MEMORY_FRACTION['vllm']}" in err
    needed = sum(float(x) for x in re.findall(r"([\d.]+) GiB of (?:weights|activations)", err))
    assert needed > usable


@pytest.mark.parametrize("argv,option", [
    (["--model", "acme/Nope", "--gpu", "h100"], "--model"),
    (["--model", "meta-llama/Llama-3.1-8B", "--gpu", "tpu9"], "--gpu"),
    (["--model", "meta-llama/Llama-3.1-70B", "--gpu", "h100", "--tp", "3"], "--tp"),
    (["--model", "meta-llama/Llama-3.1-405B", "--gpu", "h100", "--precision", "bf16"], "--tp/--pp/--dp/--ep"),
    (["--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--ep", "2", "--tp", "2"], "--ep"),  # dense
    (["--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--mode", "disagg", "--decode-tp", "2",
      "--decode-ep", "2"], "--decode-ep"),
    (["--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--isl", "2000000"], "--isl"),
    (["--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--concurrency", "inf"], "--concurrency"),
    (["--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--concurrency", "0"], "--concurrency"),
    (["--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--rate", "nan"], "--rate"),
    (["--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--spec-tokens", "99"], "--spec-tokens"),
    (["--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--kv-dtype", "int3"], "--kv-dtype"),
])
def test_one_configuration_errors_name_the_option(argv, option, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # an unknown org/name would otherwise be fetched
    assert main(["estimate", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {option}: ") and err.count("\n") == 1


def test_a_validator_message_reads_without_pydantics_prefix(capsys):
    assert main(["estimate", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--spec-acceptance", "0.5"]) == 1
    assert capsys.readouterr().err == "error: --spec-acceptance: needs spec_tokens > 0 (tokens drafted per step)\n"


@pytest.mark.parametrize("option", ["--tp", "--pp", "--dp", "--ep", "--replicas", "--isl", "--osl", "--max-batch",
                                    "--max-num-tokens", "--prefill-tp", "--prefill-pp", "--prefill-dp", "--prefill-ep",
                                    "--prefill-workers", "--decode-tp", "--decode-pp", "--decode-dp", "--decode-ep",
                                    "--decode-workers"])
@pytest.mark.parametrize("value", ["0", "-2"])
def test_sizes_and_counts_must_be_positive(option, value, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["estimate", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--mode", "disagg", option, value])
    assert exit_.value.code == 2
    assert f"error: argument {option}: must be a positive whole number, got '{value}'" in capsys.readouterr().err


def test_out_is_never_the_input_file(tmp_path, capsys):
    src = tmp_path / "data" / "in.csv"
    src.parent.mkdir()
    write_csv(src, ["model", "gpu", "isl", "osl", "concurrency"], [["meta-llama/Llama-3.1-8B", "h100", "512", "128", "4"]])
    before = src.read_bytes()
    (tmp_path / "link.csv").symlink_to(src)
    (tmp_path / "hard.csv").hardlink_to(src)
    for out in (src, tmp_path / "link.csv", tmp_path / "hard.csv", f"{tmp_path}/data/../data/./in.csv"):
        assert main(["estimate", "--csv", str(src), "--out", str(out)]) == 2
        assert capsys.readouterr().err == (f"error: --out: {out} is the --csv file {src}; writing it would "
                                           "overwrite the input\n")
        assert src.read_bytes() == before
    assert main(["estimate", "--csv", str(src), "--out", str(tmp_path / "out.csv")]) == 0  # another file is fine
    assert read_csv(tmp_path / "out.csv")[1][0]["pred_error"] == ""


@pytest.mark.parametrize("text,missing", [
    ("meta-llama/Llama-3.1-8B,h100,512,128,4\n", "model, gpu, isl, osl, concurrency"),  # no header row
    ("model;gpu;isl;osl;concurrency\nmeta-llama/Llama-3.1-8B;h100;512;128;4\n", "model, gpu, isl, osl, concurrency"),
    ("MODEL,GPU,ISL,OSL,CONCURRENCY\nmeta-llama/Llama-3.1-8B,h100,512,128,4\n", "model, gpu, isl, osl, concurrency"),
    ("gpu,isl,osl,concurrency,tp\nh100,512,128,4,1\n", "model"),
    ("model,gpu,isl,concurrency\nmeta-llama/Llama-3.1-8B,h100,512,4\n", "osl"),
])
def test_a_header_without_a_column_every_row_needs_is_one_error(tmp_path, capsys, text, missing):
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text(text)
    assert main(["estimate", "--csv", str(src), "--out", str(dst)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --csv: the header lacks the column(s) {missing} (") and err.count("\n") == 1
    assert not dst.exists()


def test_a_header_naming_a_column_twice_is_one_error(tmp_path, capsys):
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    write_csv(src, ["model", "gpu", "isl", "osl", "concurrency", "tp", "tp"],
              [["meta-llama/Llama-3.1-8B", "h100", "512", "128", "4", "1", "2"]])
    assert main(["estimate", "--csv", str(src), "--out", str(dst)]) == 2
    assert capsys.readouterr().err == "error: --csv: the header names the column(s) 'tp' more than once\n"
    assert not dst.exists()


def test_batch_options_are_checked(tmp_path, capsys):
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    write_csv(src, ["model", "gpu", "isl", "osl", "concurrency"], [["meta-llama/Llama-3.1-8B", "h100", "512", "128", "4"]])
    assert main(["estimate", "--csv", str(src), "--out", ""]) == 2
    assert capsys.readouterr().err == "error: --out: empty; give a file path\n"
    assert main(["estimate", "--csv", str(src)]) == 2
    assert capsys.readouterr().err == "error: --csv and --out go together\n"
    for extra in (["--model", "meta-llama/Llama-3.1-8B"], ["--json"], ["--tp", "2"], ["--concurrency", "8"]):
        assert main(["estimate", "--csv", str(src), "--out", str(dst), *extra]) == 2
        assert capsys.readouterr().err.startswith(f"error: {extra[0]}: sets one configuration, which --csv does not use")
        assert not dst.exists()


def test_an_expert_parallelism_that_does_not_divide_the_engine_is_a_row_error(tmp_path):
    header = ["model", "gpu", "backend", "mode", "isl", "osl", "concurrency", "tp", "moe_ep", "p_tp", "p_moe_ep",
              "d_tp", "d_moe_ep", "p_workers", "d_workers"]
    agg = ["deepseek-ai/DeepSeek-R1", "h200", "sglang", "agg", "1024", "1024", "8", "8"]
    disagg = ["deepseek-ai/DeepSeek-R1", "h200", "sglang", "disagg", "1024", "1024", "8", "", ""]
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    write_csv(src, header, [agg + ["8"], agg + ["99999999999"], agg + ["1e9"], agg + ["3"],
                            disagg + ["8", "16", "8", "8", "1", "1"], disagg + ["8", "8", "8", "5", "1", "1"]])
    assert main(["estimate", "--csv", str(src), "--out", str(dst)]) == 0
    errors = [row["pred_error"] for row in read_csv(dst)[1]]
    assert errors == ["", "moe_ep: '99999999999' does not divide the engine's 8 GPUs (tp × attn_dp)",
                      "moe_ep: '1e9' does not divide the engine's 8 GPUs (tp × attn_dp)",
                      "moe_ep: '3' does not divide the engine's 8 GPUs (tp × attn_dp)",
                      "p_moe_ep: '16' does not divide the engine's 8 GPUs (tp × attn_dp)",
                      "d_moe_ep: '5' does not divide the engine's 8 GPUs (tp × attn_dp)"]


def test_local_config_json(tmp_path, capsys):
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
              "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
              "num_hidden_layers": 32, "vocab_size": 128256, "torch_dtype": "bfloat16",
              "_name_or_path": "acme/Custom-8B"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["estimate", "--model", str(path), "--gpu", "h100", "--isl", "1000", "--osl", "100", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == "acme/Custom-8B"
    assert data["estimate"]["itl_ms"] > 0
