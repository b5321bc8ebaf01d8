"""How measured rows (the calibration CSV's columns) are read as deployments."""

from __future__ import annotations

from profiler.dataset import row_config

DEEPSEEK = dict(model="deepseek-ai/DeepSeek-R1", gpu="b200_sxm", backend="sglang", precision="fp4",
                mode="agg", isl="1024", osl="1024", concurrency="4", pp="1", attn_dp="1")


def read(**columns: str):
    return row_config({**DEEPSEEK, **columns}, heads=128, moe=True, domain=8)


def test_tp_spelled_as_moe_tp_times_moe_ep_is_the_smaller_engine_and_marked_inferred():
    config, notes = read(tp="16", moe_tp="4", moe_ep="4")
    assert (config.engine.tp, config.engine.dp, config.engine.moe_ep) == (4, 1, 4)
    assert config.engine.gpus == 4
    assert notes and "moe_tp × moe_ep" in notes[0]


def test_the_same_engine_spelled_plainly_is_read_alike_and_recorded():
    config, notes = read(tp="4", moe_tp="1", moe_ep="4")
    assert (config.engine.tp, config.engine.dp, config.engine.moe_ep) == (4, 1, 4)
    assert notes == ()


def test_tp_beyond_the_domain_without_that_spelling_stays_attention_data_parallel():
    config, notes = read(tp="16", moe_tp="16", moe_ep="1")
    assert (config.engine.tp, config.engine.dp) == (8, 2)
    assert config.engine.gpus == 16
    assert notes == ()


def test_a_dense_model_is_never_reread():
    config, notes = row_config({**DEEPSEEK, "model": "meta-llama/Llama-3.1-70B", "tp": "16", "moe_tp": "4",
                                "moe_ep": "4"}, heads=64, moe=False, domain=8)
    assert config.engine.tp == 16 and notes == ()
