"""Reference forward pass of Hugging Face MoE decoders, in float64 numpy.

This is brigade's correctness oracle. It is written from the published architecture descriptions
(the Hugging Face transformers model code and configs for qwen3_moe, mixtral, olmoe and qwen2_moe;
for deepseek_v3 the DeepSeek-V3 technical report, arXiv 2412.19437, and the Hugging Face config
fields and DeepseekV3ForCausalLM conventions), never from brigade's C++ sources, so that a shared
misunderstanding is unlikely.

Why float64: the weights are stored in float32, bfloat16 or float16 and convert exactly to
float64, so the reference computes the exact mathematical function of the stored weights with a
rounding error (about 1e-13 relative) far below the 1e-4 tolerance the checks use. Every
difference from brigade is then brigade's own float32 rounding, independent of how either side
orders its sums. It also means the reference deliberately differs from running the model in
bfloat16 or float16 arithmetic: the oracle is the model function, not one rounding of it.

RoPE angles are computed in float64 too; Hugging Face computes them in float32, which differs by
about 1e-7 relative, far below the tolerance at the short sequence lengths the checks use.

Usage by hand:  reference_model.py MODEL_DIR --ids 1,2,3 [--greedy N]
"""

import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_np import load_checkpoint  # noqa: E402

# qwen3 (dense) is Qwen3-MoE's attention with a plain MLP in every layer: the draft models.
FAMILIES = ("qwen3_moe", "mixtral", "olmoe", "qwen2_moe", "deepseek_v3", "qwen3")

# Hugging Face's configuration defaults for every field the forward pass reads; a config.json
# that omits a field gets the value transformers would give it.
_COMMON_DEFAULTS = {"hidden_act": "silu", "tie_word_embeddings": False, "rope_theta": 10000.0}
_FAMILY_DEFAULTS = {
    "qwen3_moe": {
        "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144,
        "num_hidden_layers": 24, "num_attention_heads": 32, "num_key_value_heads": 4,
        "rms_norm_eps": 1e-6, "attention_bias": False, "use_sliding_window": False,
        "decoder_sparse_step": 1, "moe_intermediate_size": 768, "num_experts_per_tok": 8,
        "num_experts": 128, "norm_topk_prob": False, "mlp_only_layers": [],
    },
    "qwen3": {
        "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
        "rms_norm_eps": 1e-6, "attention_bias": False, "use_sliding_window": False,
    },
    "mixtral": {
        "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "rms_norm_eps": 1e-5, "rope_theta": 1e6, "sliding_window": None,
        "num_experts_per_tok": 2, "num_local_experts": 8,
    },
    "olmoe": {
        "vocab_size": 50304, "hidden_size": 2048, "intermediate_size": 2048,
        "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": None,
        "rms_norm_eps": 1e-5, "attention_bias": False, "clip_qkv": None,
        "num_experts_per_tok": 8, "num_experts": 64, "norm_topk_prob": False,
    },
    "qwen2_moe": {
        "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632,
        "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
        "rms_norm_eps": 1e-6, "use_sliding_window": False, "decoder_sparse_step": 1,
        "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
        "num_experts_per_tok": 4, "num_experts": 60, "norm_topk_prob": False,
        "mlp_only_layers": [], "qkv_bias": True,
    },
    # DeepseekV3Config's defaults (the full 671B shape).
    "deepseek_v3": {
        "vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432,
        "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
        "num_key_value_heads": None, "n_shared_experts": 1, "n_routed_experts": 256,
        "routed_scaling_factor": 2.5, "kv_lora_rank": 512, "q_lora_rank": 1536,
        "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128, "n_group": 8,
        "topk_group": 4, "num_experts_per_tok": 8, "first_k_dense_replace": 3,
        "norm_topk_prob": True, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
        "rope_interleave": True, "attention_bias": False, "scoring_func": "sigmoid",
        "topk_method": "noaux_tc", "moe_layer_freq": 1,
    },
}

# Hugging Face builds DeepSeek-V3's q_a_layernorm and kv_a_layernorm with DeepseekV3RMSNorm's
# default epsilon, not with rms_norm_eps (which only the decoder-layer and final norms use).
MLA_NORM_EPS = 1e-6


