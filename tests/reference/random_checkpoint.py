"""Small random checkpoints in the Hugging Face layout of each reference family.

The oracle's own writer side: the self-tests and check_brigade.py use it to make checkpoints that
brigade did not write, so that brigade's loader is tested on files from an independent writer.
Weights are scaled so that activations and logits stay of order one (a 1/sqrt(fan_in) normal for
projections, norm weights near one, unit embeddings): a model whose logits are all near zero would
make greedy ties common and hide errors.

DeepSeek-V3's router bias (mlp.gate.e_score_correction_bias) is drawn uniform in
[0, DEEPSEEK_BIAS_MAX): of the order of the spread of the sigmoid scores, so that the biased choice
differs from the unbiased one for some tokens, and non-negative, so that every biased score is
positive (see group_limited_topk). It is stored in float32 whatever the checkpoint dtype, as the
published DeepSeek-V3 checkpoints store it.
"""

import numpy as np

from reference_model import ModelSpec
from safetensors_np import write_checkpoint

DEEPSEEK_BIAS_MAX = 0.2
ROUTER_BIAS_SUFFIX = ".mlp.gate.e_score_correction_bias"

# The deepseek_v3 fields build_config fills in unless given: a small MLA with q_lora_rank,
# v_head_dim != qk_nope_head_dim + qk_rope_head_dim, 2 groups of experts, 1 shared expert and
# one dense first layer. Expert count, top-k and expert size come from build_config's arguments.
DEEPSEEK_DEFAULTS = {
    "q_lora_rank": 24, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8,
    "v_head_dim": 12, "n_shared_experts": 1, "n_group": 2, "topk_group": 1,
    "first_k_dense_replace": 1, "moe_layer_freq": 1, "routed_scaling_factor": 2.5,
    "norm_topk_prob": True, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
    "rope_scaling": None, "attention_bias": False,
}


def yarn_rope_scaling(factor, original_max_position_embeddings, beta_fast=32, beta_slow=1,
                      mscale=1.0, mscale_all_dim=1.0):
    """A DeepSeek-V3 style rope_scaling object (its published values: factor 40, original 4096,
    beta_fast 32, beta_slow 1, mscale 1.0, mscale_all_dim 1.0)."""
    return {"type": "yarn", "factor": factor,
            "original_max_position_embeddings": original_max_position_embeddings,
            "beta_fast": beta_fast, "beta_slow": beta_slow, "mscale": mscale,
            "mscale_all_dim": mscale_all_dim}


def build_config(family, layers=2, hidden=64, heads=4, kv_heads=2, head_dim=None, experts=4,
                 top_k=2, moe_inter=32, vocab=256, **extra):
    """A config.json dict for `family` with the given shape; `extra` fields override or add.

    deepseek_v3 takes experts as n_routed_experts and moe_inter as moe_intermediate_size (dense
    layers get twice that), ignores kv_heads and head_dim (MLA has one key/value head per query
    head and its own head sizes: pass qk_nope_head_dim etc. in `extra`, see DEEPSEEK_DEFAULTS), and
    with a YaRN rope_scaling sets max_position_embeddings to factor *
    original_max_position_embeddings unless given.
    """
    if family == "deepseek_v3":
        return _deepseek_config(layers, hidden, heads, experts, top_k, moe_inter, vocab, extra)
    config = {
        "model_type": family,
        "architectures": [{"qwen3_moe": "Qwen3MoeForCausalLM", "mixtral": "MixtralForCausalLM",
                           "olmoe": "OlmoeForCausalLM",
                           "qwen2_moe": "Qwen2MoeForCausalLM"}[family]],
        "vocab_size": vocab, "hidden_size": hidden, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads,
        "num_experts_per_tok": top_k, "hidden_act": "silu", "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "tie_word_embeddings": False, "max_position_embeddings": 4096,
    }
    if head_dim is not None:
        config["head_dim"] = head_dim
    if family == "mixtral":
        config.update(num_local_experts=experts, intermediate_size=moe_inter, sliding_window=None)
    elif family == "olmoe":
        config.update(num_experts=experts, intermediate_size=moe_inter, norm_topk_prob=False,
                      clip_qkv=None, attention_bias=False)
    else:
        config.update(num_experts=experts, moe_intermediate_size=moe_inter,
                      intermediate_size=2 * moe_inter, decoder_sparse_step=1, mlp_only_layers=[],
                      norm_topk_prob=family == "qwen3_moe")
        if family == "qwen2_moe":
            config.update(shared_expert_intermediate_size=2 * moe_inter, qkv_bias=True)
    config.update(extra)
    return config


