"""How measured rows (the calibration CSV's columns) are read as deployments."""

from __future__ import annotations

import numpy as np
import pytest

from profiler.model.dataset import LONG_PROMPT_TOKENS, UNRECORDED_GPUS, row_config
from profiler.model.errors import ModelError

DEEPSEEK = dict(model="deepseek-ai/DeepSeek-R1", gpu="b200_sxm", backend="sglang", precision="fp4",
                mode="agg", isl="1024", osl="1024", concurrency="4", pp="1", attn_dp="1")


def read(**columns: str):
    return row_config({**DEEPSEEK, **columns}, heads=128, moe=True, domain=8)


def test_tp_spelled_as_moe_tp_times_moe_ep_is_the_smaller_engine_and_marked_inferred():
    config, notes = read(tp="16", moe_tp="4", moe_ep="4")
    assert (config.engine.tp, config.engine.dp, config.engine.moe_ep) == (4, 1, 4)
    assert config.engine.gpus == 4
    assert notes and "read as a product: a 4-GPU engine" in notes[0]


def test_attention_dp_spelled_as_moe_tp_times_moe_ep_is_the_smaller_data_parallel_engine():
    config, notes = read(tp="1", attn_dp="64", moe_tp="8", moe_ep="8")
    assert (config.engine.tp, config.engine.dp, config.engine.moe_ep) == (1, 8, 8)
    assert notes and "a 8-GPU engine" in notes[0]


def test_tp_times_equal_attention_dp_with_ep_their_product_is_the_n_gpu_engine():
    config, notes = read(tp="2", attn_dp="2", moe_tp="1", moe_ep="4")
    assert (config.engine.tp, config.engine.dp, config.engine.moe_ep) == (1, 2, 2)
    assert notes and "a 2-GPU engine" in notes[0]


def test_attention_dp_spelled_plainly_is_recorded():
    config, notes = read(tp="1", attn_dp="8", moe_tp="1", moe_ep="8")
    assert (config.engine.tp, config.engine.dp, config.engine.moe_ep) == (1, 8, 8)
    assert notes == ()


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


def test_releases_of_one_architecture_are_one_cross_validation_family():
    from profiler.model.calibrate import family

    assert family("deepseek-ai/DeepSeek-R1") == family("deepseek-ai/DeepSeek-V3") == family("nvidia/DeepSeek-R1-FP4")
    assert family("deepseek-ai/DeepSeek-V3.1") == family("deepseek-ai/DeepSeek-V3")
    assert family("meta-llama/Llama-3.3-70B-Instruct") == family("meta-llama/Llama-3.1-70B")
    assert family("meta-llama/Llama-3.1-8B") != family("meta-llama/Llama-3.1-70B")
    assert family("moonshotai/Kimi-K2.5") != family("deepseek-ai/DeepSeek-V3")  # other shapes, other family


def test_a_measurement_repeated_without_its_deployment_is_scored_once_under_the_recorded_row():
    from profiler.model.calibrate import prepare_rows

    measured = dict(ttft_ms="812.5", tpot_ms="21.125")
    recorded = {**DEEPSEEK, **measured, "mode": "disagg", "p_workers": "1", "p_tp": "4", "p_attn_dp": "1",
                "d_workers": "2", "d_tp": "8", "d_attn_dp": "1", "tp": "", "moe_tp": "", "moe_ep": ""}
    copied = {**recorded, "model": "deepseek-ai/DeepSeek-V3", "p_workers": "", "d_workers": ""}
    rounded = {**copied, "ttft_ms": "812.46", "tpot_ms": "21.13"}  # a copy rounded on the way
    other = {**recorded, "tpot_ms": "21.4"}  # apart in the third digit: another measurement
    data = prepare_rows([copied, recorded, rounded, other])
    assert data.inferred.tolist() == [True, False, True, False]
    assert data.repeats.tolist() == [True, False, True, False]
    alone = prepare_rows([copied])
    assert alone.repeats.tolist() == [False]  # nothing else carries it: scored, as inferred


def test_speculative_decoding_columns_are_read_when_present():
    row = {"model": "deepseek-ai/DeepSeek-R1", "gpu": "b200_sxm", "backend": "trtllm", "mode": "agg",
           "isl": "1024", "osl": "1024", "concurrency": "4", "tp": "8", "moe_ep": "8"}
    assert row_config(row)[0].spec_tokens == 0
    config, _ = row_config(dict(row, spec_tokens="3", spec_acceptance="0.8"))
    assert (config.spec_tokens, config.spec_acceptance) == (3, 0.8)


def test_engine_limit_columns_are_read_when_present_and_named_when_bad():
    row = {"model": "meta-llama/Llama-3.1-8B", "gpu": "h100_sxm", "backend": "trtllm", "mode": "agg",
           "isl": "1024", "osl": "1024", "concurrency": "4", "tp": "1"}
    config, _ = row_config(dict(row, max_batch="", max_num_tokens=" "))
    assert (config.max_batch, config.max_num_tokens) == (None, None)
    config, _ = row_config(dict(row, max_batch="384", max_num_tokens="2048"))
    assert (config.max_batch, config.max_num_tokens) == (384, 2048)
    for column, bad in (("max_batch", "0"), ("max_batch", "2.5"), ("max_num_tokens", "many")):
        with pytest.raises(ModelError) as err:
            row_config(dict(row, **{column: bad}))
        assert err.value.field == column