class ModelSpec:
    """The architecture a config.json describes, with Hugging Face's defaults filled in."""

    def __init__(self, config):
        family = config.get("model_type")
        if family not in FAMILIES:
            raise NotImplementedError(
                f"model_type {family!r} is not one of the reference families {FAMILIES}")
        cfg = dict(_COMMON_DEFAULTS)
        cfg.update(_FAMILY_DEFAULTS[family])
        cfg.update({k: v for k, v in config.items() if v is not None or k not in cfg})
        self.family = family
        self.raw = cfg
        if cfg["hidden_act"] != "silu":
            raise NotImplementedError(f"hidden_act {cfg['hidden_act']!r}; only silu is modelled")
        self.vocab = int(cfg["vocab_size"])
        self.hidden = int(cfg["hidden_size"])
        self.layers = int(cfg["num_hidden_layers"])
        self.heads = int(cfg["num_attention_heads"])
        kv_heads = cfg["num_key_value_heads"]
        self.kv_heads = int(self.heads if kv_heads is None else kv_heads)
        if self.heads % self.kv_heads:
            raise ValueError(f"num_attention_heads {self.heads} is not a multiple of "
                             f"num_key_value_heads {self.kv_heads}")
        if family == "deepseek_v3":
            self.eps = float(cfg["rms_norm_eps"])
            self.tie_embeddings = bool(cfg["tie_word_embeddings"])
            self._read_deepseek(config, cfg)
            return
        head_dim = cfg.get("head_dim")
        self.head_dim = int(head_dim) if head_dim else self.hidden // self.heads
        self.eps = float(cfg["rms_norm_eps"])
        self.rope_theta = self._rope_theta(config, cfg)
        self.tie_embeddings = bool(cfg["tie_word_embeddings"])
        self.sliding_window = self._sliding_window(cfg)
        self.clip_qkv = cfg.get("clip_qkv") if family == "olmoe" else None
        self._read_biases(cfg)
        self._read_moe(cfg)

    @staticmethod
    def _rope_theta(config, cfg):
        """rope_theta from the top level, else from rope_parameters (the newer layout)."""
        params = config.get("rope_parameters") or config.get("rope_scaling") or {}
        rope_type = params.get("rope_type", params.get("type", "default"))
        if rope_type != "default":
            raise NotImplementedError(f"RoPE type {rope_type!r}; only the default is modelled")
        if config.get("partial_rotary_factor", 1.0) != 1.0:
            raise NotImplementedError("partial_rotary_factor other than 1 is not modelled")
        if config.get("rope_theta") is not None:
            return float(config["rope_theta"])
        return float(params.get("rope_theta", cfg["rope_theta"]))

    def _sliding_window(self, cfg):
        if self.family == "mixtral":
            window = cfg.get("sliding_window")
            return int(window) if window else None
        if cfg.get("use_sliding_window"):
            raise NotImplementedError(f"{self.family} with use_sliding_window is not modelled")
        return None

    def _read_biases(self, cfg):
        # Which projections carry a bias: Qwen2-MoE has q/k/v biases (qkv_bias), Qwen3-MoE and
        # OLMoE put attention_bias on all four projections, Mixtral has none.
        if self.family == "qwen2_moe":
            self.qkv_bias, self.o_bias = bool(cfg["qkv_bias"]), False
        elif self.family in ("qwen3_moe", "qwen3", "olmoe"):
            self.qkv_bias = self.o_bias = bool(cfg["attention_bias"])
        else:
            self.qkv_bias = self.o_bias = False

    def _read_moe(self, cfg):
        f = self.family
        if f == "qwen3":  # dense: every layer's MLP is "mlp" of intermediate_size
            self.experts, self.top_k, self.norm_topk = 0, 0, False
            self.expert_inter, self.shared_inter = None, None
            self.dense_inter, self.sparse_step, self.mlp_only = int(cfg["intermediate_size"]), 1, set()
            return
        self.experts = int(cfg["num_local_experts"] if f == "mixtral" else cfg["num_experts"])
        self.top_k = int(cfg["num_experts_per_tok"])
        # Mixtral always renormalizes the selected weights (a softmax over the top-k logits).
        self.norm_topk = True if f == "mixtral" else bool(cfg["norm_topk_prob"])
        if f in ("qwen3_moe", "qwen2_moe"):
            self.expert_inter = int(cfg["moe_intermediate_size"])
            self.dense_inter = int(cfg["intermediate_size"])
            self.sparse_step = int(cfg["decoder_sparse_step"])
            self.mlp_only = set(int(i) for i in (cfg["mlp_only_layers"] or []))
        else:
            self.expert_inter = int(cfg["intermediate_size"])
            self.dense_inter, self.sparse_step, self.mlp_only = None, 1, set()
        self.shared_inter = (int(cfg["shared_expert_intermediate_size"])
                             if f == "qwen2_moe" else None)
        if self.experts > 0 and not 1 <= self.top_k <= self.experts:
            raise ValueError(f"num_experts_per_tok {self.top_k} outside 1..{self.experts}")

    def _read_deepseek(self, config, cfg):
        """DeepSeek-V3: multi-head latent attention, YaRN RoPE, sigmoid group-limited routing."""
        if self.kv_heads != self.heads:
            raise ValueError(f"deepseek_v3 attention has one key/value head per query head: "
                             f"num_key_value_heads {self.kv_heads} must equal "
                             f"num_attention_heads {self.heads}")
        # An explicit "q_lora_rank": null means a plain q_proj (Hugging Face keeps the None), so it
        # is read from the file rather than replaced by the default.
        q_rank = config["q_lora_rank"] if "q_lora_rank" in config else cfg["q_lora_rank"]
        self.q_lora_rank = None if q_rank is None else int(q_rank)
        if self.q_lora_rank is not None and self.q_lora_rank < 1:
            raise ValueError(f"q_lora_rank {q_rank!r} must be null or at least 1")
        self.kv_lora_rank = int(cfg["kv_lora_rank"])
        self.qk_nope = int(cfg["qk_nope_head_dim"])
        self.qk_rope = int(cfg["qk_rope_head_dim"])
        self.v_head_dim = int(cfg["v_head_dim"])
        self.qk_head_dim = self.qk_nope + self.qk_rope
        if self.qk_rope < 2 or self.qk_rope % 2:
            raise ValueError(f"qk_rope_head_dim {self.qk_rope} must be even and at least 2")
        self.head_dim = self.qk_head_dim
        if cfg["attention_bias"]:
            raise NotImplementedError("deepseek_v3 with attention_bias is not modelled")
        self.qkv_bias = self.o_bias = False
        self.sliding_window, self.clip_qkv = None, None
        self.rope_interleave = bool(cfg["rope_interleave"])
        self._deepseek_rope(config, cfg)
        if cfg["scoring_func"] != "sigmoid" or cfg["topk_method"] != "noaux_tc":
            raise NotImplementedError(
                f"deepseek_v3 scoring_func {cfg['scoring_func']!r} / topk_method "
                f"{cfg['topk_method']!r}; only sigmoid / noaux_tc (DeepSeek-V3's) is modelled")
        if int(cfg["moe_layer_freq"]) != 1:
            raise NotImplementedError("moe_layer_freq other than 1 is not modelled (Hugging Face's "
                                      "DeepseekV3 ignores it; the remote code honours it)")
        self.experts = int(cfg["n_routed_experts"] or 0)
        self.top_k = int(cfg["num_experts_per_tok"])
        self.n_group = int(cfg["n_group"])
        self.topk_group = int(cfg["topk_group"])
        self.norm_topk = bool(cfg["norm_topk_prob"])
        self.routed_scaling = float(cfg["routed_scaling_factor"])
        self.expert_inter = int(cfg["moe_intermediate_size"])
        self.dense_inter = int(cfg["intermediate_size"])
        self.shared_inter = self.expert_inter * int(cfg["n_shared_experts"] or 0)
        self.first_dense = int(cfg["first_k_dense_replace"])
        self.sparse_step, self.mlp_only = 1, set()
        if self.experts < 1:
            raise ValueError("deepseek_v3 needs n_routed_experts >= 1")
        if self.n_group < 1 or self.experts % self.n_group:
            raise ValueError(f"n_routed_experts {self.experts} is not a multiple of n_group "
                             f"{self.n_group}")
        if self.experts // self.n_group < 2:
            raise ValueError("each expert group needs at least 2 experts (a group's score is "
                             "the sum of its top 2)")
        if not 1 <= self.topk_group <= self.n_group:
            raise ValueError(f"topk_group {self.topk_group} outside 1..n_group {self.n_group}")
        if not 1 <= self.top_k <= self.topk_group * (self.experts // self.n_group):
            raise ValueError(f"num_experts_per_tok {self.top_k} outside 1..(experts in the "
                             f"{self.topk_group} kept groups)")

    def _deepseek_rope(self, config, cfg):
        """inv_freq, the cos/sin factor and the softmax scale, as Hugging Face's DeepseekV3 sets
        them.

        RoPE covers only the qk_rope_head_dim part of each head (Hugging Face sets head_dim to
        qk_rope_head_dim for the rotary tables). With YaRN:
          inv_freq   = ramp * base_freq / factor + (1 - ramp) * base_freq    (see yarn_inv_freq)
          cos, sin  *= attention_factor = mscale(factor, mscale) / mscale(factor, mscale_all_dim)
                       (0.1 * ln(factor) + 1 when mscale or mscale_all_dim is unset or 0)
          scale      = qk_head_dim^-0.5 * mscale(factor, mscale_all_dim)^2 when mscale_all_dim
        with mscale(s, m) = 0.1 * m * ln(s) + 1 for s > 1, else 1.
        """
        params = config.get("rope_scaling") or config.get("rope_parameters") or {}
        rope_type = params.get("rope_type", params.get("type", "default"))
        if config.get("partial_rotary_factor", 1.0) != 1.0:
            raise NotImplementedError("partial_rotary_factor other than 1 is not modelled")
        theta = config.get("rope_theta")
        self.rope_theta = float(theta if theta is not None else params.get("rope_theta", 10000.0))
        dim = self.qk_rope
        self.softmax_scale = 1.0 / math.sqrt(self.qk_head_dim)
        self.yarn = None
        if rope_type == "default":
            self.rope_inv_freq = rope_inv_freq(dim, self.rope_theta)
            self.rope_attention_factor = 1.0
            return
        if rope_type != "yarn":
            raise NotImplementedError(f"deepseek_v3 RoPE type {rope_type!r}; default and yarn "
                                      f"are modelled")
        factor = float(params["factor"])
        max_pos = int(cfg["max_position_embeddings"])
        original = params.get("original_max_position_embeddings")
        if original is None:
            original = max_pos
        elif abs(max_pos / float(original) - factor) > 1e-9 * factor:
            # Some transformers versions replaced factor by this ratio, newer ones use factor.
            # They agree only when the two are equal, as in DeepSeek-V3's config (163840 / 4096).
            raise NotImplementedError(
                f"YaRN factor {factor} differs from max_position_embeddings / "
                f"original_max_position_embeddings = {max_pos}/{original}; transformers versions "
                f"disagree on which to use, so the reference refuses")
        beta_fast = float(params.get("beta_fast") or 32.0)
        beta_slow = float(params.get("beta_slow") or 1.0)
        mscale, mscale_all_dim = params.get("mscale"), params.get("mscale_all_dim")
        attention_factor = params.get("attention_factor")
        if attention_factor is None:
            if mscale and mscale_all_dim:
                attention_factor = (yarn_get_mscale(factor, float(mscale))
                                    / yarn_get_mscale(factor, float(mscale_all_dim)))
            else:
                attention_factor = yarn_get_mscale(factor)
        truncate = bool(params.get("truncate", True))
        self.rope_inv_freq = yarn_inv_freq(dim, self.rope_theta, factor, float(original),
                                           beta_fast, beta_slow, truncate)
        self.rope_attention_factor = float(attention_factor)
        if mscale_all_dim:
            m = yarn_get_mscale(factor, float(mscale_all_dim))
            self.softmax_scale *= m * m
        self.yarn = {"factor": factor, "original_max_position_embeddings": int(original),
                     "beta_fast": beta_fast, "beta_slow": beta_slow, "mscale": mscale,
                     "mscale_all_dim": mscale_all_dim, "truncate": truncate}

    def layer_is_sparse(self, layer):
        """Qwen's rule: sparse unless listed in mlp_only_layers or off the decoder_sparse_step."""
        if self.family == "deepseek_v3":
            return layer >= self.first_dense
        if self.family in ("mixtral", "olmoe"):
            return True
        return (layer not in self.mlp_only and self.experts > 0
                and (layer + 1) % self.sparse_step == 0)


def rms_norm(x, weight, eps):
    """weight * x / sqrt(mean(x^2) + eps) over the last axis."""
    return weight * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def silu(x):
    return x * sigmoid(x)


def softmax(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def rope_inv_freq(dim, theta):
    """The default RoPE frequencies theta^(-2i/dim), i = 0 .. dim/2 - 1."""
    return 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)


def rope_cos_sin(positions, head_dim, theta, inv_freq=None, scale=1.0):
    """cos and sin tables [len(positions), head_dim] of the rotate-half RoPE layout.

    inv_freq replaces the default frequencies (YaRN); scale multiplies both tables (YaRN's
    attention factor, which Hugging Face folds into cos and sin).
    """
    if inv_freq is None:
        inv_freq = rope_inv_freq(head_dim, theta)
    angles = np.outer(np.asarray(positions, dtype=np.float64), inv_freq)
    both = np.concatenate([angles, angles], axis=-1)
    return np.cos(both) * scale, np.sin(both) * scale


def yarn_get_mscale(scale, mscale=1.0):
    """YaRN's magnitude correction: 0.1 * mscale * ln(scale) + 1 for scale > 1, else 1."""
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def yarn_correction_range(dim, theta, original_max_positions, beta_fast, beta_slow, truncate=True):
    """The dimension-pair indices (low, high) between which YaRN ramps from the original
    frequencies to the interpolated ones.

    A frequency pair i turns num_rotations times over the original context when
    i = dim * ln(original / (num_rotations * 2 pi)) / (2 ln theta); low comes from beta_fast
    rotations (floored), high from beta_slow (ceiled), clamped to [0, dim - 1].
    """
    def pair_index(rotations):
        return (dim * math.log(original_max_positions / (rotations * 2 * math.pi))
                / (2 * math.log(theta)))
    low, high = pair_index(beta_fast), pair_index(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, dim - 1)


def yarn_inv_freq(dim, theta, factor, original_max_positions, beta_fast, beta_slow, truncate=True):
    """YaRN frequencies: pair i keeps theta^(-2i/dim) below the ramp, takes theta^(-2i/dim)/factor
    above it, and blends linearly in between: ramp(i) = clamp((i - low) / (high - low), 0, 1),
    inv_freq = base / factor * ramp + base * (1 - ramp) (high gets 0.001 added when low == high).
    """
    base = rope_inv_freq(dim, theta)
    low, high = yarn_correction_range(dim, theta, original_max_positions, beta_fast, beta_slow,
                                      truncate)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    return base / factor * ramp + base * (1.0 - ramp)


def deinterleave(x):
    """Hugging Face's DeepSeek-V3 permutation of a rotary vector before rotate-half RoPE:
    [x0, x1, x2, x3, ...] -> [x0, x2, ..., x1, x3, ...], so that stored dims (2i, 2i + 1) form the
    rotation pair of frequency i (the layout DeepSeek's weights were trained with).
    """
    return np.concatenate([x[..., 0::2], x[..., 1::2]], axis=-1)


def group_limited_topk(scores, bias, n_group, topk_group, top_k):
    """DeepSeek-V3's noaux_tc expert choice for rows of sigmoid scores [n, experts].

    The choice uses biased = scores + bias: experts split into n_group consecutive groups, each
    group scored by the sum of its two largest biased scores; the topk_group best groups are kept
    and the top_k experts by biased score among them are chosen. Ties go to the lower group or
    expert index (a stable sort). Returns (chosen [n, top_k] in order of biased score, the
    smallest gap between the last kept and first dropped group score or expert score).
    """
    scores = np.asarray(scores, dtype=np.float64)
    n, experts = scores.shape
    per_group = experts // n_group
    biased = scores + np.asarray(bias, dtype=np.float64)[None, :]
    grouped = biased.reshape(n, n_group, per_group)
    group_scores = np.sort(grouped, axis=-1)[..., -2:].sum(axis=-1)
    group_order = np.argsort(-group_scores, axis=-1, kind="stable")
    kept = np.zeros((n, n_group), dtype=bool)
    np.put_along_axis(kept, group_order[:, :topk_group], True, axis=-1)
    candidates = np.where(np.repeat(kept, per_group, axis=1), biased, -np.inf)
    order = np.argsort(-candidates, axis=-1, kind="stable")
    chosen = order[:, :top_k]
    last = np.take_along_axis(candidates, chosen[:, -1:], axis=-1)
    if np.any(last <= 0.0):
        # Hugging Face fills the dropped groups with 0.0, not -inf, before its top-k: a chosen
        # biased score <= 0 would let it pick an expert of a dropped group. Not modelled.
        raise NotImplementedError("a chosen expert's biased score is <= 0, where Hugging Face's "
                                  "masked_fill(0.0) would choose from dropped groups")
    gap = math.inf
    if topk_group < n_group:
        ranked = np.take_along_axis(group_scores, group_order, axis=-1)
        gap = min(gap, float(np.min(ranked[:, topk_group - 1] - ranked[:, topk_group])))
    if top_k < topk_group * per_group:
        ranked = np.take_along_axis(candidates, order[:, top_k - 1:top_k + 1], axis=-1)
        gap = min(gap, float(np.min(ranked[:, 0] - ranked[:, 1])))
    return chosen, gap


def apply_rope(x, cos, sin):
    """Rotate-half RoPE on x [..., len, head_dim]: dimension i pairs with i + head_dim/2."""
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def causal_attention(q, k, v, q_pos, k_pos, window=None, scale=None):
    """Softmax attention of q [H, n, d] over k [KVH, T, d], v [KVH, T, dv], scaled by `scale`
    (default 1/sqrt(d)).

    Query head h reads key/value head h // (H / KVH), as repeat_kv lays them out. A key is
    visible when its position is not after the query's (and, with a sliding window, fewer than
    `window` positions before it). Returns [n, H * dv].
    """
    heads, n, d = q.shape
    group = heads // k.shape[0]
    k_all = np.repeat(k, group, axis=0)
    v_all = np.repeat(v, group, axis=0)
    scores = q @ k_all.transpose(0, 2, 1)
    scores = scores / math.sqrt(d) if scale is None else scores * scale
    scores = np.where(causal_mask(q_pos, k_pos, window)[None, :, :], scores, -np.inf)
    out = softmax(scores, axis=-1) @ v_all
    return out.transpose(1, 0, 2).reshape(n, heads * v_all.shape[-1])


def causal_mask(q_pos, k_pos, window=None):
    """[n, T] True where key position k_pos is visible from query position q_pos."""
    visible = k_pos[None, :] <= q_pos[:, None]
    if window is not None:
        visible &= (q_pos[:, None] - k_pos[None, :]) < window
    return visible


class ReferenceModel:
    """A checkpoint's weights in float64 and the forward pass over them.

    mla_absorbed (deepseek_v3 only) computes multi-head latent attention the way an inference
    engine does: the cache holds the normalized latent c_kv and the rotated k_pe, kv_b_proj's
    key part is absorbed into the query and its value part applied after the attention. It is
    the same function as the default (naive) path, which expands every head's key and value;
    the self-tests check that the two agree.
    """

    def __init__(self, config, tensors, mla_absorbed=False):
        self.spec = ModelSpec(config)
        self.mla_absorbed = bool(mla_absorbed) and self.spec.family == "deepseek_v3"
        self.route_log = None  # A list to record (layer, scores, chosen) of deepseek_v3 routing.
        self._tensors = tensors
        self._used = set()
        s = self.spec
        self.embed = self._take("model.embed_tokens.weight", (s.vocab, s.hidden))
        self.final_norm = self._take("model.norm.weight", (s.hidden,))
        if s.tie_embeddings:
            self.lm_head = self.embed
            self._used.add("lm_head.weight")
        else:
            self.lm_head = self._take("lm_head.weight", (s.vocab, s.hidden))
        self.layers = [self._load_layer(i) for i in range(s.layers)]
        self.unused_tensors = sorted(set(tensors) - self._used)
        self._tensors = None
        self.min_router_gap = math.inf

    @classmethod
    def load(cls, model_dir, mla_absorbed=False):
        config, tensors = load_checkpoint(model_dir)
        return cls(config, tensors, mla_absorbed=mla_absorbed)

    def _take(self, name, shape):
        if name not in self._tensors:
            raise KeyError(f"checkpoint has no tensor {name!r} ({self.spec.family} layout)")
        array = self._tensors[name]
        if tuple(array.shape) != tuple(shape):
            raise ValueError(f"tensor {name!r} has shape {tuple(array.shape)}, expected {shape}")
        self._used.add(name)
        return np.asarray(array, dtype=np.float64)

    def _linear(self, prefix, out_dim, in_dim, bias):
        weight = self._take(prefix + ".weight", (out_dim, in_dim))
        b = self._take(prefix + ".bias", (out_dim,)) if bias else None
        return weight, b

    def _mlp(self, prefix, inter, names=("gate_proj", "up_proj", "down_proj")):
        s = self.spec
        gate, up, down = names
        return (self._take(f"{prefix}.{gate}.weight", (inter, s.hidden)),
                self._take(f"{prefix}.{up}.weight", (inter, s.hidden)),
                self._take(f"{prefix}.{down}.weight", (s.hidden, inter)))

    def _load_layer(self, i):
        if self.spec.family == "deepseek_v3":
            return self._load_deepseek_layer(i)
        s = self.spec
        p = f"model.layers.{i}."
        q_width, kv_width = s.heads * s.head_dim, s.kv_heads * s.head_dim
        layer = {
            "input_norm": self._take(p + "input_layernorm.weight", (s.hidden,)),
            "post_norm": self._take(p + "post_attention_layernorm.weight", (s.hidden,)),
            "q": self._linear(p + "self_attn.q_proj", q_width, s.hidden, s.qkv_bias),
            "k": self._linear(p + "self_attn.k_proj", kv_width, s.hidden, s.qkv_bias),
            "v": self._linear(p + "self_attn.v_proj", kv_width, s.hidden, s.qkv_bias),
            "o": self._linear(p + "self_attn.o_proj", s.hidden, q_width, s.o_bias),
        }
        if s.family in ("qwen3_moe", "qwen3"):
            layer["q_norm"] = self._take(p + "self_attn.q_norm.weight", (s.head_dim,))
            layer["k_norm"] = self._take(p + "self_attn.k_norm.weight", (s.head_dim,))
        elif s.family == "olmoe":
            layer["q_norm"] = self._take(p + "self_attn.q_norm.weight", (q_width,))
            layer["k_norm"] = self._take(p + "self_attn.k_norm.weight", (kv_width,))
        if not s.layer_is_sparse(i):
            layer["dense"] = self._mlp(p + "mlp", s.dense_inter)
            return layer
        if s.family == "mixtral":
            moe = p + "block_sparse_moe"
            layer["router"] = self._take(moe + ".gate.weight", (s.experts, s.hidden))
            layer["experts"] = [self._mlp(f"{moe}.experts.{e}", s.expert_inter, ("w1", "w3", "w2"))
                                for e in range(s.experts)]
            return layer
        layer["router"] = self._take(p + "mlp.gate.weight", (s.experts, s.hidden))
        layer["experts"] = [self._mlp(f"{p}mlp.experts.{e}", s.expert_inter)
                            for e in range(s.experts)]
        if s.family == "qwen2_moe":
            layer["shared"] = self._mlp(p + "mlp.shared_expert", s.shared_inter)
            layer["shared_gate"] = self._take(p + "mlp.shared_expert_gate.weight", (1, s.hidden))
        return layer

    def _load_deepseek_layer(self, i):
        s = self.spec
        p = f"model.layers.{i}."
        a = p + "self_attn."
        heads = s.heads
        layer = {
            "index": i,
            "input_norm": self._take(p + "input_layernorm.weight", (s.hidden,)),
            "post_norm": self._take(p + "post_attention_layernorm.weight", (s.hidden,)),
            "kv_a": self._take(a + "kv_a_proj_with_mqa.weight",
                               (s.kv_lora_rank + s.qk_rope, s.hidden)),
            "kv_a_norm": self._take(a + "kv_a_layernorm.weight", (s.kv_lora_rank,)),
            "kv_b": self._take(a + "kv_b_proj.weight",
                               (heads * (s.qk_nope + s.v_head_dim), s.kv_lora_rank)),
            "o": self._take(a + "o_proj.weight", (s.hidden, heads * s.v_head_dim)),
        }
        if s.q_lora_rank is None:
            layer["q_proj"] = self._take(a + "q_proj.weight", (heads * s.qk_head_dim, s.hidden))
        else:
            layer["q_a"] = self._take(a + "q_a_proj.weight", (s.q_lora_rank, s.hidden))
            layer["q_a_norm"] = self._take(a + "q_a_layernorm.weight", (s.q_lora_rank,))
            layer["q_b"] = self._take(a + "q_b_proj.weight",
                                      (heads * s.qk_head_dim, s.q_lora_rank))
        if not s.layer_is_sparse(i):
            layer["dense"] = self._mlp(p + "mlp", s.dense_inter)
            return layer
        layer["router"] = self._take(p + "mlp.gate.weight", (s.experts, s.hidden))
        layer["router_bias"] = self._take(p + "mlp.gate.e_score_correction_bias", (s.experts,))
        layer["experts"] = [self._mlp(f"{p}mlp.experts.{e}", s.expert_inter)
                            for e in range(s.experts)]
        if s.shared_inter:
            layer["shared_experts"] = self._mlp(p + "mlp.shared_experts", s.shared_inter)
        return layer

    def new_cache(self):
        """An empty KV cache: per layer, post-RoPE keys and values [kv_heads, positions, d].

        deepseek_v3 keeps per layer either every head's full key [heads, positions, qk_head_dim]
        and value [heads, positions, v_head_dim] (naive), or, with mla_absorbed, the normalized
        latent c_kv [positions, kv_lora_rank] and the rotated k_pe [positions, qk_rope_head_dim].
        """
        s = self.spec
        if self.mla_absorbed:
            return {"length": 0, "layers": [{"c_kv": np.zeros((0, s.kv_lora_rank)),
                                             "k_pe": np.zeros((0, s.qk_rope))}
                                            for _ in range(s.layers)]}
        if s.family == "deepseek_v3":
            return {"length": 0, "layers": [{"k": np.zeros((s.heads, 0, s.qk_head_dim)),
                                             "v": np.zeros((s.heads, 0, s.v_head_dim))}
                                            for _ in range(s.layers)]}
        empty = np.zeros((s.kv_heads, 0, s.head_dim))
        return {"length": 0, "layers": [{"k": empty, "v": empty} for _ in range(s.layers)]}

    def forward(self, ids, cache=None):
        """Logits [len(ids), vocab] for ids placed after what `cache` holds (appended to it).

        Without a cache this is the full-sequence causal forward from position 0.
        """
        s = self.spec
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError("ids must be a non-empty list of token ids")
        if ids.min() < 0 or ids.max() >= s.vocab:
            raise ValueError(f"token id outside 0..{s.vocab - 1}")
        if cache is None:
            cache = self.new_cache()
        start = cache["length"]
        positions = np.arange(start, start + ids.size)
        if s.family == "deepseek_v3":
            cos, sin = rope_cos_sin(positions, s.qk_rope, s.rope_theta, s.rope_inv_freq,
                                    s.rope_attention_factor)
        else:
            cos, sin = rope_cos_sin(positions, s.head_dim, s.rope_theta)
        x = self.embed[ids]
        for layer, layer_cache in zip(self.layers, cache["layers"]):
            h = rms_norm(x, layer["input_norm"], s.eps)
            x = x + self._attention(layer, layer_cache, h, positions, cos, sin)
            h = rms_norm(x, layer["post_norm"], s.eps)
            x = x + self._feed_forward(layer, h)
        cache["length"] = start + ids.size
        return rms_norm(x, self.final_norm, s.eps) @ self.lm_head.T

    def logits(self, ids):
        return self.forward(ids, None)

    def _attention(self, layer, layer_cache, h, positions, cos, sin):
        s = self.spec
        if s.family == "deepseek_v3":
            return self._mla(layer, layer_cache, h, positions, cos, sin)
        n = h.shape[0]
        q, k, v = (_apply_linear(layer[name], h) for name in ("q", "k", "v"))
        if s.family == "olmoe":
            # OLMoE normalizes the whole q and k projections, then clips, then splits heads.
            q = rms_norm(q, layer["q_norm"], s.eps)
            k = rms_norm(k, layer["k_norm"], s.eps)
            if s.clip_qkv is not None:
                q, k, v = (np.clip(t, -s.clip_qkv, s.clip_qkv) for t in (q, k, v))
        q = q.reshape(n, s.heads, s.head_dim).transpose(1, 0, 2)
        k = k.reshape(n, s.kv_heads, s.head_dim).transpose(1, 0, 2)
        v = v.reshape(n, s.kv_heads, s.head_dim).transpose(1, 0, 2)
        if s.family in ("qwen3_moe", "qwen3"):
            # Qwen3 normalizes each head's q and k over head_dim before RoPE.
            q = rms_norm(q, layer["q_norm"], s.eps)
            k = rms_norm(k, layer["k_norm"], s.eps)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        layer_cache["k"] = np.concatenate([layer_cache["k"], k], axis=1)
        layer_cache["v"] = np.concatenate([layer_cache["v"], v], axis=1)
        k_pos = np.arange(layer_cache["k"].shape[1])
        out = causal_attention(q, layer_cache["k"], layer_cache["v"], positions, k_pos,
                               s.sliding_window)
        return _apply_linear(layer["o"], out)

    def _mla_rope(self, x, cos, sin):
        """RoPE on the rotary part of DeepSeek-V3 queries and keys, as Hugging Face applies it:
        with rope_interleave (the default) the stored pairs (2i, 2i + 1) are first permuted to
        (i, i + d/2), then rotate-half RoPE; the result stays in the permuted order, which is
        harmless because q_pe and k_pe are permuted alike and only their dot product is used."""
        if self.spec.rope_interleave:
            x = deinterleave(x)
        return apply_rope(x, cos, sin)

    def _mla(self, layer, layer_cache, h, positions, cos, sin):
        """Multi-head latent attention (DeepSeek-V2/V3)."""
        s = self.spec
        n, heads = h.shape[0], s.heads
        if "q_proj" in layer:
            q = h @ layer["q_proj"].T
        else:
            q = rms_norm(h @ layer["q_a"].T, layer["q_a_norm"], MLA_NORM_EPS) @ layer["q_b"].T
        q = q.reshape(n, heads, s.qk_head_dim).transpose(1, 0, 2)
        q_nope = q[..., :s.qk_nope]
        q_pe = self._mla_rope(q[..., s.qk_nope:], cos, sin)
        kv_a = h @ layer["kv_a"].T
        c_kv = rms_norm(kv_a[:, :s.kv_lora_rank], layer["kv_a_norm"], MLA_NORM_EPS)
        k_pe = self._mla_rope(kv_a[:, s.kv_lora_rank:], cos, sin)  # One head, shared by all.
        if self.mla_absorbed:
            out = self._mla_absorbed(layer, layer_cache, q_nope, q_pe, c_kv, k_pe, positions)
        else:
            kv = (c_kv @ layer["kv_b"].T).reshape(n, heads, s.qk_nope + s.v_head_dim)
            kv = kv.transpose(1, 0, 2)
            k = np.concatenate([kv[..., :s.qk_nope],
                                np.broadcast_to(k_pe, (heads, n, s.qk_rope))], axis=-1)
            layer_cache["k"] = np.concatenate([layer_cache["k"], k], axis=1)
            layer_cache["v"] = np.concatenate([layer_cache["v"], kv[..., s.qk_nope:]], axis=1)
            k_pos = np.arange(layer_cache["k"].shape[1])
            out = causal_attention(np.concatenate([q_nope, q_pe], axis=-1), layer_cache["k"],
                                   layer_cache["v"], positions, k_pos, scale=s.softmax_scale)
        return out @ layer["o"].T

    def _mla_absorbed(self, layer, layer_cache, q_nope, q_pe, c_kv, k_pe, positions):
        """The same attention over the latent cache: q_nope . (W_UK c) = (W_UK^T q_nope) . c and
        sum_t a_t (W_UV c_t) = W_UV (sum_t a_t c_t), per head."""
        s = self.spec
        heads, n = q_nope.shape[0], q_nope.shape[1]
        layer_cache["c_kv"] = np.concatenate([layer_cache["c_kv"], c_kv], axis=0)
        layer_cache["k_pe"] = np.concatenate([layer_cache["k_pe"], k_pe], axis=0)
        kv_b = layer["kv_b"].reshape(heads, s.qk_nope + s.v_head_dim, s.kv_lora_rank)
        w_uk, w_uv = kv_b[:, :s.qk_nope, :], kv_b[:, s.qk_nope:, :]
        q_latent = np.einsum("hnd,hdr->hnr", q_nope, w_uk)
        scores = (q_latent @ layer_cache["c_kv"].T + q_pe @ layer_cache["k_pe"].T)
        scores = scores * s.softmax_scale
        k_pos = np.arange(layer_cache["c_kv"].shape[0])
        scores = np.where(causal_mask(positions, k_pos)[None, :, :], scores, -np.inf)
        context = softmax(scores, axis=-1) @ layer_cache["c_kv"]  # [heads, n, kv_lora_rank]
        out = np.einsum("hnr,hvr->nhv", context, w_uv)
        return out.reshape(n, heads * s.v_head_dim)

    def _feed_forward(self, layer, h):
        if "dense" in layer:
            return _swiglu(layer["dense"], h)
        out = self._routed_experts(layer, h)
        if "shared" in layer:
            out = out + sigmoid(h @ layer["shared_gate"].T) * _swiglu(layer["shared"], h)
        if "shared_experts" in layer:
            out = out + _swiglu(layer["shared_experts"], h)  # DeepSeek's: always on, ungated.
        return out

    def _route_deepseek(self, layer, h):
        """Sigmoid scores, group-limited choice on the biased scores (group_limited_topk), weights
        from the unbiased scores of the chosen experts, renormalized to sum 1 when norm_topk_prob
        (plus 1e-20 in the denominator, as Hugging Face), times routed_scaling_factor."""
        s = self.spec
        scores = sigmoid(h @ layer["router"].T)
        chosen, gap = group_limited_topk(scores, layer["router_bias"], s.n_group, s.topk_group,
                                         s.top_k)
        self.min_router_gap = min(self.min_router_gap, gap)
        weights = np.take_along_axis(scores, chosen, axis=-1)
        if s.norm_topk:
            weights = weights / (np.sum(weights, axis=-1, keepdims=True) + 1e-20)
        if self.route_log is not None:
            self.route_log.append({"layer": layer["index"], "scores": scores, "chosen": chosen,
                                   "bias": layer["router_bias"]})
        return chosen, weights * s.routed_scaling

    def _routed_experts(self, layer, h):
        """Softmax router over all experts, top-k, optional renormalization, weighted SwiGLUs."""
        s = self.spec
        if s.family == "deepseek_v3":
            chosen, weights = self._route_deepseek(layer, h)
            return _weighted_experts(layer, h, chosen, weights)
        router_logits = h @ layer["router"].T
        probs = softmax(router_logits, axis=-1)
        order = np.argsort(-router_logits, axis=-1, kind="stable")
        chosen = order[:, :s.top_k]
        weights = np.take_along_axis(probs, chosen, axis=-1)
        if s.norm_topk:
            weights = weights / np.sum(weights, axis=-1, keepdims=True)
        if s.top_k < s.experts:
            # How close the k-th and (k+1)-th experts were: a near tie makes the routing depend
            # on rounding, which the driver reports when brigade disagrees.
            last_in = np.take_along_axis(router_logits, order[:, s.top_k - 1:s.top_k], axis=-1)
            first_out = np.take_along_axis(router_logits, order[:, s.top_k:s.top_k + 1], axis=-1)
            self.min_router_gap = min(self.min_router_gap, float(np.min(last_in - first_out)))
        return _weighted_experts(layer, h, chosen, weights)


def _weighted_experts(layer, h, chosen, weights):
    """sum over the chosen experts e of row t: weights[t, slot] * SwiGLU_e(h[t])."""
    out = np.zeros_like(h)
    for e, expert in enumerate(layer["experts"]):
        rows, slots = np.nonzero(chosen == e)
        if rows.size:
            out[rows] += weights[rows, slots][:, None] * _swiglu(expert, h[rows])
    return out


def _apply_linear(weight_bias, x):
    weight, bias = weight_bias
    y = x @ weight.T
    return y if bias is None else y + bias


def _swiglu(mlp, x):
    gate, up, down = mlp
    return (silu(x @ gate.T) * (x @ up.T)) @ down.T


def greedy(model, prompt_ids, steps):
    """Greedy continuation using the KV cache; returns (generated ids, logits rows)."""
    cache = model.new_cache()
    logits = model.forward(prompt_ids, cache)[-1]
    ids, rows = [], []
    for _ in range(steps):
        rows.append(logits)
        ids.append(int(np.argmax(logits)))
        logits = model.forward([ids[-1]], cache)[-1]
    return ids, np.array(rows)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model_dir")
    parser.add_argument("--ids", required=True, help="comma-separated prompt token ids")
    parser.add_argument("--greedy", type=int, default=0, help="greedy steps to take")
    parser.add_argument("--mla-absorbed", action="store_true",
                        help="deepseek_v3: attention over the latent cache (same function)")
    args = parser.parse_args(argv)
    model = ReferenceModel.load(args.model_dir, mla_absorbed=args.mla_absorbed)
    prompt = [int(t) for t in args.ids.split(",") if t.strip()]
    if model.unused_tensors:
        print(f"warning: unused tensors {model.unused_tensors}", file=sys.stderr)
    if args.greedy:
        ids, _ = greedy(model, prompt, args.greedy)
        print(",".join(str(t) for t in ids))
    else:
        logits = model.logits(prompt)
        np.set_printoptions(precision=6, suppress=True, linewidth=100)
        print(logits)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
