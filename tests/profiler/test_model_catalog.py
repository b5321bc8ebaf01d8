"""Model catalog: parameter counts against published figures, KV sizes, name resolution,
config.json parsing and the offline failure path of the Hub loader."""

from __future__ import annotations

import json

import pytest

from profiler import hub
from profiler.model.errors import ModelError, UnknownName
from profiler.model.model_catalog import MODELS, model_from_config, model_names, resolve_model
from profiler.model.models import Model

B = 1e9

# Published totals and active counts (model cards / technical reports), in billions, with the
# publisher's convention for "active": "all" counts both embedding tables, "lm_head" only the
# output projection (OpenAI), "none" neither (Zhipu, MiniMax). Totals exclude MTP layers
# and vision encoders, as the published figures do (a Qwen3-VL entry is its Qwen3 text model,
# so it carries that model's figure).
PUBLISHED = {
    "meta-llama/Llama-3.1-8B": (8.03, None, "all"),
    "meta-llama/Llama-3.1-70B": (70.6, None, "all"),
    "meta-llama/Llama-3.1-405B": (405.9, None, "all"),
    "meta-llama/Llama-3.3-70B-Instruct": (70.6, None, "all"),
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": (109.0, 17.0, "all"),
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": (400.0, 17.0, "all"),
    "Qwen/Qwen3-0.6B": (0.6, None, "all"),
    "Qwen/Qwen3-1.7B": (1.7, None, "all"),
    "Qwen/Qwen3-4B": (4.0, None, "all"),
    "Qwen/Qwen3-Coder-480B-A35B-Instruct": (480.0, 35.0, "all"),
    "Qwen/Qwen3-VL-2B-Instruct": (1.7, None, "all"),
    "Qwen/Qwen3-VL-4B-Instruct": (4.0, None, "all"),
    "Qwen/Qwen3-VL-8B-Instruct": (8.2, None, "all"),
    "Qwen/Qwen3-VL-32B-Instruct": (32.8, None, "all"),
    "Qwen/Qwen3-VL-30B-A3B-Instruct": (30.5, 3.3, "all"),
    "Qwen/Qwen3-VL-235B-A22B-Instruct": (235.0, 22.0, "all"),
    "Qwen/Qwen3.5-122B-A10B": (122.0, 10.0, "all"),
    "Qwen/Qwen3.5-35B-A3B": (35.0, 3.0, "lm_head"),
    "Qwen/Qwen3.5-27B": (27.0, None, "all"),
    "Qwen/Qwen3.6-35B-A3B": (35.0, 3.0, "lm_head"),
    "Qwen/Qwen3.6-27B": (27.0, None, "all"),
    "Qwen/Qwen3-8B": (8.2, None, "all"),
    "Qwen/Qwen3-32B": (32.8, None, "all"),
    "Qwen/Qwen3-30B-A3B": (30.5, 3.3, "all"),
    "Qwen/Qwen3-235B-A22B": (235.0, 22.0, "all"),
    "Qwen/Qwen3.5-397B-A17B": (397.0, 17.0, "all"),
    "deepseek-ai/DeepSeek-V3": (671.0, 37.0, "all"),
    "deepseek-ai/DeepSeek-R1": (671.0, 37.0, "all"),
    "deepseek-ai/DeepSeek-V3.1": (671.0, 37.0, "all"),
    "deepseek-ai/DeepSeek-V3.2": (671.0, 37.0, "lm_head"),
    "moonshotai/Kimi-K2.5": (1040.0, 32.0, "all"),
    "moonshotai/Kimi-K2-Instruct": (1040.0, 32.0, "all"),
    "moonshotai/Kimi-K2-Thinking": (1040.0, 32.0, "all"),
    "moonshotai/Kimi-K2.6": (1040.0, 32.0, "all"),
    "moonshotai/Kimi-K2.7-Code": (1040.0, 32.0, "all"),
    "MiniMaxAI/MiniMax-M2.5": (230.0, 10.0, "none"),
    "MiniMaxAI/MiniMax-M2": (230.0, 10.0, "none"),
    "MiniMaxAI/MiniMax-M2.1": (230.0, 10.0, "none"),
    "MiniMaxAI/MiniMax-M2.7": (230.0, 10.0, "none"),
    "zai-org/GLM-5": (744.0, 40.0, "none"),
    "zai-org/GLM-5.1": (744.0, 40.0, "none"),
    "zai-org/GLM-5.2": (744.0, 40.0, "none"),
    "openai/gpt-oss-20b": (20.91, 3.61, "lm_head"),
    "openai/gpt-oss-120b": (116.83, 5.13, "lm_head"),
    "mistralai/Mistral-7B-v0.1": (7.24, None, "all"),
    "mistralai/Mistral-7B-Instruct-v0.2": (7.24, None, "all"),
    "mistralai/Mistral-7B-v0.3": (7.25, None, "all"),
    "mistralai/Mixtral-8x7B-v0.1": (46.7, 12.9, "all"),
    "mistralai/Mixtral-8x22B-v0.1": (141.0, 39.0, "all"),
}