def test_worker_counts_must_be_whole_and_positive_and_names_are_read_in_any_case():
    import pytest

    from profiler.model.errors import ModelError

    disagg = dict(mode="Disagg", backend=" SGLang ", p_tp="8", d_tp="8", p_workers="1", d_workers="2")
    config, notes = read(**disagg)
    assert (config.mode, config.backend, config.prefill_workers, config.decode_workers, notes) == ("disagg", "sglang", 1, 2, ())
    for column, value in (("p_workers", "0"), ("d_workers", "1.5")):
        with pytest.raises(ModelError) as err:
            read(**dict(disagg, **{column: value}))
        assert str(err.value).startswith(f"{column}: must be an integer ≥ 1")


def test_experts_tp_cannot_split_are_read_as_wide_expert_parallelism_and_marked_inferred():
    # "tp 36, moe_ep 1" on 128-head DeepSeek: attention runs data-parallel over 36 GPUs, and its
    # 2048-wide experts cannot be split 36 ways by TP: wide EP over the 36 GPUs is what ran.
    config, notes = row_config({**DEEPSEEK, "tp": "36", "moe_tp": "1", "moe_ep": "1"}, heads=128, moe=True,
                               domain=72, expert_width=2048)
    assert (config.engine.tp, config.engine.dp, config.engine.moe_ep) == (1, 36, 36)
    assert notes and "36 GPUs" in notes[0]
    # TP 32 splits them evenly (64 columns each): read as recorded.
    config, notes = row_config({**DEEPSEEK, "tp": "32", "moe_tp": "1", "moe_ep": "1"}, heads=128, moe=True,
                               domain=72, expert_width=2048)
    assert (config.engine.tp, config.engine.dp, config.engine.moe_ep, notes) == (32, 1, 1, ())


def test_num_gpus_of_whole_engines_is_replicas_sharing_the_concurrency():
    config, notes = read(tp="8", num_gpus="24", concurrency="96")
    assert (config.engine.gpus, config.replicas, config.concurrency, notes) == (8, 3, 96, ())
    assert read(tp="8", num_gpus="")[0].replicas == 1  # absent: one engine
    assert read(tp="8", num_gpus="8")[0].replicas == 1


def test_num_gpus_no_whole_deployment_has_is_an_error_naming_it():
    import pytest

    from profiler.model.errors import ModelError

    for columns in (dict(tp="8", num_gpus="12"), dict(tp="8", num_gpus="4"), dict(tp="8", num_gpus="0"),
                    dict(mode="disagg", p_tp="8", d_tp="8", p_workers="1", d_workers="2", num_gpus="16"),
                    dict(mode="disagg", p_tp="8", d_tp="8", num_gpus="12")):  # no whole workers, counts missing
        with pytest.raises(ModelError) as err:
            read(**columns)
        assert str(err.value).startswith("num_gpus: "), columns


def test_num_gpus_of_a_disaggregated_row_is_checked_and_sizes_missing_worker_counts():
    disagg = dict(mode="disagg", p_tp="8", d_tp="8")
    config, notes = read(**disagg, p_workers="1", d_workers="2", num_gpus="24")
    assert (config.prefill_workers, config.decode_workers, notes) == (1, 2, ())
    # Workers missing: exactly num_gpus GPUs, decode:prefill GPUs nearest the recorded deployments'
    # at this load (about 5 at 4 clients and short prompts: 48 = 1 × 8 + 5 × 8).
    roles = UNRECORDED_GPUS[False]
    assert 4.5 < roles[1].at(4) / roles[0].at(4) < 5.5
    config, notes = read(**disagg, num_gpus="48")
    assert (config.prefill_workers, config.decode_workers) == (1, 5)
    assert notes and "1 prefill + 5 decode" in notes[-1]
    config, _ = read(mode="disagg", p_tp="4", d_tp="8", num_gpus="12")
    assert (config.prefill_workers, config.decode_workers) == (1, 1)


def test_missing_worker_counts_are_read_as_the_recorded_deployments_are_sized():
    def workers(clients: int, isl: int) -> tuple[int, int]:
        config, notes = read(mode="disagg", p_tp="4", d_tp="8", concurrency=str(clients), isl=str(isl))
        assert notes and "worker counts missing" in notes[-1]
        return config.prefill_workers, config.decode_workers

    for isl in (1024, LONG_PROMPT_TOKENS):
        for clients in (1, 64, 8192):
            prefill, decode = (role.at(clients) for role in UNRECORDED_GPUS[isl >= LONG_PROMPT_TOKENS])
            got = workers(clients, isl)
            # Whole workers nearest each role's GPUs, never none.
            assert got[0] == max(1, round(prefill / 4)) and got[1] == max(1, round(decode / 8))
    # Decode pools stay about the same with load; prefill pools grow, faster for long prompts.
    assert workers(8192, 1024)[1] - workers(1, 1024)[1] <= 1
    assert workers(1, 8192)[0] <= workers(8192, 1024)[0] < workers(8192, 8192)[0]


