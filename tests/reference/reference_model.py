"""Reference forward pass of Hugging Face MoE decoders, in float64 numpy.

This is brigade's correctness oracle. It is written from the published architecture descriptions
(the Hugging Face transformers model code and configs for qwen3_moe, mixtral, olmoe and qwen2_moe),
never from brigade's C++ sources, so that a shared misunderstanding is unlikely.

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

FAMILIES = ("qwen3_moe", "mixtral", "olmoe", "qwen2_moe")

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
}


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
        elif self.family in ("qwen3_moe", "olmoe"):
            self.qkv_bias = self.o_bias = bool(cfg["attention_bias"])
        else:
            self.qkv_bias = self.o_bias = False

    def _read_moe(self, cfg):
        f = self.family
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

    def layer_is_sparse(self, layer):
        """Qwen's rule: sparse unless listed in mlp_only_layers or off the decoder_sparse_step."""
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


def rope_cos_sin(positions, head_dim, theta):
    """cos and sin tables [len(positions), head_dim] of the rotate-half RoPE layout."""
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.outer(np.asarray(positions, dtype=np.float64), inv_freq)
    both = np.concatenate([angles, angles], axis=-1)
    return np.cos(both), np.sin(both)


def apply_rope(x, cos, sin):
    """Rotate-half RoPE on x [..., len, head_dim]: dimension i pairs with i + head_dim/2."""
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def causal_attention(q, k, v, q_pos, k_pos, window=None):
    """Softmax attention of q [H, n, d] over k, v [KVH, T, d], scaled by 1/sqrt(d).

    Query head h reads key/value head h // (H / KVH), as repeat_kv lays them out. A key is
    visible when its position is not after the query's (and, with a sliding window, fewer than
    `window` positions before it). Returns [n, H * d].
    """
    heads, n, d = q.shape
    group = heads // k.shape[0]
    k_all = np.repeat(k, group, axis=0)
    v_all = np.repeat(v, group, axis=0)
    scores = q @ k_all.transpose(0, 2, 1) / math.sqrt(d)
    visible = k_pos[None, :] <= q_pos[:, None]
    if window is not None:
        visible &= (q_pos[:, None] - k_pos[None, :]) < window
    scores = np.where(visible[None, :, :], scores, -np.inf)
    out = softmax(scores, axis=-1) @ v_all
    return out.transpose(1, 0, 2).reshape(n, heads * d)


class ReferenceModel:
    """A checkpoint's weights in float64 and the forward pass over them."""

    def __init__(self, config, tensors):
        self.spec = ModelSpec(config)
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
    def load(cls, model_dir):
        config, tensors = load_checkpoint(model_dir)
        return cls(config, tensors)

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
        if s.family == "qwen3_moe":
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

    def new_cache(self):
        """An empty KV cache: per layer, post-RoPE keys and values [kv_heads, positions, d]."""
        s = self.spec
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
        if s.family == "qwen3_moe":
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

    def _feed_forward(self, layer, h):
        if "dense" in layer:
            return _swiglu(layer["dense"], h)
        out = self._routed_experts(layer, h)
        if "shared" in layer:
            out = out + sigmoid(h @ layer["shared_gate"].T) * _swiglu(layer["shared"], h)
        return out

    def _routed_experts(self, layer, h):
        """Softmax router over all experts, top-k, optional renormalization, weighted SwiGLUs."""
        s = self.spec
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
    args = parser.parse_args(argv)
    model = ReferenceModel.load(args.model_dir)
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