def _active(model: Model, convention: str) -> float:
    table = model.vocab_size * model.hidden_size
    drop = {"all": 0, "lm_head": 0 if model.tie_embeddings else table, "none": model.embedding_params()}
    return model.active_params() - drop[convention]


def test_every_entry_has_a_published_figure():
    assert set(model_names()) == set(PUBLISHED)
    assert len(model_names()) == len(set(model_names()))


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.hf_id)
def test_parameter_counts_match_published(model):
    total, active, convention = PUBLISHED[model.hf_id]
    assert model.total_params() / B == pytest.approx(total, rel=0.03)
    if active is None:
        assert model.active_params() == model.total_params()
    else:
        assert _active(model, convention) / B == pytest.approx(active, rel=0.03)


def test_kv_elements_per_token():
    llama, _ = resolve_model("meta-llama/Llama-3.1-70B")
    assert llama.kv_elements_per_token() == 80 * 2 * 8 * 128 == 163840
    deepseek, _ = resolve_model("deepseek-ai/DeepSeek-V3")
    assert deepseek.kv_elements_per_token() == 61 * (512 + 64)
    # Hybrids keep a KV cache only in their full-attention layers.
    qwen35, _ = resolve_model("Qwen/Qwen3.5-397B-A17B")
    assert qwen35.kv_elements_per_token() == 15 * 2 * 2 * 256
    assert qwen35.linear_layers == 45 and qwen35.linear_state_elements() > 0
    gpt_oss, _ = resolve_model("openai/gpt-oss-120b")
    assert gpt_oss.kv_elements_per_token() == 18 * 2 * 8 * 64 and gpt_oss.sliding_window == 128
    # GLM-5's sparse-attention indexer caches a 128-wide key beside the MLA latent.
    glm, _ = resolve_model("zai-org/GLM-5")
    assert glm.kv_elements_per_token() == 78 * (512 + 64 + 128)