def test_wide_decode_engines_without_worker_counts_are_read_as_wide_expert_parallelism():
    # Such sources spell the engine's GPU count as tp and repeat the prefill's moe_ep for decode.
    row = {**DEEPSEEK, "gpu": "gb200", "mode": "disagg", "p_tp": "4", "p_moe_ep": "4", "d_tp": "32", "d_moe_ep": "4"}
    config, notes = row_config(row, heads=128, moe=True, domain=72)
    assert (config.decode.tp, config.decode.dp, config.decode.moe_ep) == (1, 32, 32)
    assert (config.prefill.tp, config.prefill.dp, config.prefill.moe_ep) == (4, 1, 4)  # the prefill as spelled
    assert any("d_tp 32 read as attention dp 32, ep 32" in note for note in notes)
    for columns in (dict(d_tp="8"), dict(p_workers="1", d_workers="1")):  # up to 8 GPUs, or recorded: as spelled
        config, _ = row_config({**row, **columns}, heads=128, moe=True, domain=72)
        assert config.decode.dp == 1 and config.decode.moe_ep == 4, columns


def test_wide_aggregated_engines_spelled_as_tp_are_read_as_wide_expert_parallelism():
    # Such sweeps spell a 64-GPU engine as tp = moe_tp = 64 with neither attention DP nor EP.
    row = {**DEEPSEEK, "gpu": "gb200", "tp": "64", "moe_tp": "64", "moe_ep": "1", "num_gpus": "64"}
    config, notes = row_config(row, heads=128, moe=True, domain=72)
    assert (config.engine.tp, config.engine.dp, config.engine.moe_ep, config.replicas) == (1, 64, 64, 1)
    assert any("tp 64 read as attention dp 64, ep 64" in note for note in notes)
    for columns in (dict(tp="8", moe_tp="8", num_gpus="8"), dict(moe_tp="16", moe_ep="4")):  # narrow, or EP spelled
        config, _ = row_config({**row, **columns}, heads=128, moe=True, domain=72)
        assert config.engine.dp == 1, columns


def test_num_gpus_is_not_read_where_the_row_spells_its_engine_as_a_product():
    # The product spelling records the product in num_gpus too: the 4-GPU engine, one replica.
    config, notes = read(tp="16", moe_tp="4", moe_ep="4", num_gpus="16")
    assert (config.engine.gpus, config.replicas) == (4, 1) and notes


def test_an_expert_parallelism_that_does_not_divide_the_engine_names_its_column():
    import pytest

    from profiler.model.errors import ModelError

    assert read(tp="8", moe_ep="8")[0].engine.moe_ep == 8
    assert read(tp="8", moe_ep="0")[0].engine.moe_ep == 1  # 0: no expert parallelism
    disagg = dict(mode="disagg", p_tp="8", d_tp="8", p_workers="1", d_workers="1")
    for columns, column, value in ((dict(tp="8", moe_ep="99999999999"), "moe_ep", "99999999999"),
                                   (dict(tp="8", moe_ep="1e9"), "moe_ep", "1e9"),
                                   (dict(tp="8", moe_ep="3"), "moe_ep", "3"),
                                   (dict(disagg, p_moe_ep="16"), "p_moe_ep", "16"),
                                   (dict(disagg, d_moe_ep="6"), "d_moe_ep", "6")):
        with pytest.raises(ModelError) as err:
            read(**columns)
        assert (err.value.field, err.value.message) == (
            column, f"{value!r} does not divide the engine's 8 GPUs (tp × attn_dp)")


def test_the_required_columns_are_those_a_row_cannot_do_without():
    import pytest

    from profiler.model.dataset import REQUIRED_COLUMNS, row_prepared
    from profiler.model.errors import ModelError

    row = dict(model="meta-llama/Llama-3.1-8B", gpu="h100", isl="512", osl="128", concurrency="4")
    assert tuple(row) == REQUIRED_COLUMNS
    row_prepared(row)  # nothing else is needed
    for column in REQUIRED_COLUMNS:
        with pytest.raises(ModelError) as err:
            row_prepared({k: v for k, v in row.items() if k != column})
        assert err.value.field == column


def test_a_measured_column_reads_empty_and_non_positive_cells_as_unmeasured_and_names_words():
    from profiler.model.calibrate import measured_column

    rows = [{"tok": "1200.5"}, {"tok": ""}, {"tok": "-3"}, {"tok": "fast"}, {"tok": "inf"}, {}]
    values, bad = measured_column(rows, range(6), "tok")
    assert values[0] == 1200.5 and np.isnan(values[1:]).all()
    assert bad == [3]
    values, bad = measured_column(rows, [3, 0], "tok")  # positions in the order asked
    assert np.isnan(values[0]) and values[1] == 1200.5 and bad == [3]
