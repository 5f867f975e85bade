"""Small random checkpoints in the Hugging Face layout of each reference family.

The oracle's own writer side: the self-tests and check_brigade.py use it to make checkpoints that
brigade did not write, so that brigade's loader is tested on files from an independent writer.
Weights are scaled so that activations and logits stay of order one (a 1/sqrt(fan_in) normal for
projections, norm weights near one, unit embeddings): a model whose logits are all near zero would
make greedy ties common and hide errors.
"""

import numpy as np

from reference_model import ModelSpec
from safetensors_np import write_checkpoint


def build_config(family, layers=2, hidden=64, heads=4, kv_heads=2, head_dim=None, experts=4,
                 top_k=2, moe_inter=32, vocab=256, **extra):
    """A config.json dict for `family` with the given shape; `extra` fields override or add."""
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


def _mlp_shapes(prefix, hidden, inter, names=("gate_proj", "up_proj", "down_proj")):
    gate, up, down = names
    return {f"{prefix}.{gate}.weight": (inter, hidden), f"{prefix}.{up}.weight": (inter, hidden),
            f"{prefix}.{down}.weight": (hidden, inter)}


def _layer_shapes(s, i):
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


def random_tensors(config, seed):
    """Random float32 weights for every tensor of `config`, reproducible from `seed`."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in sorted(tensor_shapes(config).items()):
        if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
            values = 1.0 + 0.2 * rng.standard_normal(shape)
        elif name.endswith(".bias"):
            values = 0.2 * rng.standard_normal(shape)
        elif name == "model.embed_tokens.weight":
            values = rng.standard_normal(shape)
        else:
            values = rng.standard_normal(shape) / np.sqrt(shape[1])
        tensors[name] = values.astype(np.float32)
    return tensors


def write_random_checkpoint(model_dir, config, dtype, seed, shards=1):
    """Write config.json and random weights stored as dtype (F32, BF16, F16); return the tensors."""
    tensors = random_tensors(config, seed)
    write_checkpoint(model_dir, config, tensors, dtype, shards=shards)
    return tensors