@pytest.mark.parametrize("name, hf_id, precision", [
    ("llama-3.1-70b", "meta-llama/Llama-3.1-70B", "bf16"),
    ("Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B", "bf16"),
    ("META-LLAMA/LLAMA-3.1-8B-INSTRUCT", "meta-llama/Llama-3.1-8B", "bf16"),
    ("meta-llama/Meta-Llama-3.1-405B-Instruct-FP8", "meta-llama/Llama-3.1-405B", "fp8"),
    ("RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8-dynamic", "meta-llama/Llama-3.1-70B", "fp8"),
    ("nvidia/Llama-3.3-70B-Instruct-FP4", "meta-llama/Llama-3.3-70B-Instruct", "fp4"),
    ("deepseek-r1", "deepseek-ai/DeepSeek-R1", "fp8"),
    ("deepseek-ai/DeepSeek-R1-0528", "deepseek-ai/DeepSeek-R1", "fp8"),
    ("nvidia/DeepSeek-R1-NVFP4", "deepseek-ai/DeepSeek-R1", "fp4"),
    ("nvidia/DeepSeek-R1-0528-FP4-v2", "deepseek-ai/DeepSeek-R1", "fp4"),
    ("nvidia/DeepSeek-V3.1-NVFP4", "deepseek-ai/DeepSeek-V3.1", "fp4"),
    ("unsloth/DeepSeek-V3-0324-BF16", "deepseek-ai/DeepSeek-V3", "bf16"),
    ("Qwen/Qwen3-235B-A22B-FP8", "Qwen/Qwen3-235B-A22B", "fp8"),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "Qwen/Qwen3-235B-A22B", "fp8"),
    ("Qwen/Qwen3-32B-AWQ", "Qwen/Qwen3-32B", "int4"),
    ("Qwen/Qwen3-8B-GPTQ-Int4", "Qwen/Qwen3-8B", "int4"),
    ("qwen3_30b_a3b", "Qwen/Qwen3-30B-A3B", "bf16"),
    ("moonshotai/Kimi-K2.5", "moonshotai/Kimi-K2.5", "int4"),
    ("nvidia/Kimi-K2.5-NVFP4", "moonshotai/Kimi-K2.5", "fp4"),
    ("MiniMaxAI/MiniMax-M2.5", "MiniMaxAI/MiniMax-M2.5", "fp8"),
    ("lovethayo/MiniMax-M2.5-FP8-INT4-AWQ", "MiniMaxAI/MiniMax-M2.5", "int4"),
    ("RedHatAI/MiniMax-M2.5-quantized.w8a8", "MiniMaxAI/MiniMax-M2.5", "fp8"),
    ("zhipuai/GLM-5", "zai-org/GLM-5", "bf16"),
    ("zai-org/GLM-5-FP8", "zai-org/GLM-5", "fp8"),
    ("openai/gpt-oss-120b", "openai/gpt-oss-120b", "fp4"),
    ("gpt-oss-20b", "openai/gpt-oss-20b", "fp4"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mistralai/Mixtral-8x7B-v0.1", "bf16"),
    ("mistralai/Mistral-7B-Instruct-v0.3", "mistralai/Mistral-7B-v0.3", "bf16"),
    ("mistralai/Mixtral-8x22B-Instruct-v0.1", "mistralai/Mixtral-8x22B-v0.1", "bf16"),
    ("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8", "Qwen/Qwen3-Coder-480B-A35B-Instruct", "fp8"),
    ("Qwen/Qwen3-VL-235B-A22B-Thinking", "Qwen/Qwen3-VL-235B-A22B-Instruct", "bf16"),
    ("nvidia/Qwen3.5-122B-A10B-NVFP4", "Qwen/Qwen3.5-122B-A10B", "fp4"),
    ("nvidia/Qwen3.6-35B-A3B-NVFP4", "Qwen/Qwen3.6-35B-A3B", "fp4"),
    ("nvidia/Kimi-K2.6-NVFP4", "moonshotai/Kimi-K2.6", "fp4"),
    ("nvidia/MiniMax-M2.7-NVFP4", "MiniMaxAI/MiniMax-M2.7", "fp4"),
    ("zai-org/GLM-5.2-FP8", "zai-org/GLM-5.2", "fp8"),
])
def test_names_resolve(name, hf_id, precision):
    model, got = resolve_model(name)
    assert (model.hf_id, got) == (hf_id, precision)


@pytest.mark.parametrize("name", ["gpt-5", "", "Llama-3.1-70B-Turbo", "deepseek", "Qwen3-14B"])
def test_unknown_names_list_the_known_ones(name):
    with pytest.raises(UnknownName) as err:
        resolve_model(name)
    assert err.value.field == "model"
    assert "meta-llama/Llama-3.1-70B" in str(err.value) and "deepseek-ai/DeepSeek-R1" in str(err.value)


def _arch(model: Model) -> Model:
    """The model without its catalog aliases (a parsed config has none)."""
    return model._replace(aliases=())


def _config_of(model: Model) -> dict:
    """A config.json in the Hugging Face key style describing ``model``."""
    cfg = {"num_hidden_layers": model.num_layers, "hidden_size": model.hidden_size,
           "num_attention_heads": model.num_heads, "num_key_value_heads": model.num_kv_heads,
           "head_dim": model.head_dim, "intermediate_size": model.intermediate_size,
           "vocab_size": model.vocab_size, "tie_word_embeddings": model.tie_embeddings,
           "torch_dtype": "bfloat16"}
    if model.is_moe:
        cfg.update(n_routed_experts=model.num_experts, num_experts_per_tok=model.experts_per_token,
                   moe_intermediate_size=model.moe_intermediate_size,
                   n_shared_experts=model.shared_experts, first_k_dense_replace=model.dense_layers)
    if model.attention == "mla":
        cfg.update(kv_lora_rank=model.kv_lora_rank, q_lora_rank=model.q_lora_rank,
                   qk_rope_head_dim=model.qk_rope_head_dim, qk_nope_head_dim=model.qk_nope_head_dim,
                   v_head_dim=model.v_head_dim)
    return cfg


