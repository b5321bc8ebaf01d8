"""Bad input to the performance model: every failure is a clear error naming the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from profiler.model.config import MAX_STEP_TOKENS, Parallel, ServingConfig
from profiler.model.errors import Infeasible, ModelError
from profiler.model.estimate import estimate


def config(**changes) -> ServingConfig:
    base = dict(model="meta-llama/Llama-3.1-70B", gpu="h100_sxm", engine=Parallel(tp=4),
                isl_tokens=1000, osl_tokens=200, concurrency=8)
    return ServingConfig(**{**base, **changes})


def error_fields(exc: ValidationError) -> set[str]:
    return {".".join(str(x) for x in e["loc"]) for e in exc.errors()}


def test_unknown_model_lists_known_names():
    with pytest.raises(ModelError) as err:
        estimate(config(model="acme/NotAModel-7B"))
    assert err.value.field == "model"
    assert "acme/NotAModel-7B" in str(err.value)
    assert "meta-llama/Llama-3.1-70B" in err.value.message and "deepseek-ai/DeepSeek-R1" in err.value.message


def test_unknown_gpu_lists_known_names():
    with pytest.raises(ModelError) as err:
        estimate(config(gpu="h1000"))
    assert err.value.field == "gpu"
    for name in ("a100_sxm", "h100_sxm", "b200_sxm", "gb200", "mi300x"):
        assert name in err.value.message


@pytest.mark.parametrize("alias", ["H100", "h100-sxm", "H100_SXM", "nvidia-h100-80gb"])
def test_gpu_aliases_resolve(alias):
    assert estimate(config(gpu=alias)) == estimate(config())


@pytest.mark.parametrize("alias,name", [("gb200_sxm", "gb200"), ("gb300_sxm", "gb300"), ("H800", "h800_sxm"),
                                        ("h20", "h20_sxm"), ("rtx_pro_6000_server", "rtx_pro_6000"),
                                        ("MI325X", "mi325x"), ("instinct-mi355x", "mi355x")])
def test_other_system_names_resolve(alias, name):
    """Names other tools use for the same GPUs (AIConfigurator's ``gb200_sxm``, vendors' own)."""
    from profiler.model.gpus import get_gpu

    assert get_gpu(alias).name == name


@pytest.mark.parametrize("gpu", ["mi300x", "mi355x"])
def test_trtllm_on_an_amd_gpu_names_the_backend(gpu):
    with pytest.raises(ModelError) as err:
        estimate(config(gpu=gpu, backend="trtllm"))
    assert err.value.field == "backend"
    assert "AMD" in err.value.message and "vllm or sglang" in err.value.message
    assert estimate(config(gpu=gpu, backend="vllm")).itl_ms > 0


def test_tp_that_does_not_divide_the_heads():
    with pytest.raises(ModelError) as err:
        estimate(config(engine=Parallel(tp=3)))
    assert err.value.field == "engine.tp"
    assert "64 attention heads" in err.value.message
    with pytest.raises(ModelError) as err:
        estimate(config(mode="disagg", engine=None, prefill=Parallel(tp=6), decode=Parallel(tp=4)))
    assert err.value.field == "prefill.tp"


def test_experts_split_by_tp_must_divide_their_width_and_wide_ep_takes_redundant_slots():
    # DeepSeek-R1's 256 routed experts are 2048 wide: 36 attention-DP ranks cannot split them
    # 36 ways by TP (2048 / 36 is not whole); EP over the 36 GPUs spreads them, the busiest GPU
    # holding ceil(256 / 36) = 8 expert slots (as wide-EP deployments place redundant experts).
    deepseek = dict(model="deepseek-ai/DeepSeek-R1", gpu="gb200", backend="trtllm", precision="fp4")
    with pytest.raises(ModelError) as err:
        estimate(config(engine=Parallel(tp=1, dp=36, moe_ep=1), **deepseek))
    assert err.value.field == "engine.moe_ep" and "2048" in err.value.message
    with pytest.raises(ModelError) as err:
        estimate(config(engine=Parallel(tp=1, dp=512, moe_ep=512), **deepseek))
    assert err.value.field == "engine.moe_ep" and "256 experts" in err.value.message
    from profiler.model.estimate import prepare
    from profiler.model.model_catalog import resolve_model

    model = resolve_model("deepseek-ai/DeepSeek-R1")[0]
    from profiler.model.engine import WEIGHT_BYTES

    per_expert_layer = model.expert_params() * WEIGHT_BYTES["fp4"]  # one expert in one layer, with its scales
    wide = prepare(config(engine=Parallel(tp=1, dp=36, moe_ep=36), **deepseek))
    even = prepare(config(engine=Parallel(tp=1, dp=32, moe_ep=32), **deepseek))
    assert wide.decode["weight_bytes_experts"] == pytest.approx(model.moe_layers * 8 * per_expert_layer, rel=1e-12)
    assert even.decode["weight_bytes_experts"] == pytest.approx(model.moe_layers * 8 * per_expert_layer, rel=1e-12)
    assert estimate(config(engine=Parallel(tp=1, dp=36, moe_ep=36), **deepseek)).itl_ms > 0


@pytest.mark.parametrize("field", ["isl_tokens", "osl_tokens"])
@pytest.mark.parametrize("value", [0, -5])
def test_zero_or_negative_lengths(field, value):
    with pytest.raises(ValidationError) as err:
        config(**{field: value})
    assert error_fields(err.value) == {field}


@pytest.mark.parametrize("field,value", [("concurrency", 0), ("concurrency", -1.0), ("request_rate", 0.0),
                                         ("replicas", 0), ("max_batch", 0)])
def test_non_positive_load_and_sizes(field, value):
    with pytest.raises(ValidationError) as err:
        config(**{field: value})
    assert error_fields(err.value) == {field}


def test_non_positive_parallelism_names_the_nested_field():
    with pytest.raises(ValidationError) as err:
        Parallel(tp=0)
    assert error_fields(err.value) == {"tp"}
    with pytest.raises(ValidationError) as err:
        ServingConfig.model_validate({**config().model_dump(), "engine": {"tp": 4, "pp": -1}})
    assert error_fields(err.value) == {"engine.pp"}


def test_405b_bf16_does_not_fit_one_h100():
    with pytest.raises(Infeasible) as err:
        estimate(config(model="meta-llama/Llama-3.1-405B", precision="bf16", engine=Parallel(tp=1)))
    assert err.value.field == "engine"
    assert "GiB" in err.value.message and "h100_sxm" in err.value.message
    assert isinstance(err.value, ModelError)


def test_sequence_longer_than_the_kv_cache():
    with pytest.raises(ModelError) as err:
        estimate(config(model="meta-llama/Llama-3.1-8B", gpu="l40s", engine=Parallel(tp=1),
                        isl_tokens=2_000_000, osl_tokens=1000))
    assert err.value.field in {"isl_tokens", "engine"}


def test_a_long_answer_that_overflows_the_kv_cache_names_osl():
    """The prompt fits, but not the mean context (ISL + OSL/2) a sequence decodes at."""
    with pytest.raises(ModelError) as err:
        estimate(config(model="meta-llama/Llama-3.1-8B", gpu="h100_sxm", engine=Parallel(tp=1),
                        isl_tokens=1024, osl_tokens=10**12))
    assert err.value.field == "osl_tokens"
    assert "ISL + OSL/2" in err.value.message


def test_a_step_of_more_tokens_than_any_engine_takes_is_refused():
    with pytest.raises(ValidationError) as err:
        config(max_num_tokens=10**21)
    assert error_fields(err.value) == {"max_num_tokens"}
    assert config(max_num_tokens=MAX_STEP_TOKENS).max_num_tokens == MAX_STEP_TOKENS


def test_unknown_precision_and_kv_dtype():
    with pytest.raises(ModelError) as err:
        estimate(config(precision="fp3"))
    assert err.value.field == "precision"
    with pytest.raises(ModelError) as err:
        estimate(config(kv_dtype="int2"))
    assert err.value.field == "kv_dtype"


def test_conflicting_or_missing_parts():
    with pytest.raises(ValidationError, match="not both"):
        config(request_rate=2.0)
    with pytest.raises(ValidationError, match="prefill and decode"):
        config(mode="disagg")
    with pytest.raises(ValidationError, match="engine"):
        config(engine=None)
    with pytest.raises(ValidationError):
        config(backend="tgi")


def test_unknown_fields_are_rejected_and_inputs_frozen():
    with pytest.raises(ValidationError) as err:
        config(isl=1000)
    assert "isl" in error_fields(err.value)
    with pytest.raises(ValidationError):
        Parallel(tp=2, ep=2)
    cfg = config()
    with pytest.raises(ValidationError):
        cfg.isl_tokens = 5  # type: ignore[misc]


@pytest.mark.parametrize("changes", [{"spec_acceptance": 0.7}, {"spec_tokens": 2, "spec_acceptance": 1.0},
                                     {"spec_tokens": 2, "spec_acceptance": 0.0}, {"spec_tokens": -1},
                                     {"spec_tokens": 17}])
def test_bad_speculative_decoding_names_the_field(changes):
    with pytest.raises(ValidationError) as err:
        config(**changes)
    assert error_fields(err.value) == {"spec_acceptance" if "spec_acceptance" in changes else "spec_tokens"}
