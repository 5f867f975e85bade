"""The cases check_brigade.py runs: which checkpoint, which shape, which dtype, which seed.

Together they cover every family; multi-head attention and grouped-query ratios 2, 3 and 4; odd
head counts; an explicit head_dim that differs from hidden/heads; top-1, top-k and top-all
routing with and without renormalization; float32, bfloat16 and float16 files; dense layers by
mlp_only_layers and by decoder_sparse_step; tied embeddings; OLMoE's clip_qkv; and sharded
checkpoints with an index, written by this directory's writer rather than by brigade.

The deepseek_v3 cases (multi-head latent attention with and without q_lora_rank, YaRN on and off,
mscale != mscale_all_dim, group-limited sigmoid routing with 1 to 4 groups, first_k_dense_replace
0, 1 and 2, shared experts, a float32 router bias inside bfloat16 and float16 files) are written
here too; `brigade make-model` only provides their tokenizer ("tokenizer_family").
"""

from random_checkpoint import yarn_rope_scaling

# Families brigade may not load yet. While a family is listed, a case of it whose checkpoint
# brigade refuses as unsupported ("... not supported" / "unsupported" in its error) is SKIPPED
# with brigade's message instead of failing; any other error, and every logit mismatch, fails.
# check_brigade.py --strict makes such skips failures. Remove the family once brigade loads it.
# brigade loads deepseek_v3 now; it stays listed so that the skip path keeps a real family to
# test with, and ctest runs check_brigade.py with --strict, so a regression fails.
PENDING_FAMILIES = {
    "deepseek_v3": "the deepseek_v3 engine",
}

# The shape keys a case may set and the `brigade make-model` flag each becomes.
MAKE_MODEL_FLAGS = (("layers", "--layers"), ("hidden", "--hidden"), ("heads", "--heads"),
                    ("kv_heads", "--kv-heads"), ("head_dim", "--head-dim"),
                    ("experts", "--experts"), ("top_k", "--top-k"), ("moe_inter", "--moe-inter"),
                    ("vocab", "--vocab"))


def _case(name, source, family, dtype, seed, quick=False, shards=1, config=None,
          tokenizer_family=None, **shape):
    case = {"name": name, "source": source, "family": family, "dtype": dtype, "seed": seed,
            "quick": quick, "shards": shards, "config": config or {}, "shape": shape}
    if tokenizer_family:
        case["tokenizer_family"] = tokenizer_family
    return case


def _deepseek(name, dtype, seed, quick=False, shards=1, tensor_scales=None, **config):
    """A deepseek_v3 case: shape keys (layers, hidden, heads, experts, top_k, moe_inter, vocab)
    and DeepSeek config fields together; the tokenizer comes from a qwen3_moe make-model.
    tensor_scales ({name suffix: factor}) scales some random tensors (random_tensors)."""
    shape_keys = ("layers", "hidden", "heads", "experts", "top_k", "moe_inter", "vocab")
    shape = {k: config.pop(k) for k in shape_keys if k in config}
    case = _case(name, "writer", "deepseek_v3", dtype, seed, quick=quick, shards=shards,
                 config=config, tokenizer_family="qwen3_moe", **shape)
    if tensor_scales:
        case["tensor_scales"] = dict(tensor_scales)
    return case


# The committed default pair (models/default, scripts/train_default_pair.py): a trained qwen3_moe
# target and its dense qwen3 draft, checked as they ship. "path" is relative to the repository.
COMMITTED_MODELS = "models/default"

