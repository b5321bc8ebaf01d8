"""Model catalog: architecture facts of well-known open models, and name resolution.

Every figure comes from the model's released ``config.json``. Parameter counts are in
parameters, sizes in elements (see ``profiler.model.models.Model``). Pure: no I/O, no network;
``profiler.hub`` reads config files and the Hugging Face Hub.

``resolve_model`` maps a user's name to (Model, weights precision): Hugging Face ids in any
case, with or without the organisation, short aliases, Base/Instruct/dated variants, and
quantized re-releases ("-FP8", "-NVFP4", "-AWQ", ...) which keep the base architecture and
change only the precision.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from profiler.model.errors import ModelError, UnknownName
from profiler.model.models import Model


def _variant(base: Model, hf_id: str, *aliases: str, **changes: Any) -> Model:
    """Another release with the same architecture (e.g. DeepSeek-R1 on DeepSeek-V3)."""
    return base._replace(hf_id=hf_id, aliases=tuple(aliases), **changes)


# --- Llama 3.1 / 3.3 (GQA with 8 KV heads, untied embeddings, vocab 128256) ----------------
_LLAMA_31_8B = Model("meta-llama/Llama-3.1-8B", num_layers=32, hidden_size=4096, num_heads=32,
                     num_kv_heads=8, head_dim=128, intermediate_size=14336, vocab_size=128256,
                     aliases=("meta-llama/Llama-3.1-8B-Instruct", "Meta-Llama-3.1-8B",
                              "Meta-Llama-3.1-8B-Instruct", "llama3.1-8b"))
_LLAMA_31_70B = Model("meta-llama/Llama-3.1-70B", num_layers=80, hidden_size=8192, num_heads=64,
                      num_kv_heads=8, head_dim=128, intermediate_size=28672, vocab_size=128256,
                      aliases=("meta-llama/Llama-3.1-70B-Instruct", "Meta-Llama-3.1-70B",
                               "Meta-Llama-3.1-70B-Instruct", "llama3.1-70b"))
_LLAMA_31_405B = Model("meta-llama/Llama-3.1-405B", num_layers=126, hidden_size=16384, num_heads=128,
                       num_kv_heads=8, head_dim=128, intermediate_size=53248, vocab_size=128256,
                       aliases=("meta-llama/Llama-3.1-405B-Instruct", "Meta-Llama-3.1-405B",
                                "Meta-Llama-3.1-405B-Instruct", "llama3.1-405b"))
_LLAMA_33_70B = _variant(_LLAMA_31_70B, "meta-llama/Llama-3.3-70B-Instruct", "llama3.3-70b",
                         "llama-3.3-70b")

# --- Llama 4 (MoE: top-1 of the routed experts plus one shared expert, all 8192 wide) ---------
# Every fourth layer attends globally (no RoPE); the others attend within 8192-token chunks,
# counted as an 8192-token window. Maverick alternates dense layers (MLP 16384 wide) with MoE
# layers; every Scout layer is MoE. The vision encoder is not counted.
_LLAMA4_SCOUT = Model("meta-llama/Llama-4-Scout-17B-16E-Instruct", num_layers=48, hidden_size=5120,
                      num_heads=40, num_kv_heads=8, head_dim=128, intermediate_size=16384,
                      vocab_size=202048, num_experts=16, experts_per_token=1, moe_intermediate_size=8192,
                      shared_experts=1, kv_layers=12, sliding_window=8192,
                      aliases=("meta-llama/Llama-4-Scout-17B-16E", "llama-4-scout"))
_LLAMA4_MAVERICK = _variant(_LLAMA4_SCOUT, "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
                            "meta-llama/Llama-4-Maverick-17B-128E", "llama-4-maverick",
                            num_experts=128, dense_layers=24)

# --- Qwen3 (head_dim 128 independent of hidden size; untied embeddings from 8B up) -----------
_QWEN3_06B = Model("Qwen/Qwen3-0.6B", num_layers=28, hidden_size=1024, num_heads=16, num_kv_heads=8,
                   head_dim=128, intermediate_size=3072, vocab_size=151936, tie_embeddings=True,
                   aliases=("qwen3-0.6b", "Qwen/Qwen3-0.6B-Base"))
_QWEN3_17B = Model("Qwen/Qwen3-1.7B", num_layers=28, hidden_size=2048, num_heads=16, num_kv_heads=8,
                   head_dim=128, intermediate_size=6144, vocab_size=151936, tie_embeddings=True,
                   aliases=("qwen3-1.7b", "Qwen/Qwen3-1.7B-Base"))
_QWEN3_4B = Model("Qwen/Qwen3-4B", num_layers=36, hidden_size=2560, num_heads=32, num_kv_heads=8,
                  head_dim=128, intermediate_size=9728, vocab_size=151936, tie_embeddings=True,
                  aliases=("qwen3-4b", "Qwen/Qwen3-4B-Base", "Qwen/Qwen3-4B-Instruct-2507"))
_QWEN3_8B = Model("Qwen/Qwen3-8B", num_layers=36, hidden_size=4096, num_heads=32, num_kv_heads=8,
                  head_dim=128, intermediate_size=12288, vocab_size=151936, aliases=("qwen3-8b",))
_QWEN3_32B = Model("Qwen/Qwen3-32B", num_layers=64, hidden_size=5120, num_heads=64, num_kv_heads=8,
                   head_dim=128, intermediate_size=25600, vocab_size=151936)
_QWEN3_30B_A3B = Model("Qwen/Qwen3-30B-A3B", num_layers=48, hidden_size=2048, num_heads=32,
                       num_kv_heads=4, head_dim=128, intermediate_size=6144, vocab_size=151936,
                       num_experts=128, experts_per_token=8, moe_intermediate_size=768,
                       aliases=("qwen3-30b",))
_QWEN3_235B_A22B = Model("Qwen/Qwen3-235B-A22B", num_layers=94, hidden_size=4096, num_heads=64,
                         num_kv_heads=4, head_dim=128, intermediate_size=12288, vocab_size=151936,
                         num_experts=128, experts_per_token=8, moe_intermediate_size=1536,
                         aliases=("qwen3-235b",))
_QWEN3_CODER_480B = Model("Qwen/Qwen3-Coder-480B-A35B-Instruct", num_layers=62, hidden_size=6144,
                          num_heads=96, num_kv_heads=8, head_dim=128, intermediate_size=8192,
                          vocab_size=151936, num_experts=160, experts_per_token=8,
                          moe_intermediate_size=2560, aliases=("qwen3-coder-480b",))
# Qwen3-VL: the Qwen3 text models behind a vision encoder (text_config; the 0.4-0.6B encoder
# and the image tokens it adds to a prompt are not counted).
_QWEN3_VL = (
    _variant(_QWEN3_17B, "Qwen/Qwen3-VL-2B-Instruct", "Qwen/Qwen3-VL-2B-Thinking"),
    _variant(_QWEN3_4B, "Qwen/Qwen3-VL-4B-Instruct", "Qwen/Qwen3-VL-4B-Thinking"),
    _variant(_QWEN3_8B, "Qwen/Qwen3-VL-8B-Instruct", "Qwen/Qwen3-VL-8B-Thinking"),
    _variant(_QWEN3_32B, "Qwen/Qwen3-VL-32B-Instruct", "Qwen/Qwen3-VL-32B-Thinking"),
    _variant(_QWEN3_30B_A3B, "Qwen/Qwen3-VL-30B-A3B-Instruct", "Qwen/Qwen3-VL-30B-A3B-Thinking"),
    _variant(_QWEN3_235B_A22B, "Qwen/Qwen3-VL-235B-A22B-Instruct", "Qwen/Qwen3-VL-235B-A22B-Thinking"),
)

# Qwen3.5-397B-A17B: hybrid. Every 4th layer is gated full attention (32 heads of 256, 2 KV
# heads; q also emits an output gate); the other 45 are gated-DeltaNet linear attention (16
# q/k heads and 64 v heads of 128, conv kernel 4) whose state is fixed-size per sequence.
# 512 routed experts (top-10) + 1 shared expert, all 1024 wide; no dense layers.
_QWEN35_397B = Model("Qwen/Qwen3.5-397B-A17B", num_layers=60, hidden_size=4096, num_heads=32,
                     num_kv_heads=2, head_dim=256, intermediate_size=1024, vocab_size=248320,
                     num_experts=512, experts_per_token=10, moe_intermediate_size=1024,
                     shared_experts=1, kv_layers=15, attn_output_gate=True,
                     linear_num_key_heads=16, linear_num_value_heads=64, linear_key_head_dim=128,
                     linear_value_head_dim=128, linear_conv_kernel=4,
                     aliases=("qwen3.5-397b",))
# The smaller Qwen3.5 models share the layout (every 4th layer gated full attention);
# Qwen3.6 re-releases two of them with the same architecture.
_QWEN35_122B = Model("Qwen/Qwen3.5-122B-A10B", num_layers=48, hidden_size=3072, num_heads=32,
                     num_kv_heads=2, head_dim=256, intermediate_size=1024, vocab_size=248320,
                     num_experts=256, experts_per_token=8, moe_intermediate_size=1024,
                     shared_experts=1, kv_layers=12, attn_output_gate=True,
                     linear_num_key_heads=16, linear_num_value_heads=64, linear_key_head_dim=128,
                     linear_value_head_dim=128, linear_conv_kernel=4, aliases=("qwen3.5-122b",))
_QWEN35_35B = Model("Qwen/Qwen3.5-35B-A3B", num_layers=40, hidden_size=2048, num_heads=16,
                    num_kv_heads=2, head_dim=256, intermediate_size=512, vocab_size=248320,
                    num_experts=256, experts_per_token=8, moe_intermediate_size=512,
                    shared_experts=1, kv_layers=10, attn_output_gate=True,
                    linear_num_key_heads=16, linear_num_value_heads=32, linear_key_head_dim=128,
                    linear_value_head_dim=128, linear_conv_kernel=4, aliases=("qwen3.5-35b",))
_QWEN35_27B = Model("Qwen/Qwen3.5-27B", num_layers=64, hidden_size=5120, num_heads=24,
                    num_kv_heads=4, head_dim=256, intermediate_size=17408, vocab_size=248320,
                    kv_layers=16, attn_output_gate=True, linear_num_key_heads=16,
                    linear_num_value_heads=48, linear_key_head_dim=128, linear_value_head_dim=128,
                    linear_conv_kernel=4, aliases=("qwen3.5-27b",))
_QWEN36_35B = _variant(_QWEN35_35B, "Qwen/Qwen3.6-35B-A3B", "qwen3.6-35b")
_QWEN36_27B = _variant(_QWEN35_27B, "Qwen/Qwen3.6-27B", "qwen3.6-27b")

# --- DeepSeek-V3 family (MLA, 256 routed + 1 shared expert, first 3 layers dense) -----------
# The multi-token-prediction layer (num_nextn_predict_layers=1) is not counted, as in the
# published 671B. Weights are released in fp8 (128x128 block scales).
_DEEPSEEK_V3 = Model("deepseek-ai/DeepSeek-V3", num_layers=61, hidden_size=7168, num_heads=128,
                     num_kv_heads=128, head_dim=192, intermediate_size=18432, vocab_size=129280,
                     native_precision="fp8", attention="mla", kv_lora_rank=512, q_lora_rank=1536,
                     qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, num_experts=256,
                     experts_per_token=8, moe_intermediate_size=2048, shared_experts=1,
                     dense_layers=3, aliases=("deepseek-ai/DeepSeek-V3-Base", "DeepSeek-V3-0324"))
_DEEPSEEK_R1 = _variant(_DEEPSEEK_V3, "deepseek-ai/DeepSeek-R1", "DeepSeek-R1-0528",
                        "DeepSeek-R1-Zero")
_DEEPSEEK_V31 = _variant(_DEEPSEEK_V3, "deepseek-ai/DeepSeek-V3.1", "DeepSeek-V3.1-Base",
                         "DeepSeek-V3.1-Terminus")
# DeepSeek-V3.2 adds the sparse-attention indexer (64 heads of 128, top-2048 keys per query).
_DEEPSEEK_V32 = _variant(_DEEPSEEK_V3, "deepseek-ai/DeepSeek-V3.2", "DeepSeek-V3.2-Exp",
                         "DeepSeek-V3.2-Speciale", index_n_heads=64, index_head_dim=128, index_topk=2048)

# --- Kimi K2 family (DeepSeek-V3 architecture: 64 heads, 384 experts, 1 dense layer) -------
# Kimi-K2.5 is multimodal; this is its text model (text_config). The ~0.4B vision encoder is
# not counted. Its routed experts ship in int4 (group 32); attention, shared expert and
# dense layer stay bf16, so "int4" describes the bulk (~97%) of the weights.
_KIMI_K25 = Model("moonshotai/Kimi-K2.5", num_layers=61, hidden_size=7168, num_heads=64,
                  num_kv_heads=64, head_dim=192, intermediate_size=18432, vocab_size=163840,
                  native_precision="int4", attention="mla", kv_lora_rank=512, q_lora_rank=1536,
                  qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, num_experts=384,
                  experts_per_token=8, moe_intermediate_size=2048, shared_experts=1,
                  dense_layers=1, aliases=("kimi-k2.5",))
_KIMI_K2 = _variant(_KIMI_K25, "moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2-Base",
                    "Kimi-K2-Instruct-0905", "kimi-k2", native_precision="fp8")
_KIMI_K2_THINKING = _variant(_KIMI_K25, "moonshotai/Kimi-K2-Thinking", native_precision="int4")
# Kimi-K2.6 and K2.7-Code re-release K2.5's architecture (taken to ship its weights the same way).
_KIMI_K26 = _variant(_KIMI_K25, "moonshotai/Kimi-K2.6", "kimi-k2.6")
_KIMI_K27_CODE = _variant(_KIMI_K25, "moonshotai/Kimi-K2.7-Code", "kimi-k2.7-code")

# --- MiniMax-M2 family (GQA 48/8 heads of 128, 256 experts of 1536, no shared expert) ------
# The 3 multi-token-prediction modules are not counted. Weights are released in fp8.
_MINIMAX_M25 = Model("MiniMaxAI/MiniMax-M2.5", num_layers=62, hidden_size=3072, num_heads=48,
                     num_kv_heads=8, head_dim=128, intermediate_size=1536, vocab_size=200064,
                     native_precision="fp8", num_experts=256, experts_per_token=8,
                     moe_intermediate_size=1536, aliases=("minimax-m2.5",))
_MINIMAX_M2 = _variant(_MINIMAX_M25, "MiniMaxAI/MiniMax-M2", "minimax-m2")
_MINIMAX_M21 = _variant(_MINIMAX_M25, "MiniMaxAI/MiniMax-M2.1", "minimax-m2.1")
_MINIMAX_M27 = _variant(_MINIMAX_M25, "MiniMaxAI/MiniMax-M2.7", "minimax-m2.7")

# --- GLM-5 (MLA + DeepSeek sparse attention, 256 routed + 1 shared expert, 3 dense layers) --
# The indexer has 32 heads of 128 and selects 2048 keys per query. Released in bf16
# (a separate -FP8 repository exists). The MTP layer is not counted.
_GLM5 = Model("zai-org/GLM-5", num_layers=78, hidden_size=6144, num_heads=64, num_kv_heads=64,
              head_dim=256, intermediate_size=12288, vocab_size=154880, attention="mla",
              kv_lora_rank=512, q_lora_rank=2048, qk_rope_head_dim=64, qk_nope_head_dim=192,
              v_head_dim=256, num_experts=256, experts_per_token=8, moe_intermediate_size=2048,
              shared_experts=1, dense_layers=3, index_n_heads=32, index_head_dim=128,
              index_topk=2048, aliases=("zhipuai/GLM-5", "THUDM/GLM-5", "glm5"))
_GLM51 = _variant(_GLM5, "zai-org/GLM-5.1", "glm-5.1")
_GLM52 = _variant(_GLM5, "zai-org/GLM-5.2", "glm-5.2")

# --- gpt-oss (alternating 128-token sliding-window and full attention; MXFP4 experts) ------
# Attention sinks and projection biases (~0.1% of parameters) are not counted. Experts are
# released in MXFP4, attention and embeddings in bf16.
_GPT_OSS_120B = Model("openai/gpt-oss-120b", num_layers=36, hidden_size=2880, num_heads=64,
                      num_kv_heads=8, head_dim=64, intermediate_size=2880, vocab_size=201088,
                      native_precision="fp4", num_experts=128, experts_per_token=4,
                      moe_intermediate_size=2880, kv_layers=18, sliding_window=128)
_GPT_OSS_20B = Model("openai/gpt-oss-20b", num_layers=24, hidden_size=2880, num_heads=64,
                     num_kv_heads=8, head_dim=64, intermediate_size=2880, vocab_size=201088,
                     native_precision="fp4", num_experts=32, experts_per_token=4,
                     moe_intermediate_size=2880, kv_layers=12, sliding_window=128)

# --- Mistral / Mixtral (GQA 32/8 heads of 128) ----------------------------------------------
# Mistral-7B-v0.1 uses a 4096-token sliding window in every layer (no full-KV layer);
# v0.2 and v0.3 dropped it, and v0.3 extended the vocabulary to 32768.
_MISTRAL_7B_V01 = Model("mistralai/Mistral-7B-v0.1", num_layers=32, hidden_size=4096, num_heads=32,
                        num_kv_heads=8, head_dim=128, intermediate_size=14336, vocab_size=32000,
                        kv_layers=0, sliding_window=4096,
                        aliases=("mistralai/Mistral-7B-Instruct-v0.1",))
_MISTRAL_7B_V02 = _variant(_MISTRAL_7B_V01, "mistralai/Mistral-7B-Instruct-v0.2",
                           "mistralai/Mistral-7B-v0.2", kv_layers=None, sliding_window=0)
_MISTRAL_7B_V03 = _variant(_MISTRAL_7B_V02, "mistralai/Mistral-7B-v0.3",
                           "mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b", vocab_size=32768)
_MIXTRAL_8X7B = Model("mistralai/Mixtral-8x7B-v0.1", num_layers=32, hidden_size=4096, num_heads=32,
                      num_kv_heads=8, head_dim=128, intermediate_size=14336, vocab_size=32000,
                      num_experts=8, experts_per_token=2, moe_intermediate_size=14336,
                      aliases=("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"))
_MIXTRAL_8X22B = Model("mistralai/Mixtral-8x22B-v0.1", num_layers=56, hidden_size=6144, num_heads=48,
                       num_kv_heads=8, head_dim=128, intermediate_size=16384, vocab_size=32000,
                       num_experts=8, experts_per_token=2, moe_intermediate_size=16384,
                       aliases=("mistralai/Mixtral-8x22B-Instruct-v0.1", "mixtral-8x22b"))

MODELS: tuple[Model, ...] = (
    _LLAMA_31_8B, _LLAMA_31_70B, _LLAMA_31_405B, _LLAMA_33_70B, _LLAMA4_SCOUT, _LLAMA4_MAVERICK,
    _QWEN3_06B, _QWEN3_17B, _QWEN3_4B, _QWEN3_8B, _QWEN3_32B, _QWEN3_30B_A3B, _QWEN3_235B_A22B,
    _QWEN3_CODER_480B, *_QWEN3_VL,
    _QWEN35_397B, _QWEN35_122B, _QWEN35_35B, _QWEN35_27B, _QWEN36_35B, _QWEN36_27B,
    _DEEPSEEK_V3, _DEEPSEEK_R1, _DEEPSEEK_V31, _DEEPSEEK_V32,
    _KIMI_K25, _KIMI_K2, _KIMI_K2_THINKING, _KIMI_K26, _KIMI_K27_CODE,
    _MINIMAX_M25, _MINIMAX_M2, _MINIMAX_M21, _MINIMAX_M27,
    _GLM5, _GLM51, _GLM52,
    _GPT_OSS_20B, _GPT_OSS_120B,
    _MISTRAL_7B_V01, _MISTRAL_7B_V02, _MISTRAL_7B_V03, _MIXTRAL_8X7B, _MIXTRAL_8X22B,
)


def model_names() -> list[str]:
    """Canonical Hugging Face ids of the catalog, in catalog order."""
    return [m.hf_id for m in MODELS]


# --- name resolution ---------------------------------------------------------------------

# Name tokens that mark a quantized re-release, and the weights precision they imply.
# 8-bit integer (W8A8) checkpoints map to "fp8": same width and, on GPUs with fp8 tensor
# cores, the same math rate; the performance model has no separate int8 path.
_QUANT_TOKENS: tuple[tuple[str, str], ...] = (
    (r"nvfp4|mxfp4|fp4|w4a4|w4a4-nvfp4", "fp4"),
    (r"awq|gptq|int4|w4a16|w4a8|4bit|q4|autoround", "int4"),
    (r"fp8|float8|mxfp8|w8a8|w8a16|int8|8bit", "fp8"),
    (r"bf16|fp16|bfloat16|float16", "bf16"),
)
# Tokens that decorate a quantized name without changing the precision ("-FP8-dynamic").
_DECOR_TOKEN = re.compile(r"dynamic|static|block|quantized|ct|hf|v\d+|g\d+|kv|mlx|gguf")
# Tokens of Base/Instruct/dated releases that share the architecture of the plain name.
_VARIANT_TOKEN = re.compile(r"instruct|chat|base|thinking|reasoning|it|\d{4}")
# Narrower formats win when a name carries several ("-FP8-INT4-AWQ": int4 experts).
_PRECISION_RANK = {"fp4": 0, "int4": 1, "fp8": 2, "bf16": 3}


def _key(name: str) -> str:
    """Lower-case repository part of a name, with spaces and underscores read as '-'."""
    repo = name.strip().rsplit("/", 1)[-1]
    return re.sub(r"[\s_]+", "-", repo.lower())


@cache
def _index() -> dict[str, Model]:
    """Every catalog name and alias, by ``_key``; built once (callers only read it)."""
    index: dict[str, Model] = {}
    for model in MODELS:
        for name in (model.hf_id, *model.aliases):
            index.setdefault(_key(name), model)
    return index


def _token_precision(token: str) -> str | None:
    token = token.removeprefix("quantized.")
    for pattern, precision in _QUANT_TOKENS:
        if re.fullmatch(pattern, token):
            return precision
    return None


# A Hugging Face model id, ``org/name`` (the Hub's own limits: 96 characters a part, starting
# with a letter or digit).
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")


def is_hub_id(name: str) -> bool:
    """Whether ``name`` (surrounding spaces ignored) is spelled as a Hugging Face model id."""
    return HUB_ID.fullmatch(name.strip()) is not None


def resolve_model(name: str) -> tuple[Model, str]:
    """The catalog Model for ``name`` and the weights precision the name implies.

    Accepts Hugging Face ids (any case; any organisation, so re-uploads such as
    ``RedHatAI/...`` or ``nvidia/...`` resolve too), aliases such as ``llama-3.1-70b`` or
    ``deepseek-r1``, and trailing Base/Instruct/dated tokens. Quantization tokens at the end
    of the name set the precision: NVFP4/MXFP4/FP4 -> "fp4", AWQ/GPTQ/INT4/W4A16 -> "int4",
    FP8/W8A8 -> "fp8", BF16 -> "bf16"; without one, the model's native precision.
    Raises UnknownName (listing the known models) when nothing matches.
    """
    index = _index()
    tokens = _key(name).split("-")
    found: list[str] = []
    while tokens and tokens != [""]:
        model = index.get("-".join(tokens))
        if model is not None:
            precision = min(found, key=_PRECISION_RANK.__getitem__) if found else model.native_precision
            return model, precision
        last = tokens.pop()
        precision = _token_precision(last)
        if precision is not None:
            found.append(precision)
        elif not (_DECOR_TOKEN.fullmatch(last) or _VARIANT_TOKEN.fullmatch(last)):
            break
    raise UnknownName("model", name, model_names())


# --- config.json parsing -----------------------------------------------------------------

_GATED_ATTENTION_TYPES = {"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"}


def _text_config(config: dict) -> dict:
    """Flatten multimodal wrappers: the text model's keys, falling back to the top level."""
    text = config.get("text_config") or config.get("language_config") or config.get("llm_config")
    if isinstance(text, dict):
        merged = {k: v for k, v in config.items() if k not in ("text_config", "vision_config")}
        merged.update({k: v for k, v in text.items() if v is not None})
        if "quantization_config" in config:
            merged["quantization_config"] = config["quantization_config"]
        return merged
    return config


