"""Model catalog: the architecture facts that set FLOPs, bytes and KV-cache size.

Counts are per model (not per GPU). Parameter counts are in parameters, sizes in elements;
bytes come from multiplying by a dtype's width (``profiler.model.precision``).
"""

from typing import NamedTuple


class Model(NamedTuple):
    """A transformer decoder's shape.

    Attention is ``gqa`` (MHA and MQA are GQA with kv_heads = heads or 1) or ``mla``
    (DeepSeek-style latent attention, cached as ``kv_lora_rank + qk_rope_head_dim`` per token
    and layer). MoE layers route each token to ``experts_per_token`` of ``num_experts``
    experts of width ``moe_intermediate_size`` plus ``shared_experts`` always-on experts;
    the first ``dense_layers`` layers use a dense MLP of width ``intermediate_size``.
    ``kv_layers`` is how many layers keep a full KV cache (hybrid models with linear or
    sliding-window attention keep fewer); ``sliding_window`` bounds the cache of the others.

    Optional extras (all default off):
    - ``attn_output_gate``: the q projection also emits a per-channel output gate (Qwen3-Next,
      Qwen3.5), doubling its width.
    - ``linear_*``: gated-DeltaNet linear-attention layers (Qwen3-Next, Qwen3.5). When
      ``linear_num_value_heads`` is set, the ``num_layers - full_kv_layers`` layers without a
      KV cache are linear-attention layers; their per-sequence state is fixed-size
      (``linear_state_elements``), not per token.
    - ``index_*``: a DeepSeek-sparse-attention indexer (DeepSeek-V3.2, GLM-5): ``index_n_heads``
      heads of ``index_head_dim`` score past tokens and each query attends to at most
      ``index_topk`` of them; the indexer caches ``index_head_dim`` key elements per token
      and layer beside the MLA latent.
    """

    hf_id: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    native_precision: str = "bf16"
    attention: str = "gqa"
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    kv_layers: int | None = None
    sliding_window: int = 0
    tie_embeddings: bool = False
    aliases: tuple[str, ...] = ()
    attn_output_gate: bool = False
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    index_n_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def moe_layers(self) -> int:
        return self.num_layers - self.dense_layers if self.is_moe else 0

    @property
    def full_kv_layers(self) -> int:
        """Layers whose KV cache grows with the whole context."""
        return self.num_layers if self.kv_layers is None else self.kv_layers

    @property
    def linear_layers(self) -> int:
        """Linear-attention layers (no KV cache; a fixed-size state per sequence)."""
        return self.num_layers - self.full_kv_layers if self.linear_num_value_heads else 0

    @property
    def softmax_attention_layers(self) -> int:
        """Layers with softmax attention (full or sliding-window), i.e. all but linear ones."""
        return self.num_layers - self.linear_layers

    def attention_params(self) -> int:
        """Attention projection parameters of one softmax-attention (full or sliding-window) layer.

        Linear-attention layers have ``linear_attention_params`` instead; sum over all layers
        with ``all_attention_params``.
        """
        h = self.hidden_size
        if self.attention == "mla":
            qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = (h * self.q_lora_rank + self.q_lora_rank * self.num_heads * qk_head
                 if self.q_lora_rank else h * self.num_heads * qk_head)
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank * self.num_heads * (
                self.qk_nope_head_dim + self.v_head_dim)
            indexer = (self.q_lora_rank * self.index_n_heads * self.index_head_dim
                       + h * self.index_head_dim + h * self.index_n_heads)
            return q + kv + self.num_heads * self.v_head_dim * h + indexer
        q = h * self.num_heads * self.head_dim * (2 if self.attn_output_gate else 1)
        o = self.num_heads * self.head_dim * h
        return q + o + 2 * h * self.num_kv_heads * self.head_dim

    def linear_attention_params(self) -> int:
        """Parameters of one gated-DeltaNet linear-attention layer (0 if the model has none).

        q and k projections (``linear_num_key_heads`` x ``linear_key_head_dim`` each), v and the
        output gate z (``linear_num_value_heads`` x ``linear_value_head_dim`` each), per-head
        decay and beta projections, the short causal convolution over q, k, v, and the output
        projection.
        """
        if not self.linear_num_value_heads:
            return 0
        h = self.hidden_size
        qk = self.linear_num_key_heads * self.linear_key_head_dim
        v = self.linear_num_value_heads * self.linear_value_head_dim
        conv = (2 * qk + v) * self.linear_conv_kernel
        return h * (2 * qk + 2 * v + 2 * self.linear_num_value_heads) + conv + v * h

    def all_attention_params(self) -> int:
        """Attention (softmax and linear) projection parameters summed over all layers."""
        return (self.softmax_attention_layers * self.attention_params()
                + self.linear_layers * self.linear_attention_params())

    def linear_state_elements(self) -> int:
        """Fixed per-sequence state of the linear-attention layers, in elements (all layers):
        the recurrent state (value heads x key dim x value dim) plus the convolution window."""
        if not self.linear_num_value_heads:
            return 0
        qk = self.linear_num_key_heads * self.linear_key_head_dim
        v = self.linear_num_value_heads * self.linear_value_head_dim
        state = self.linear_num_value_heads * self.linear_key_head_dim * self.linear_value_head_dim
        conv = (2 * qk + v) * max(self.linear_conv_kernel - 1, 0)
        return self.linear_layers * (state + conv)

    def expert_params(self) -> int:
        """Parameters of one routed expert (gate, up and down projections)."""
        return 3 * self.hidden_size * self.moe_intermediate_size

    def dense_mlp_params(self) -> int:
        return 3 * self.hidden_size * self.intermediate_size

    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size * (1 if self.tie_embeddings else 2)

    def total_params(self) -> int:
        """All parameters, every expert included."""
        mlp = self.dense_layers * self.dense_mlp_params() if self.is_moe else self.num_layers * self.dense_mlp_params()
        moe = self.moe_layers * (self.num_experts + self.shared_experts) * self.expert_params()
        return self.all_attention_params() + mlp + moe + self.embedding_params()

    def active_params(self) -> int:
        """Parameters one token touches (routed experts counted ``experts_per_token`` times)."""
        mlp = self.dense_layers * self.dense_mlp_params() if self.is_moe else self.num_layers * self.dense_mlp_params()
        moe = self.moe_layers * (self.experts_per_token + self.shared_experts) * self.expert_params()
        return self.all_attention_params() + mlp + moe + self.embedding_params()

    def kv_elements_per_token(self) -> int:
        """KV-cache elements one token of context occupies across the full-attention layers
        (for MLA: the latent, the decoupled rope key and any sparse-attention indexer key)."""
        if self.attention == "mla":
            return self.full_kv_layers * (self.kv_lora_rank + self.qk_rope_head_dim + self.index_head_dim)
        return self.full_kv_layers * 2 * self.num_kv_heads * self.head_dim

    def attention_flops_per_token_pair(self) -> float:
        """FLOPs of score and value products for one (query, key) pair summed over layers."""
        if self.attention == "mla":
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            return 2 * self.num_heads * (qk + self.v_head_dim) * self.full_kv_layers
        return 4 * self.num_heads * self.head_dim * self.full_kv_layers