CASES = [
    _case("default_target", "committed", "qwen3_moe", "bfloat16", 1101, quick=True),
    _case("default_draft", "committed", "qwen3", "bfloat16", 1102, quick=True),
    # Checkpoints written by `brigade make-model`.
    _case("make_qwen3_moe_gqa4_bf16", "make-model", "qwen3_moe", "bfloat16", 101, quick=True,
          layers=3, hidden=64, heads=8, kv_heads=2, head_dim=16, experts=8, top_k=2,
          moe_inter=32, vocab=512),
    _case("make_qwen3_moe_mha3_top1_f32", "make-model", "qwen3_moe", "float32", 102,
          layers=2, hidden=48, heads=3, kv_heads=3, head_dim=16, experts=4, top_k=1,
          moe_inter=24, vocab=384),
    _case("make_qwen3_moe_topall_f16", "make-model", "qwen3_moe", "float16", 103,
          layers=2, hidden=64, heads=4, kv_heads=1, head_dim=32, experts=4, top_k=4,
          moe_inter=32, vocab=512),
    _case("make_mixtral_gqa2_f16", "make-model", "mixtral", "float16", 201, quick=True,
          layers=2, hidden=96, heads=6, kv_heads=3, head_dim=16, experts=8, top_k=2,
          moe_inter=48, vocab=512),
    _case("make_mixtral_mha5_top1_f32", "make-model", "mixtral", "float32", 202,
          layers=3, hidden=80, heads=5, kv_heads=5, head_dim=16, experts=4, top_k=1,
          moe_inter=40, vocab=384),
    _case("make_mixtral_gqa4_bf16", "make-model", "mixtral", "bfloat16", 203,
          layers=2, hidden=64, heads=8, kv_heads=2, head_dim=8, experts=6, top_k=3,
          moe_inter=32, vocab=512),
    _case("make_olmoe_mha_bf16", "make-model", "olmoe", "bfloat16", 301, quick=True,
          layers=2, hidden=64, heads=4, kv_heads=4, head_dim=16, experts=8, top_k=2,
          moe_inter=32, vocab=512),
    _case("make_olmoe_gqa4_f32", "make-model", "olmoe", "float32", 302,
          layers=2, hidden=64, heads=8, kv_heads=2, head_dim=8, experts=8, top_k=4,
          moe_inter=32, vocab=384),
    _case("make_olmoe_gqa2_odd_top1_f16", "make-model", "olmoe", "float16", 303,
          layers=3, hidden=72, heads=6, kv_heads=3, head_dim=12, experts=5, top_k=1,
          moe_inter=36, vocab=512),
    _case("make_qwen2_moe_gqa2_bf16", "make-model", "qwen2_moe", "bfloat16", 401, quick=True,
          layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, experts=8, top_k=2,
          moe_inter=32, vocab=512),
    _case("make_qwen2_moe_gqa3_top1_f16", "make-model", "qwen2_moe", "float16", 402,
          layers=2, hidden=48, heads=3, kv_heads=1, head_dim=16, experts=4, top_k=1,
          moe_inter=24, vocab=384),
    _case("make_qwen2_moe_mha_f32", "make-model", "qwen2_moe", "float32", 403,
          layers=3, hidden=64, heads=4, kv_heads=4, head_dim=16, experts=6, top_k=3,
          moe_inter=32, vocab=512),
    # Checkpoints written here, with configs brigade's make-model does not produce.
    _case("own_qwen3_moe_dense1_sharded_bf16", "writer", "qwen3_moe", "bfloat16", 501,
          quick=True, shards=3,
          config={"mlp_only_layers": [1], "norm_topk_prob": True, "rope_theta": 1e6},
          layers=3, hidden=64, heads=4, kv_heads=2, head_dim=24, experts=6, top_k=2,
          moe_inter=32, vocab=512),
    _case("own_qwen3_moe_step2_tied_f32", "writer", "qwen3_moe", "float32", 502,
          config={"decoder_sparse_step": 2, "norm_topk_prob": False,
                  "tie_word_embeddings": True},
          layers=4, hidden=48, heads=6, kv_heads=2, head_dim=8, experts=4, top_k=2,
          moe_inter=24, vocab=384),
    _case("own_mixtral_sharded_f16", "writer", "mixtral", "float16", 601, quick=True, shards=2,
          config={"rope_theta": 1e6, "rms_norm_eps": 1e-5},
          layers=2, hidden=64, heads=4, kv_heads=1, experts=4, top_k=2, moe_inter=48,
          vocab=512),
    _case("own_mixtral_mha_bf16", "writer", "mixtral", "bfloat16", 602,
          layers=3, hidden=60, heads=5, kv_heads=5, experts=3, top_k=2, moe_inter=40,
          vocab=384),
    _case("own_olmoe_clip_qkv_bf16", "writer", "olmoe", "bfloat16", 701, quick=True,
          config={"clip_qkv": 0.6, "norm_topk_prob": True, "rope_theta": 500000.0,
                  "rms_norm_eps": 1e-5},
          layers=2, hidden=64, heads=4, kv_heads=2, experts=8, top_k=3, moe_inter=32,
          vocab=512),
    _case("own_olmoe_sharded_f32", "writer", "olmoe", "float32", 702, shards=2,
          layers=2, hidden=48, heads=3, kv_heads=3, experts=4, top_k=2, moe_inter=24,
          vocab=384),
    _case("own_qwen2_moe_step2_sharded_f16", "writer", "qwen2_moe", "float16", 801,
          quick=True, shards=2, config={"decoder_sparse_step": 2},
          layers=3, hidden=64, heads=4, kv_heads=2, experts=6, top_k=2, moe_inter=32,
          vocab=512),
    _case("own_qwen2_moe_dense0_tied_bf16", "writer", "qwen2_moe", "bfloat16", 802,
          config={"mlp_only_layers": [0], "norm_topk_prob": True, "tie_word_embeddings": True},
          layers=2, hidden=48, heads=4, kv_heads=1, experts=4, top_k=2, moe_inter=24,
          vocab=384),
    # DeepSeek-V3: 8 experts in 4 groups keeping 2, q_lora_rank, plain RoPE, one dense layer.
    _deepseek("own_deepseek_v3_qlora_groups_f32", "float32", 901, quick=True,
              layers=3, hidden=64, heads=4, experts=8, top_k=2, moe_inter=32, vocab=512,
              q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8,
              v_head_dim=16, n_group=4, topk_group=2, n_shared_experts=1,
              first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True),
    # No q_lora_rank (q_proj), DeepSeek-V3's own YaRN (factor 40, mscale = mscale_all_dim = 1:
    # softmax scale x 1.874, cos/sin unscaled), every layer MoE, 2 shared experts, bfloat16.
    _deepseek("own_deepseek_v3_noqlora_yarn_bf16", "bfloat16", 902, quick=True,
              layers=2, hidden=64, heads=4, experts=8, top_k=3, moe_inter=24, vocab=512,
              q_lora_rank=None, kv_lora_rank=24, qk_nope_head_dim=8, qk_rope_head_dim=8,
              v_head_dim=12, n_group=4, topk_group=2, n_shared_experts=2,
              first_k_dense_replace=0, routed_scaling_factor=2.5, norm_topk_prob=True,
              rope_scaling=yarn_rope_scaling(40, 128)),
    # YaRN with mscale != mscale_all_dim (cos/sin scaled by their ratio) and a short original
    # context (most frequencies interpolated), 3 groups of 2 keeping 2, no renormalization,
    # routed_scaling_factor 1.5, odd head count, rope_theta 1e5, two dense layers, 2 shards,
    # bfloat16 with the router bias in float32.
    _deepseek("own_deepseek_v3_mscale_shard_bf16", "bfloat16", 903, shards=2,
              layers=4, hidden=48, heads=3, experts=6, top_k=3, moe_inter=24, vocab=384,
              q_lora_rank=20, kv_lora_rank=12, qk_nope_head_dim=12, qk_rope_head_dim=16,
              v_head_dim=8, n_group=3, topk_group=2, n_shared_experts=1,
              first_k_dense_replace=2, routed_scaling_factor=1.5, norm_topk_prob=False,
              rope_theta=100000.0, rope_scaling=yarn_rope_scaling(4, 256, mscale=1.0,
                                                                  mscale_all_dim=0.8)),
    # One group (plain top-k on the biased scores), top-1 renormalized (so its weight is
    # routed_scaling_factor, as transformers computes it), float16.
    _deepseek("own_deepseek_v3_one_group_top1_f16", "float16", 904,
              layers=2, hidden=64, heads=2, experts=4, top_k=1, moe_inter=32, vocab=384,
              q_lora_rank=16, kv_lora_rank=32, qk_nope_head_dim=24, qk_rope_head_dim=8,
              v_head_dim=32, n_group=1, topk_group=1, n_shared_experts=1,
              first_k_dense_replace=1, routed_scaling_factor=2.0, norm_topk_prob=True),
    # rms_norm_eps 1e-5 (as some deepseek_v3 checkpoints have) with small latents (q_a_proj and
    # kv_a_proj_with_mqa scaled by 0.1): Hugging Face's q_a_layernorm and kv_a_layernorm keep
    # eps 1e-6 whatever rms_norm_eps says, and here using 1e-5 instead moves logits by ~3e-3.
    _deepseek("own_deepseek_v3_eps_latent_f32", "float32", 905,
              tensor_scales={"self_attn.q_a_proj.weight": 0.1,
                             "self_attn.kv_a_proj_with_mqa.weight": 0.1},
              layers=2, hidden=64, heads=4, experts=6, top_k=2, moe_inter=32, vocab=384,
              rms_norm_eps=1e-5, q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=8,
              qk_rope_head_dim=8, v_head_dim=12, n_group=2, topk_group=1, n_shared_experts=1,
              first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True),
]