def _int(cfg: dict, *keys: str, default: int | None = None) -> int:
    """First present, non-null integer among ``keys``; ModelError when required and absent."""
    for key in keys:
        value = cfg.get(key)
        if value is not None:
            try:
                return int(value)
            except (TypeError, ValueError):
                raise ModelError("model", f"config.json has a non-integer {key}: {value!r}") from None
    if default is None:
        raise ModelError("model", f"config.json lacks {keys[0]}")
    return default


def _config_precision(cfg: dict) -> str:
    """Weights precision stated by ``quantization_config``, else by the checkpoint dtype."""
    quant = cfg.get("quantization_config")
    if isinstance(quant, dict):
        method = str(quant.get("quant_method", "")).lower()
        algo = str(quant.get("quant_algo", "")).lower()
        if method in ("mxfp4",) or "fp4" in algo or "nvfp4" in str(quant.get("format", "")).lower():
            return "fp4"
        if method == "fp8" or "fp8" in algo:
            return "fp8"
        if method in ("awq", "gptq", "autoround", "auto-round") or quant.get("bits") == 4:
            return "int4"
        if method == "compressed-tensors":
            widths = []
            for group in (quant.get("config_groups") or {}).values():
                weights = (group or {}).get("weights") or {}
                bits, kind = weights.get("num_bits"), str(weights.get("type", "int"))
                if bits == 4:
                    widths.append("fp4" if kind == "float" else "int4")
                elif bits == 8:
                    widths.append("fp8")
            if widths:
                return min(widths, key=_PRECISION_RANK.__getitem__)
        if quant.get("bits") == 8 or "int8" in algo or "w8a8" in algo:
            return "fp8"
    return "bf16"