def _deepseek_config(layers, hidden, heads, experts, top_k, moe_inter, vocab, extra):
    config = {
        "model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"],
        "vocab_size": vocab, "hidden_size": hidden, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": heads,
        "n_routed_experts": experts, "num_experts_per_tok": top_k,
        "moe_intermediate_size": moe_inter, "intermediate_size": 2 * moe_inter,
        "hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "max_position_embeddings": 4096,
    }
    config.update(DEEPSEEK_DEFAULTS)
    config.update(extra)
    scaling = config.get("rope_scaling")
    if scaling and "max_position_embeddings" not in extra:
        config["max_position_embeddings"] = int(
            round(scaling["factor"] * scaling["original_max_position_embeddings"]))
    config["num_key_value_heads"] = config["num_attention_heads"]
    return config


def _deepseek_layer_shapes(s, i):
    p = f"model.layers.{i}."
    a = p + "self_attn."
    shapes = {p + "input_layernorm.weight": (s.hidden,),
              p + "post_attention_layernorm.weight": (s.hidden,),
              a + "kv_a_proj_with_mqa.weight": (s.kv_lora_rank + s.qk_rope, s.hidden),
              a + "kv_a_layernorm.weight": (s.kv_lora_rank,),
              a + "kv_b_proj.weight": (s.heads * (s.qk_nope + s.v_head_dim), s.kv_lora_rank),
              a + "o_proj.weight": (s.hidden, s.heads * s.v_head_dim)}
    if s.q_lora_rank is None:
        shapes[a + "q_proj.weight"] = (s.heads * s.qk_head_dim, s.hidden)
    else:
        shapes.update({a + "q_a_proj.weight": (s.q_lora_rank, s.hidden),
                       a + "q_a_layernorm.weight": (s.q_lora_rank,),
                       a + "q_b_proj.weight": (s.heads * s.qk_head_dim, s.q_lora_rank)})
    if not s.layer_is_sparse(i):
        shapes.update(_mlp_shapes(p + "mlp", s.hidden, s.dense_inter))
        return shapes
    shapes[p + "mlp.gate.weight"] = (s.experts, s.hidden)
    shapes[p + "mlp.gate.e_score_correction_bias"] = (s.experts,)
    for e in range(s.experts):
        shapes.update(_mlp_shapes(f"{p}mlp.experts.{e}", s.hidden, s.expert_inter))
    if s.shared_inter:
        shapes.update(_mlp_shapes(p + "mlp.shared_experts", s.hidden, s.shared_inter))
    return shapes


def _mlp_shapes(prefix, hidden, inter, names=("gate_proj", "up_proj", "down_proj")):
    gate, up, down = names
    return {f"{prefix}.{gate}.weight": (inter, hidden), f"{prefix}.{up}.weight": (inter, hidden),
            f"{prefix}.{down}.weight": (hidden, inter)}


