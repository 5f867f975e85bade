"""The cases check_brigade.py runs: which checkpoint, which shape, which dtype, which seed.

Together they cover every family; multi-head attention and grouped-query ratios 2, 3 and 4; odd
head counts; an explicit head_dim that differs from hidden/heads; top-1, top-k and top-all
routing with and without renormalization; float32, bfloat16 and float16 files; dense layers by
mlp_only_layers and by decoder_sparse_step; tied embeddings; OLMoE's clip_qkv; and sharded
checkpoints with an index, written by this directory's writer rather than by brigade.
"""

# The shape keys a case may set and the `brigade make-model` flag each becomes.
MAKE_MODEL_FLAGS = (("layers", "--layers"), ("hidden", "--hidden"), ("heads", "--heads"),
                    ("kv_heads", "--kv-heads"), ("head_dim", "--head-dim"),
                    ("experts", "--experts"), ("top_k", "--top-k"), ("moe_inter", "--moe-inter"),
                    ("vocab", "--vocab"))


def _case(name, source, family, dtype, seed, quick=False, shards=1, config=None, **shape):
    return {"name": name, "source": source, "family": family, "dtype": dtype, "seed": seed,
            "quick": quick, "shards": shards, "config": config or {}, "shape": shape}


CASES = [
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
]