def _attention_layers(cfg: dict, num_layers: int) -> tuple[int | None, int]:
    """(full-KV layers or None for all, sliding window) from layer_types and window keys.

    Llama 4's chunked attention (``attention_chunk_size``) attends within chunks in all but the
    global (NoPE) layers, every fourth unless ``no_rope_layers`` marks them (0 = global); a
    chunk is counted as a window of its size.
    """
    window = cfg.get("sliding_window")
    chunk = cfg.get("attention_chunk_size")
    if chunk:
        no_rope = cfg.get("no_rope_layers")
        if isinstance(no_rope, list) and len(no_rope) == num_layers:
            return sum(1 for flag in no_rope if not flag), int(chunk)
        return num_layers // 4, int(chunk)
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        full = sum(1 for t in layer_types if t == "full_attention")
        sliding = any("sliding" in str(t) for t in layer_types)
        if full == len(layer_types):
            return None, 0
        return full, int(window or 0) if sliding else 0
    interval = cfg.get("full_attention_interval")
    if interval and cfg.get("linear_num_value_heads"):
        return num_layers // int(interval), 0
    uses_window = cfg.get("use_sliding_window", True) is not False
    max_positions = cfg.get("max_position_embeddings")
    if window and uses_window and not (max_positions and int(window) >= int(max_positions)):
        return 0, int(window)
    return None, 0