def test_llama_config_parses_to_the_catalog_entry():
    llama, _ = resolve_model("meta-llama/Llama-3.1-70B")
    cfg = dict(_config_of(llama), model_type="llama", max_position_embeddings=131072)
    assert model_from_config(cfg, llama.hf_id) == _arch(llama)


def test_deepseek_config_parses_to_the_catalog_entry():
    v3, _ = resolve_model("deepseek-ai/DeepSeek-V3")
    cfg = dict(_config_of(v3), model_type="deepseek_v3", num_nextn_predict_layers=1,
               quantization_config={"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]})
    del cfg["head_dim"]  # DeepSeek's config.json has none
    assert model_from_config(cfg, v3.hf_id) == _arch(v3)


def test_gpt_oss_config_parses_to_the_catalog_entry():
    oss, _ = resolve_model("openai/gpt-oss-120b")
    cfg = {"model_type": "gpt_oss", "num_hidden_layers": 36, "hidden_size": 2880,
           "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
           "intermediate_size": 2880, "vocab_size": 201088, "num_local_experts": 128,
           "num_experts_per_tok": 4, "experts_per_token": 4, "sliding_window": 128,
           "layer_types": ["sliding_attention", "full_attention"] * 18,
           "tie_word_embeddings": False, "quantization_config": {"quant_method": "mxfp4"}}
    assert model_from_config(cfg, oss.hf_id) == _arch(oss)


def test_hybrid_multimodal_config_parses_to_the_catalog_entry():
    qwen35, _ = resolve_model("Qwen/Qwen3.5-397B-A17B")
    text = {"model_type": "qwen3_5_moe_text", "num_hidden_layers": 60, "hidden_size": 4096,
            "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 256,
            "vocab_size": 248320, "num_experts": 512, "num_experts_per_tok": 10,
            "moe_intermediate_size": 1024, "shared_expert_intermediate_size": 1024,
            "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 64,
            "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
            "layer_types": ["linear_attention"] * 3 + ["full_attention"]}
    text["layer_types"] = text["layer_types"] * 15
    cfg = {"model_type": "qwen3_5_moe", "tie_word_embeddings": False, "text_config": text,
           "vision_config": {"depth": 27}}
    assert model_from_config(cfg, qwen35.hf_id) == _arch(qwen35)


@pytest.mark.parametrize("name, step, experts", [("meta-llama/Llama-4-Scout-17B-16E-Instruct", 1, 16),
                                                 ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", 2, 128)])
def test_llama4_config_parses_to_the_catalog_entry(name, step, experts):
    """Llama 4's keys: experts every ``interleave_moe_layer_step`` layers, the dense MLPs' width in
    ``intermediate_size_mlp``, a shared expert no key names, chunked attention."""
    llama4, _ = resolve_model(name)
    text = {"model_type": "llama4_text", "num_hidden_layers": 48, "hidden_size": 5120,
            "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
            "intermediate_size": 8192, "intermediate_size_mlp": 16384, "vocab_size": 202048,
            "num_local_experts": experts, "num_experts_per_tok": 1, "interleave_moe_layer_step": step,
            "attention_chunk_size": 8192, "max_position_embeddings": 1048576}
    cfg = {"model_type": "llama4", "text_config": text, "vision_config": {"num_hidden_layers": 34}}
    assert model_from_config(cfg, llama4.hf_id) == _arch(llama4)


def test_hybrid_mamba_config_is_refused_by_name():
    cfg = {"model_type": "nemotron_h", "num_hidden_layers": 52, "hidden_size": 2688, "num_attention_heads": 32,
           "vocab_size": 131072, "intermediate_size": 1856, "hybrid_override_pattern": "MEMEM*EMEMEM*"}
    with pytest.raises(ModelError) as err:
        model_from_config(cfg, "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    assert err.value.field == "model" and "Mamba" in err.value.message


def test_mistral_sliding_window_and_qwen_disabled_window():
    v01, _ = resolve_model("mistralai/Mistral-7B-v0.1")
    cfg = dict(_config_of(v01), model_type="mistral", sliding_window=4096, max_position_embeddings=32768)
    assert model_from_config(cfg, v01.hf_id) == _arch(v01)
    qwen, _ = resolve_model("Qwen/Qwen3-8B")
    cfg = dict(_config_of(qwen), model_type="qwen3", sliding_window=None, use_sliding_window=False)
    assert model_from_config(cfg, qwen.hf_id) == _arch(qwen)


@pytest.mark.parametrize("quant, precision", [
    ({"quant_method": "fp8"}, "fp8"),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "fp4"),
    ({"quant_method": "awq", "bits": 4}, "int4"),
    ({"quant_method": "compressed-tensors",
      "config_groups": {"g0": {"weights": {"num_bits": 4, "type": "int", "group_size": 32}}}}, "int4"),
])
def test_config_quantization_sets_precision(quant, precision):
    llama, _ = resolve_model("meta-llama/Llama-3.1-8B")
    cfg = dict(_config_of(llama), quantization_config=quant)
    assert model_from_config(cfg, "x/y").native_precision == precision


def test_missing_required_key_is_a_model_error():
    llama, _ = resolve_model("meta-llama/Llama-3.1-8B")
    cfg = _config_of(llama)
    del cfg["num_hidden_layers"]
    with pytest.raises(ModelError, match="config.json lacks num_hidden_layers"):
        model_from_config(cfg, "x/y")


def test_load_model_reads_a_local_config(tmp_path):
    qwen, _ = resolve_model("Qwen/Qwen3-235B-A22B")
    cfg = dict(_config_of(qwen), model_type="qwen3_moe", _name_or_path="Qwen/Qwen3-235B-A22B",
               quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128]})
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    for path in (tmp_path, tmp_path / "config.json"):
        model, precision = hub.load_model(str(path))
        assert precision == "fp8"
        assert model.hf_id == "Qwen/Qwen3-235B-A22B"
        assert model.total_params() == qwen.total_params()
        assert model.kv_elements_per_token() == qwen.kv_elements_per_token()


def test_load_model_bad_local_files(tmp_path):
    with pytest.raises(ModelError, match="holds no config.json"):
        hub.load_model(str(tmp_path))
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ModelError, match="not valid JSON"):
        hub.load_model(str(bad))


def test_load_model_prefers_the_catalog():
    assert hub.load_model("nvidia/DeepSeek-R1-NVFP4") == resolve_model("deepseek-r1")[:1] + ("fp4",)


def test_load_model_offline_unknown_id_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    with pytest.raises(ModelError) as err:
        hub.load_model("example-org/not-a-catalog-model")
    message = str(err.value)
    assert "example-org/not-a-catalog-model is not in the catalog and could not be fetched" in message
    assert "known: " in message and "meta-llama/Llama-3.1-70B" in message


def test_load_model_offline_reads_a_hub_id_from_the_hub_cache(monkeypatch, tmp_path):
    # A config.json fetched earlier sits in the Hub cache (its own layout: refs name the
    # snapshot); offline, load_model reads it from there through huggingface_hub.
    qwen, _ = resolve_model("Qwen/Qwen3-235B-A22B")
    cfg = dict(_config_of(qwen), model_type="qwen3_moe", torch_dtype="bfloat16")
    repo = tmp_path / "hub" / "models--example-org--cached-moe"
    revision = "0123456789abcdef0123456789abcdef01234567"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    (repo / "snapshots" / revision).mkdir(parents=True)
    (repo / "snapshots" / revision / "config.json").write_text(json.dumps(cfg))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    model, precision = hub.load_model("example-org/cached-moe")
    assert (model.hf_id, precision) == ("example-org/cached-moe", "bf16")
    assert model.total_params() == qwen.total_params()


def test_load_model_rejects_a_malformed_id():
    with pytest.raises(ModelError, match="not a catalog model, a local config.json or a Hugging Face id"):
        hub.load_model("no such model!")