def _layer_shapes(s, i):
    if s.family == "deepseek_v3":
        return _deepseek_layer_shapes(s, i)
    p = f"model.layers.{i}."
    qw, kw = s.heads * s.head_dim, s.kv_heads * s.head_dim
    shapes = {p + "input_layernorm.weight": (s.hidden,),
              p + "post_attention_layernorm.weight": (s.hidden,),
              p + "self_attn.q_proj.weight": (qw, s.hidden),
              p + "self_attn.k_proj.weight": (kw, s.hidden),
              p + "self_attn.v_proj.weight": (kw, s.hidden),
              p + "self_attn.o_proj.weight": (s.hidden, qw)}
    if s.qkv_bias:
        shapes.update({p + "self_attn.q_proj.bias": (qw,), p + "self_attn.k_proj.bias": (kw,),
                       p + "self_attn.v_proj.bias": (kw,)})
    if s.o_bias:
        shapes[p + "self_attn.o_proj.bias"] = (s.hidden,)
    if s.family == "qwen3_moe":
        shapes.update({p + "self_attn.q_norm.weight": (s.head_dim,),
                       p + "self_attn.k_norm.weight": (s.head_dim,)})
    elif s.family == "olmoe":
        shapes.update({p + "self_attn.q_norm.weight": (qw,), p + "self_attn.k_norm.weight": (kw,)})
    if not s.layer_is_sparse(i):
        shapes.update(_mlp_shapes(p + "mlp", s.hidden, s.dense_inter))
    elif s.family == "mixtral":
        shapes[p + "block_sparse_moe.gate.weight"] = (s.experts, s.hidden)
        for e in range(s.experts):
            shapes.update(_mlp_shapes(f"{p}block_sparse_moe.experts.{e}", s.hidden,
                                      s.expert_inter, ("w1", "w3", "w2")))
    else:
        shapes[p + "mlp.gate.weight"] = (s.experts, s.hidden)
        for e in range(s.experts):
            shapes.update(_mlp_shapes(f"{p}mlp.experts.{e}", s.hidden, s.expert_inter))
        if s.family == "qwen2_moe":
            shapes.update(_mlp_shapes(p + "mlp.shared_expert", s.hidden, s.shared_inter))
            shapes[p + "mlp.shared_expert_gate.weight"] = (1, s.hidden)
    return shapes


def tensor_shapes(config):
    """{tensor name: shape} of every tensor a checkpoint with this config holds."""
    s = ModelSpec(config)
    shapes = {"model.embed_tokens.weight": (s.vocab, s.hidden), "model.norm.weight": (s.hidden,)}
    if not s.tie_embeddings:
        shapes["lm_head.weight"] = (s.vocab, s.hidden)
    for i in range(s.layers):
        shapes.update(_layer_shapes(s, i))
    return shapes


def random_tensors(config, seed, scales=None):
    """Random float32 weights for every tensor of `config`, reproducible from `seed`.

    scales ({name suffix: factor}) multiplies the tensors whose names end so (a case's
    "tensor_scales"), drawn as usual first so that the other tensors do not change.
    """
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in sorted(tensor_shapes(config).items()):
        if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
            values = 1.0 + 0.2 * rng.standard_normal(shape)
        elif name.endswith(ROUTER_BIAS_SUFFIX):
            values = rng.uniform(0.0, DEEPSEEK_BIAS_MAX, shape)
        elif name.endswith(".bias"):
            values = 0.2 * rng.standard_normal(shape)
        elif name == "model.embed_tokens.weight":
            values = rng.standard_normal(shape)
        else:
            values = rng.standard_normal(shape) / np.sqrt(shape[1])
        for suffix, factor in (scales or {}).items():
            if name.endswith(suffix):
                values = values * factor
        tensors[name] = values.astype(np.float32)
    return tensors


def stored_dtypes(tensors, dtype):
    """{name: dtype} for tensors stored in another dtype than the checkpoint's: DeepSeek-V3's
    router bias stays float32, as in the published checkpoints."""
    return {name: "F32" for name in tensors if name.endswith(ROUTER_BIAS_SUFFIX) and dtype != "F32"}


def write_random_checkpoint(model_dir, config, dtype, seed, shards=1, scales=None):
    """Write config.json and random weights stored as dtype (F32, BF16, F16); return the tensors."""
    tensors = random_tensors(config, seed, scales)
    write_checkpoint(model_dir, config, tensors, dtype, shards=shards,
                     dtypes=stored_dtypes(tensors, dtype))
    return tensors