def _dense_layers(cfg: dict, num_layers: int) -> int:
    step = cfg.get("interleave_moe_layer_step")  # Llama 4: every step-th layer is MoE
    if step and int(step) > 1:
        return num_layers - num_layers // int(step)
    mlp_types = cfg.get("mlp_layer_types")
    if isinstance(mlp_types, list):
        return sum(1 for t in mlp_types if t == "dense")
    if cfg.get("first_k_dense_replace") is not None:
        return int(cfg["first_k_dense_replace"])
    return len(cfg.get("mlp_only_layers") or ())


def model_from_config(config: dict, hf_id: str) -> Model:
    """A Model from a Hugging Face ``config.json`` dict.

    Reads the Llama/Mistral/Qwen2/Qwen3(-MoE)/Qwen3.5/Mixtral/DeepSeek-V3/Kimi/GLM/gpt-oss/
    MiniMax key conventions (and multimodal wrappers' ``text_config``); anything else with
    the usual Llama-style keys works too. Missing required keys raise ModelError naming them.
    """
    if not isinstance(config, dict):
        raise ModelError("model", "config.json is not a JSON object")
    cfg = _text_config(config)
    model_type = str(cfg.get("model_type", "")).lower()
    if cfg.get("hybrid_override_pattern"):
        raise ModelError("model", "config.json describes a hybrid Mamba model (hybrid_override_pattern, e.g. "
                                  "Nemotron-H): its Mamba layers are not modelled")
    num_layers = _int(cfg, "num_hidden_layers", "n_layers", "num_layers")
    hidden = _int(cfg, "hidden_size", "d_model", "dim")
    heads = _int(cfg, "num_attention_heads", "n_heads")
    vocab = _int(cfg, "vocab_size")

    num_experts = _int(cfg, "n_routed_experts", "num_local_experts", "num_experts", default=0)
    moe_width = 0
    if num_experts:
        moe_width = _int(cfg, "moe_intermediate_size", "intermediate_size")
    # Llama 4 names its dense MLPs' width intermediate_size_mlp (intermediate_size is the experts').
    intermediate = _int(cfg, "intermediate_size_mlp", "intermediate_size", "ffn_hidden_size", default=moe_width or -1)
    if intermediate < 0:
        raise ModelError("model", "config.json lacks intermediate_size")

    fields: dict[str, Any] = {}
    if num_experts:
        shared = _int(cfg, "n_shared_experts", default=0)
        shared_width = _int(cfg, "shared_expert_intermediate_size", default=0)
        if not shared and shared_width:
            shared = max(1, round(shared_width / moe_width))
        if model_type.startswith("llama4"):  # every Llama 4 MoE layer has one shared expert; no key says so
            shared = 1
        fields.update(num_experts=num_experts, moe_intermediate_size=moe_width, shared_experts=shared,
                      experts_per_token=_int(cfg, "num_experts_per_tok", "experts_per_token",
                                             "num_experts_per_token", "moe_topk"),
                      dense_layers=_dense_layers(cfg, num_layers))

    if cfg.get("kv_lora_rank"):
        rope = _int(cfg, "qk_rope_head_dim")
        nope = _int(cfg, "qk_nope_head_dim")
        fields.update(attention="mla", kv_lora_rank=_int(cfg, "kv_lora_rank"),
                      q_lora_rank=_int(cfg, "q_lora_rank", default=0), qk_rope_head_dim=rope,
                      qk_nope_head_dim=nope, v_head_dim=_int(cfg, "v_head_dim"))
        kv_heads, head_dim = heads, nope + rope
        if cfg.get("index_topk"):
            fields.update(index_n_heads=_int(cfg, "index_n_heads"),
                          index_head_dim=_int(cfg, "index_head_dim"),
                          index_topk=_int(cfg, "index_topk"))
    else:
        kv_heads = _int(cfg, "num_key_value_heads", "n_kv_heads", default=heads)
        head_dim = _int(cfg, "head_dim", default=hidden // heads)

    if cfg.get("linear_num_value_heads"):
        fields.update(linear_num_key_heads=_int(cfg, "linear_num_key_heads"),
                      linear_num_value_heads=_int(cfg, "linear_num_value_heads"),
                      linear_key_head_dim=_int(cfg, "linear_key_head_dim"),
                      linear_value_head_dim=_int(cfg, "linear_value_head_dim"),
                      linear_conv_kernel=_int(cfg, "linear_conv_kernel_dim", default=4))
    gate = cfg.get("attn_output_gate")
    fields["attn_output_gate"] = bool(gate) if gate is not None else model_type in _GATED_ATTENTION_TYPES

    kv_layers, window = _attention_layers(cfg, num_layers)
    return Model(hf_id, num_layers=num_layers, hidden_size=hidden, num_heads=heads,
                 num_kv_heads=kv_heads, head_dim=head_dim, intermediate_size=intermediate,
                 vocab_size=vocab, native_precision=_config_precision(cfg), kv_layers=kv_layers,
                 sliding_window=window, tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
                 **fields)
