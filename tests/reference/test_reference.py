#!/usr/bin/python3
"""Self-tests of the reference oracle and its driver; they need no brigade binary.

The reference is only worth something if it is right, so it is checked against a second,
deliberately plain implementation (scalar loops per token, head and expert, written from the
same published descriptions), against identities the architectures imply (a KV cache changes
nothing, one expert with top-1 is a dense MLP, top-all with renormalization is a softmax mixture,
RoPE at position 0 is the identity), and its file reader against hand-made bytes.

deepseek_v3 has its own plain implementation (naive_deepseek_logits: per-token, per-head loops,
RoPE as in-place rotations of the adjacent pairs (2i, 2i + 1), the router by sorted lists) and
its own identities: the latent (absorbed) attention equals the naive one, the router keeps to
its groups, YaRN with factor 1 is plain RoPE, and every convention the cases rely on moves the
logits of some case by far more than the tolerance.

Run: test_reference.py [-v] [TestClass.test_name]   (every failure names its seed)
"""

import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_np as st  # noqa: E402
import reference_model as rm  # noqa: E402
from cases import CASES, PENDING_FAMILIES  # noqa: E402
from random_checkpoint import (build_config, random_tensors, tensor_shapes,  # noqa: E402
                               write_random_checkpoint, yarn_rope_scaling)
from reference_model import (ReferenceModel, apply_rope, causal_attention,  # noqa: E402
                             greedy, group_limited_topk, rope_cos_sin, yarn_correction_range,
                             yarn_inv_freq)


def naive_logits(config, tensors, ids):
    """The plainest forward pass: one token at a time, scalar loops over heads and experts."""
    c = dict(config)
    family = c["model_type"]
    hidden, heads, kv_heads = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    d = c.get("head_dim") or hidden // heads
    eps, theta = c["rms_norm_eps"], c["rope_theta"]
    w = {name: np.asarray(t, dtype=np.float64) for name, t in tensors.items()}

    def norm(vec, weight):
        return weight * vec / math.sqrt(float(np.dot(vec, vec)) / len(vec) + eps)

    def rope(vec, pos):
        out = vec.copy()
        for i in range(d // 2):
            angle = pos * theta ** (-2.0 * i / d)
            a, b = vec[i], vec[i + d // 2]
            out[i] = a * math.cos(angle) - b * math.sin(angle)
            out[i + d // 2] = b * math.cos(angle) + a * math.sin(angle)
        return out

    def lin(name, vec):
        y = w[name + ".weight"] @ vec
        return y + w[name + ".bias"] if name + ".bias" in w else y

    def swiglu(prefix, vec, names=("gate_proj", "up_proj", "down_proj")):
        g, u = w[f"{prefix}.{names[0]}.weight"] @ vec, w[f"{prefix}.{names[1]}.weight"] @ vec
        act = np.array([x / (1.0 + math.exp(-x)) for x in g]) * u
        return w[f"{prefix}.{names[2]}.weight"] @ act

    def experts_out(p, vec):
        if family == "mixtral":
            logits = w[p + "block_sparse_moe.gate.weight"] @ vec
            chosen = sorted(range(len(logits)), key=lambda e: -logits[e])[:c["num_experts_per_tok"]]
            # Mixtral's weights as a softmax over the selected logits only.
            exps = [math.exp(logits[e] - logits[chosen[0]]) for e in chosen]
            return sum(x / sum(exps) * swiglu(f"{p}block_sparse_moe.experts.{e}", vec,
                                              ("w1", "w3", "w2")) for e, x in zip(chosen, exps))
        logits = w[p + "mlp.gate.weight"] @ vec
        probs = [math.exp(x - max(logits)) for x in logits]
        probs = [x / sum(probs) for x in probs]
        chosen = sorted(range(len(logits)), key=lambda e: -logits[e])[:c["num_experts_per_tok"]]
        scale = sum(probs[e] for e in chosen) if c.get("norm_topk_prob") else 1.0
        out = sum(probs[e] / scale * swiglu(f"{p}mlp.experts.{e}", vec) for e in chosen)
        if family == "qwen2_moe":
            gate = float(w[p + "mlp.shared_expert_gate.weight"][0] @ vec)
            out = out + swiglu(p + "mlp.shared_expert", vec) / (1.0 + math.exp(-gate))
        return out

    def sparse(layer):
        if family in ("mixtral", "olmoe"):
            return True
        return (layer not in (c.get("mlp_only_layers") or [])
                and (layer + 1) % c.get("decoder_sparse_step", 1) == 0)

    keys = [[] for _ in range(c["num_hidden_layers"])]
    values = [[] for _ in range(c["num_hidden_layers"])]
    window = c.get("sliding_window") if family == "mixtral" else None
    rows = []
    for pos, token in enumerate(ids):
        x = w["model.embed_tokens.weight"][token].copy()
        for layer in range(c["num_hidden_layers"]):
            p = f"model.layers.{layer}."
            h = norm(x, w[p + "input_layernorm.weight"])
            q, k, v = (lin(p + f"self_attn.{n}_proj", h) for n in "qkv")
            if family == "olmoe":
                q = norm(q, w[p + "self_attn.q_norm.weight"])
                k = norm(k, w[p + "self_attn.k_norm.weight"])
                if c.get("clip_qkv") is not None:
                    q, k, v = (np.clip(t, -c["clip_qkv"], c["clip_qkv"]) for t in (q, k, v))
            q_heads = [q[i * d:(i + 1) * d] for i in range(heads)]
            k_heads = [k[i * d:(i + 1) * d] for i in range(kv_heads)]
            if family == "qwen3_moe":
                q_heads = [norm(t, w[p + "self_attn.q_norm.weight"]) for t in q_heads]
                k_heads = [norm(t, w[p + "self_attn.k_norm.weight"]) for t in k_heads]
            keys[layer].append([rope(t, pos) for t in k_heads])
            values[layer].append([v[i * d:(i + 1) * d] for i in range(kv_heads)])
            outs = []
            for head in range(heads):
                kv = head * kv_heads // heads
                qh = rope(q_heads[head], pos)
                seen = [s for s in range(pos + 1) if window is None or pos - s < window]
                scores = [float(qh @ keys[layer][s][kv]) / math.sqrt(d) for s in seen]
                top = max(scores)
                weights = [math.exp(x - top) for x in scores]
                outs.append(sum(wt / sum(weights) * values[layer][s][kv]
                                for wt, s in zip(weights, seen)))
            x = x + lin(p + "self_attn.o_proj", np.concatenate(outs))
            h = norm(x, w[p + "post_attention_layernorm.weight"])
            x = x + (experts_out(p, h) if sparse(layer) else swiglu(p + "mlp", h))
        head_w = w["model.embed_tokens.weight"] if c.get("tie_word_embeddings") \
            else w["lm_head.weight"]
        rows.append(head_w @ norm(x, w["model.norm.weight"]))
    return np.array(rows)


def naive_deepseek_logits(config, tensors, ids):
    """DeepSeek-V3 one token at a time with loops over heads and experts.

    Written separately from reference_model: RoPE rotates the stored pairs (2i, 2i + 1) in place
    (the complex-number form of DeepSeek's own code) instead of permuting them; YaRN's frequencies
    and mscale are recomputed here in scalar form; the router ranks Python lists.
    """
    c = dict(config)
    w = {name: np.asarray(t, dtype=np.float64) for name, t in tensors.items()}
    heads, eps = c["num_attention_heads"], c["rms_norm_eps"]
    nope, rope_d, vd = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    rank, q_rank = c["kv_lora_rank"], c.get("q_lora_rank")
    theta = c.get("rope_theta", 10000.0)
    scaling = c.get("rope_scaling")

    freqs, amplitude, scale = [], 1.0, 1.0 / math.sqrt(nope + rope_d)
    for i in range(rope_d // 2):
        freqs.append(theta ** (-2.0 * i / rope_d))
    if scaling:
        factor = scaling["factor"]
        orig = scaling["original_max_position_embeddings"]

        def pair(rotations):
            return rope_d * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(theta))
        low = max(math.floor(pair(scaling.get("beta_fast", 32))), 0)
        high = min(math.ceil(pair(scaling.get("beta_slow", 1))), rope_d - 1)
        if low == high:
            high += 0.001
        for i in range(rope_d // 2):
            t = min(max((i - low) / (high - low), 0.0), 1.0)
            freqs[i] = (1 - t) * freqs[i] + t * freqs[i] / factor

        def mscale(m):
            return 0.1 * m * math.log(factor) + 1.0 if factor > 1 else 1.0
        amplitude = mscale(scaling["mscale"]) / mscale(scaling["mscale_all_dim"])
        scale *= mscale(scaling["mscale_all_dim"]) ** 2

    def rope(vec, pos):
        out = vec.copy()
        for i in range(rope_d // 2):
            a, b = vec[2 * i], vec[2 * i + 1]
            ang = pos * freqs[i]
            out[2 * i] = amplitude * (a * math.cos(ang) - b * math.sin(ang))
            out[2 * i + 1] = amplitude * (a * math.sin(ang) + b * math.cos(ang))
        return out

    def norm(vec, weight, e):
        return weight * vec / math.sqrt(float(np.dot(vec, vec)) / len(vec) + e)

    def swiglu(prefix, vec):
        g, u = w[f"{prefix}.gate_proj.weight"] @ vec, w[f"{prefix}.up_proj.weight"] @ vec
        return w[f"{prefix}.down_proj.weight"] @ (np.array([x / (1 + math.exp(-x)) for x in g]) * u)

    def moe(p, vec):
        experts, k = c["n_routed_experts"], c["num_experts_per_tok"]
        groups, keep = c["n_group"], c["topk_group"]
        per = experts // groups
        logits = w[p + "mlp.gate.weight"] @ vec
        score = [1 / (1 + math.exp(-x)) for x in logits]
        biased = [sc + b for sc, b in zip(score, w[p + "mlp.gate.e_score_correction_bias"])]
        group_score = [sum(sorted(biased[g * per:(g + 1) * per])[-2:]) for g in range(groups)]
        kept = sorted(range(groups), key=lambda g: (-group_score[g], g))[:keep]
        allowed = [e for e in range(experts) if e // per in kept]
        chosen = sorted(allowed, key=lambda e: (-biased[e], e))[:k]
        weights = [score[e] for e in chosen]
        if c.get("norm_topk_prob"):
            weights = [x / sum(weights) for x in weights]
        out = sum(x * c["routed_scaling_factor"] * swiglu(f"{p}mlp.experts.{e}", vec)
                  for e, x in zip(chosen, weights))
        if c.get("n_shared_experts"):
            out = out + swiglu(p + "mlp.shared_experts", vec)
        return out

    keys = [[] for _ in range(c["num_hidden_layers"])]  # per layer, per position: per head k
    values = [[] for _ in range(c["num_hidden_layers"])]
    rows = []
    for pos, token in enumerate(ids):
        x = w["model.embed_tokens.weight"][token].copy()
        for layer in range(c["num_hidden_layers"]):
            p = f"model.layers.{layer}."
            a = p + "self_attn."
            h = norm(x, w[p + "input_layernorm.weight"], eps)
            if q_rank is None:
                q = w[a + "q_proj.weight"] @ h
            else:
                q_lat = norm(w[a + "q_a_proj.weight"] @ h, w[a + "q_a_layernorm.weight"], 1e-6)
                q = w[a + "q_b_proj.weight"] @ q_lat
            kv_a = w[a + "kv_a_proj_with_mqa.weight"] @ h
            latent = norm(kv_a[:rank], w[a + "kv_a_layernorm.weight"], 1e-6)
            k_pe = rope(kv_a[rank:], pos)
            kv = w[a + "kv_b_proj.weight"] @ latent
            keys[layer].append([np.concatenate([kv[i * (nope + vd):i * (nope + vd) + nope], k_pe])
                                for i in range(heads)])
            values[layer].append([kv[i * (nope + vd) + nope:(i + 1) * (nope + vd)]
                                  for i in range(heads)])
            outs = []
            for head in range(heads):
                qh = q[head * (nope + rope_d):(head + 1) * (nope + rope_d)]
                qh = np.concatenate([qh[:nope], rope(qh[nope:], pos)])
                scores = [float(qh @ keys[layer][t][head]) * scale for t in range(pos + 1)]
                top = max(scores)
                e = [math.exp(v - top) for v in scores]
                outs.append(sum(wt / sum(e) * values[layer][t][head]
                                for wt, t in zip(e, range(pos + 1))))
            x = x + w[a + "o_proj.weight"] @ np.concatenate(outs)
            h = norm(x, w[p + "post_attention_layernorm.weight"], eps)
            dense = layer < c["first_k_dense_replace"]
            x = x + (swiglu(p + "mlp", h) if dense else moe(p, h))
        rows.append(w["lm_head.weight"] @ norm(x, w["model.norm.weight"], eps))
    return np.array(rows)


# Small deepseek_v3 configs for the naive comparison: with and without q_lora_rank, YaRN with
# mscale == mscale_all_dim and with a ratio, 1, 2 and 4 groups, 0 to 2 dense layers.
DEEPSEEK_VARIANTS = {
    "qlora_groups": dict(layers=3, hidden=32, heads=3, experts=8, top_k=2, moe_inter=16,
                         vocab=64, q_lora_rank=12, kv_lora_rank=10, qk_nope_head_dim=6,
                         qk_rope_head_dim=4, v_head_dim=5, n_group=4, topk_group=2,
                         first_k_dense_replace=1, rms_norm_eps=1e-5),
    "noqlora_yarn": dict(layers=2, hidden=32, heads=2, experts=6, top_k=3, moe_inter=16,
                         vocab=64, q_lora_rank=None, kv_lora_rank=8, qk_nope_head_dim=4,
                         qk_rope_head_dim=8, v_head_dim=6, n_group=2, topk_group=1,
                         first_k_dense_replace=0, n_shared_experts=2, norm_topk_prob=False,
                         routed_scaling_factor=1.5, rope_scaling=yarn_rope_scaling(40, 8)),
    "yarn_ratio": dict(layers=3, hidden=24, heads=2, experts=4, top_k=1, moe_inter=8, vocab=64,
                       kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=16, v_head_dim=4,
                       n_group=1, topk_group=1, first_k_dense_replace=2, rope_theta=500.0,
                       rope_scaling=yarn_rope_scaling(4, 16, mscale=1.0, mscale_all_dim=0.7)),
}


def deepseek_variant(name, seed):
    config = build_config("deepseek_v3", **DEEPSEEK_VARIANTS[name])
    return config, random_tensors(config, seed)


def deepseek_case_model(case, mla_absorbed=False):
    """The checkpoint a deepseek_v3 case of cases.py writes, held in memory (float32 values)."""
    config = build_config("deepseek_v3", **case["shape"], **case["config"])
    tensors = random_tensors(config, case["seed"], case.get("tensor_scales"))
    return config, tensors, ReferenceModel(config, tensors, mla_absorbed=mla_absorbed)


# Configs that exercise every family's peculiarities at once; small enough for naive loops.
VARIANTS = {
    "qwen3_moe": dict(layers=3, hidden=40, heads=4, kv_heads=2, head_dim=12, experts=5, top_k=2,
                      moe_inter=16, vocab=64, mlp_only_layers=[1], norm_topk_prob=True,
                      attention_bias=True, rope_theta=1000.0),
    "qwen3_moe_step2_tied": dict(family="qwen3_moe", layers=2, hidden=32, heads=2, kv_heads=2,
                                 experts=3, top_k=3, moe_inter=16, vocab=64,
                                 decoder_sparse_step=2, norm_topk_prob=False,
                                 tie_word_embeddings=True),
    "mixtral": dict(layers=2, hidden=48, heads=6, kv_heads=2, experts=4, top_k=2, moe_inter=16,
                    vocab=64, sliding_window=4, rms_norm_eps=1e-5),
    "olmoe": dict(layers=2, hidden=32, heads=4, kv_heads=2, experts=6, top_k=3, moe_inter=16,
                  vocab=64, clip_qkv=0.5, attention_bias=True),
    "qwen2_moe": dict(layers=3, hidden=36, heads=3, kv_heads=1, experts=4, top_k=1, moe_inter=16,
                      vocab=64, decoder_sparse_step=2),
}


def variant(name, seed):
    spec = dict(VARIANTS[name])
    family = spec.pop("family", name)
    config = build_config(family, **spec)
    return config, random_tensors(config, seed)


class SafetensorsTest(unittest.TestCase):
    def test_bf16_bit_patterns_convert_exactly(self):
        patterns = {0x3F80: 1.0, 0xC000: -2.0, 0x4049: 3.140625, 0x0000: 0.0, 0x7F80: math.inf,
                    0xFF80: -math.inf, 0x0001: 2.0 ** -133, 0x7F7F: 3.3895313892515355e38,
                    0x3C00: 2.0 ** -7, 0xBF81: -1.0078125}
        got = st.bf16_bits_to_f32(np.array(list(patterns), dtype=np.uint16))
        for (bits, want), value in zip(patterns.items(), got):
            self.assertEqual(float(value), want, f"bf16 bits {bits:#06x}")
        negative_zero = st.bf16_bits_to_f32(np.array([0x8000], dtype=np.uint16))[0]
        self.assertEqual(math.copysign(1.0, float(negative_zero)), -1.0)
        self.assertTrue(np.isnan(st.bf16_bits_to_f32(np.array([0x7FC0], dtype=np.uint16))[0]))

    def test_bf16_writer_rounds_to_nearest_even(self):
        # 1.00390625 is exactly halfway between bf16 1.0 and 1.0078125: ties go to the even 1.0;
        # the float32 just above it must round up.
        just_above = float(np.nextafter(np.float32(1.00390625), np.float32(2)))
        cases = {1.0: 0x3F80, 1.00390625: 0x3F80, 1.01171875: 0x3F82, just_above: 0x3F81,
                 -2.0: 0xC000, 3.4e38: 0x7F80, 1e-40: 0x0001}
        bits = st.f32_to_bf16_bits(np.array(list(cases), dtype=np.float32))
        for (value, want), got in zip(cases.items(), bits):
            self.assertEqual(int(got), want, f"{value!r} -> {int(got):#06x}, want {want:#06x}")
        self.assertTrue(np.isnan(st.bf16_bits_to_f32(st.f32_to_bf16_bits(np.float32(np.nan)))))

    def test_every_dtype_round_trips(self):
        rng = np.random.default_rng(11)
        values = rng.standard_normal((3, 5)).astype(np.float32)
        with tempfile.TemporaryDirectory() as tmp:
            for dtype, expected in (("F32", values), ("F16", values.astype(np.float16)),
                                    ("BF16", st.bf16_bits_to_f32(st.f32_to_bf16_bits(values)))):
                path = os.path.join(tmp, dtype + ".safetensors")
                st.write_safetensors(path, {"w": values}, dtype)
                got = st.read_safetensors(path)["w"]
                self.assertEqual(got.dtype, np.float32)
                np.testing.assert_array_equal(got, np.asarray(expected, dtype=np.float32))
                self.assertEqual(st.read_safetensors(path, raw=True)["w"][0], dtype)

    def test_written_bytes_follow_the_format(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.safetensors")
            st.write_safetensors(path, {"b": np.ones(3), "a": np.arange(4.0).reshape(2, 2)},
                                 "F32", {"format": "pt"})
            with open(path, "rb") as f:
                blob = f.read()
        (n,) = struct.unpack("<Q", blob[:8])
        self.assertEqual(n % 8, 0)
        header = json.loads(blob[8:8 + n])
        self.assertEqual(header["__metadata__"], {"format": "pt"})
        self.assertEqual(header["a"], {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]})
        self.assertEqual(header["b"]["data_offsets"], [16, 28])
        self.assertEqual(len(blob), 8 + n + 28)
        self.assertEqual(struct.unpack("<4f", blob[8 + n:8 + n + 16]), (0.0, 1.0, 2.0, 3.0))

    def _write_raw(self, path, header, data):
        text = json.dumps(header).encode()
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + data)

    def test_malformed_files_are_rejected_with_the_reason(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bad.safetensors")
            entry = {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}
            self._write_raw(path, {"w": entry}, b"\0" * 12)
            with self.assertRaisesRegex(st.CheckpointError, "offsets"):
                st.read_safetensors(path)
            self._write_raw(path, {"w": dict(entry, dtype="I8")}, b"\0" * 16)
            with self.assertRaisesRegex(st.CheckpointError, "dtype I8"):
                st.read_safetensors(path)
            self._write_raw(path, {"w": entry, "v": dict(entry, data_offsets=[8, 24])},
                            b"\0" * 24)
            with self.assertRaisesRegex(st.CheckpointError, "overlap"):
                st.read_safetensors(path)
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", 1 << 40))
            with self.assertRaisesRegex(st.CheckpointError, "header length"):
                st.read_safetensors(path)

    def test_sharded_checkpoint_equals_single_file(self):
        config, tensors = variant("qwen2_moe", seed=5)
        with tempfile.TemporaryDirectory() as tmp:
            one, three = os.path.join(tmp, "one"), os.path.join(tmp, "three")
            st.write_checkpoint(one, config, tensors, "BF16")
            st.write_checkpoint(three, config, tensors, "BF16", shards=3)
            with open(os.path.join(three, st.INDEX_NAME), encoding="utf-8") as f:
                index = json.load(f)
            files = sorted(set(index["weight_map"].values()))
            self.assertEqual(files, [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)])
            self.assertEqual(set(index["weight_map"]), set(tensors))
            self.assertFalse(os.path.exists(os.path.join(three, st.SINGLE_NAME)))
            config_one, tensors_one = st.load_checkpoint(one)
            config_three, tensors_three = st.load_checkpoint(three)
        self.assertEqual(config_one, config_three)
        self.assertEqual(set(tensors_one), set(tensors_three))
        for name in tensors_one:
            np.testing.assert_array_equal(tensors_one[name], tensors_three[name], err_msg=name)


class ReferenceModelTest(unittest.TestCase):
    def test_matches_naive_loops_for_every_family(self):
        ids = [3, 17, 5, 60, 5, 22, 41, 9, 0, 33]
        for i, name in enumerate(VARIANTS):
            seed = 100 + i
            with self.subTest(variant=name, seed=seed):
                config, tensors = variant(name, seed)
                model = ReferenceModel(config, tensors)
                self.assertEqual(model.unused_tensors, [])
                want = naive_logits(config, tensors, ids)
                got = model.logits(ids)
                np.testing.assert_allclose(got, want, rtol=0, atol=1e-10,
                                           err_msg=f"{name} seed {seed}")

    def test_kv_cache_steps_equal_the_full_sequence(self):
        ids = [7, 1, 30, 2, 63, 12, 12, 40, 8, 19, 50, 4]
        for i, name in enumerate(VARIANTS):
            seed = 200 + i
            with self.subTest(variant=name, seed=seed):
                model = ReferenceModel(*variant(name, seed))
                full = model.logits(ids)
                cache = model.new_cache()
                pieces = [model.forward(ids[:5], cache)]
                pieces += [model.forward([t], cache) for t in ids[5:9]]
                pieces.append(model.forward(ids[9:], cache))
                np.testing.assert_allclose(np.concatenate(pieces), full, rtol=0, atol=1e-11,
                                           err_msg=f"{name} seed {seed}")

    def test_later_tokens_do_not_change_earlier_logits(self):
        model = ReferenceModel(*variant("olmoe", 300))
        a = model.logits([1, 2, 3, 4, 5, 6])
        b = model.logits([1, 2, 3, 9, 10, 11])
        np.testing.assert_allclose(a[:3], b[:3], rtol=0, atol=1e-12)
        self.assertGreater(np.abs(a[3:] - b[3:]).max(), 1e-3)

    def test_top_all_renormalized_router_is_a_softmax_mixture(self):
        config = build_config("qwen3_moe", hidden=24, heads=2, kv_heads=1, experts=4, top_k=4,
                              moe_inter=8, vocab=32, norm_topk_prob=True)
        model = ReferenceModel(config, random_tensors(config, 400))
        layer = model.layers[0]
        h = np.random.default_rng(400).standard_normal((6, 24))
        got = model._feed_forward(layer, h)
        for t in range(6):
            logits = layer["router"] @ h[t]
            p = np.exp(logits - logits.max())
            p /= p.sum()
            want = np.zeros(24)
            for e, (gate, up, down) in enumerate(layer["experts"]):
                g = gate @ h[t]
                want += p[e] * (down @ (g / (1 + np.exp(-g)) * (up @ h[t])))
            np.testing.assert_allclose(got[t], want, rtol=0, atol=1e-12, err_msg=f"row {t}")

    def test_one_expert_top1_equals_a_dense_swiglu_mlp(self):
        # Qwen3-MoE has a dense layer type: the whole model must match one whose MoE layers are
        # replaced by dense MLPs holding expert 0's weights.
        shape = dict(layers=2, hidden=32, heads=4, kv_heads=2, experts=1, top_k=1, moe_inter=16,
                     vocab=48)
        moe = build_config("qwen3_moe", norm_topk_prob=False, **shape)
        dense = build_config("qwen3_moe", intermediate_size=16, mlp_only_layers=[0, 1], **shape)
        tensors = random_tensors(moe, 500)
        renamed = {n.replace("mlp.experts.0.", "mlp."): t for n, t in tensors.items()
                   if ".mlp.gate.weight" not in n}
        ids = [1, 5, 9, 47, 0, 3]
        np.testing.assert_allclose(ReferenceModel(moe, tensors).logits(ids),
                                   ReferenceModel(dense, renamed).logits(ids), rtol=0, atol=1e-12)
        # Mixtral and OLMoE have no dense layer: their MoE block must equal a hand-written SwiGLU.
        names = {"mixtral": ("model.layers.0.block_sparse_moe.experts.0.", ("w1", "w3", "w2")),
                 "olmoe": ("model.layers.0.mlp.experts.0.", ("gate_proj", "up_proj",
                                                              "down_proj"))}
        for family, (prefix, (gate, up, down)) in names.items():
            with self.subTest(family=family):
                config = build_config(family, **shape)
                tensors = random_tensors(config, 501)
                model = ReferenceModel(config, tensors)
                h = np.random.default_rng(501).standard_normal((5, 32))
                g = h @ tensors[prefix + gate + ".weight"].astype(np.float64).T
                u = h @ tensors[prefix + up + ".weight"].astype(np.float64).T
                want = (g / (1 + np.exp(-g)) * u) @ tensors[prefix + down + ".weight"].T
                np.testing.assert_allclose(model._feed_forward(model.layers[0], h), want,
                                           rtol=0, atol=1e-12)

    def test_rope_is_identity_at_position_zero_and_relative(self):
        rng = np.random.default_rng(600)
        q, k = rng.standard_normal((2, 1, 16))
        cos, sin = rope_cos_sin([0], 16, 10000.0)
        np.testing.assert_array_equal(apply_rope(q, cos, sin), q)
        dots = []
        for m, n in ((3, 1), (10, 8), (52, 50)):
            cm, sm = rope_cos_sin([m], 16, 10000.0)
            cn, sn = rope_cos_sin([n], 16, 10000.0)
            rq, rk = apply_rope(q, cm, sm), apply_rope(k, cn, sn)
            self.assertAlmostEqual(np.linalg.norm(rq), np.linalg.norm(q), places=12)
            dots.append(float(rq[0] @ rk[0]))
        self.assertAlmostEqual(dots[0], dots[1], places=10)
        self.assertAlmostEqual(dots[0], dots[2], places=10)

    def test_rope_pairs_dimension_i_with_i_plus_half(self):
        x = np.zeros((1, 8))
        x[0, 1] = 1.0
        cos, sin = rope_cos_sin([1], 8, 10000.0)
        out = apply_rope(x, cos, sin)[0]
        angle = 10000.0 ** (-2.0 / 8)
        np.testing.assert_allclose(out[[1, 5]], [math.cos(angle), math.sin(angle)], atol=1e-15)
        self.assertEqual(np.count_nonzero(out), 2)

    def test_grouped_query_heads_read_consecutive_kv_heads(self):
        # Four query heads over two KV heads: heads 0 and 1 read KV head 0, 2 and 3 read head 1.
        q = np.zeros((4, 1, 2))
        k = np.zeros((2, 1, 2))
        v = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])
        out = causal_attention(q, k, v, np.array([0]), np.array([0])).reshape(4, 2)
        np.testing.assert_array_equal(out, [[1, 0], [1, 0], [0, 1], [0, 1]])

    def test_sparse_layer_rule_follows_qwen(self):
        config = build_config("qwen2_moe", layers=6, decoder_sparse_step=2, mlp_only_layers=[3])
        spec = ReferenceModel.__init__.__globals__["ModelSpec"](config)
        self.assertEqual([spec.layer_is_sparse(i) for i in range(6)],
                         [False, True, False, False, False, True])
        names = tensor_shapes(config)
        self.assertIn("model.layers.0.mlp.gate_proj.weight", names)
        self.assertIn("model.layers.1.mlp.shared_expert_gate.weight", names)

    def test_tied_embeddings_equal_an_explicit_copy(self):
        config, tensors = variant("qwen3_moe_step2_tied", 700)
        untied = dict(config, tie_word_embeddings=False)
        copied = dict(tensors, **{"lm_head.weight": tensors["model.embed_tokens.weight"]})
        ids = [4, 8, 15, 16, 23, 42]
        np.testing.assert_array_equal(ReferenceModel(config, tensors).logits(ids),
                                      ReferenceModel(untied, copied).logits(ids))

    def test_olmoe_clip_qkv_is_applied(self):
        config, tensors = variant("olmoe", 800)
        ids = [1, 2, 3, 4]
        clipped = ReferenceModel(config, tensors).logits(ids)
        loose = ReferenceModel(dict(config, clip_qkv=1e9), tensors).logits(ids)
        unclipped = ReferenceModel(dict(config, clip_qkv=None), tensors).logits(ids)
        np.testing.assert_array_equal(loose, unclipped)
        self.assertGreater(np.abs(clipped - unclipped).max(), 1e-3)

    def test_missing_and_misshapen_tensors_are_named(self):
        config, tensors = variant("mixtral", 900)
        broken = dict(tensors)
        del broken["model.layers.1.block_sparse_moe.experts.2.w3.weight"]
        with self.assertRaisesRegex(KeyError, "experts.2.w3"):
            ReferenceModel(config, broken)
        broken = dict(tensors, **{"model.norm.weight": np.ones(3, dtype=np.float32)})
        with self.assertRaisesRegex(ValueError, "model.norm.weight"):
            ReferenceModel(config, broken)
        extra = dict(tensors, **{"model.rotary_emb.inv_freq": np.ones(4, dtype=np.float32)})
        self.assertEqual(ReferenceModel(config, extra).unused_tensors,
                         ["model.rotary_emb.inv_freq"])

    def test_config_defaults_follow_hugging_face(self):
        config, tensors = variant("olmoe", 950)
        del config["num_key_value_heads"]
        config["num_attention_heads"] = 2
        with self.assertRaisesRegex(ValueError, "q_proj|k_proj"):
            ReferenceModel(config, tensors)  # Default kv heads = heads, which mismatches k_proj.
        config = build_config("mixtral")
        del config["rope_theta"]
        spec = ReferenceModel.__init__.__globals__["ModelSpec"](config)
        self.assertEqual(spec.rope_theta, 1e6)
        config = build_config("qwen3_moe")
        del config["rope_theta"]
        config["rope_parameters"] = {"rope_type": "default", "rope_theta": 5e5}
        self.assertEqual(ReferenceModel.__init__.__globals__["ModelSpec"](config).rope_theta, 5e5)


class DeepseekTest(unittest.TestCase):
    def test_matches_naive_loops(self):
        ids = [3, 17, 5, 60, 5, 22, 41, 9, 0, 33, 12, 12]
        for i, name in enumerate(DEEPSEEK_VARIANTS):
            seed = 1100 + i
            with self.subTest(variant=name, seed=seed):
                config, tensors = deepseek_variant(name, seed)
                model = ReferenceModel(config, tensors)
                self.assertEqual(model.unused_tensors, [])
                np.testing.assert_allclose(model.logits(ids),
                                           naive_deepseek_logits(config, tensors, ids),
                                           rtol=0, atol=1e-10, err_msg=f"{name} seed {seed}")

    def test_absorbed_latent_attention_equals_naive(self):
        # The engine's form (latent cache, W_UK absorbed into the query, W_UV after the
        # attention) against the expanded heads, full sequence and step by step.
        ids = [7, 1, 30, 2, 63, 12, 12, 40, 8, 19, 50, 4]
        for i, name in enumerate(DEEPSEEK_VARIANTS):
            seed = 1200 + i
            with self.subTest(variant=name, seed=seed):
                config, tensors = deepseek_variant(name, seed)
                naive = ReferenceModel(config, tensors)
                absorbed = ReferenceModel(config, tensors, mla_absorbed=True)
                full = naive.logits(ids)
                np.testing.assert_allclose(absorbed.logits(ids), full, rtol=0, atol=1e-11)
                for model in (naive, absorbed):
                    cache = model.new_cache()
                    pieces = [model.forward(ids[:5], cache)]
                    pieces += [model.forward([t], cache) for t in ids[5:9]]
                    pieces.append(model.forward(ids[9:], cache))
                    np.testing.assert_allclose(np.concatenate(pieces), full, rtol=0, atol=1e-11)
                cache = absorbed.new_cache()
                absorbed.forward(ids, cache)
                s = absorbed.spec
                self.assertEqual(cache["layers"][0]["c_kv"].shape, (len(ids), s.kv_lora_rank))
                self.assertEqual(cache["layers"][0]["k_pe"].shape, (len(ids), s.qk_rope))

    def test_absorbed_equals_naive_on_every_case(self):
        ids = list(range(1, 30, 3))
        for case in CASES:
            if case["family"] != "deepseek_v3":
                continue
            with self.subTest(case=case["name"]):
                _, _, naive = deepseek_case_model(case)
                _, _, absorbed = deepseek_case_model(case, mla_absorbed=True)
                np.testing.assert_allclose(absorbed.logits(ids), naive.logits(ids), rtol=0,
                                           atol=1e-10)

    def test_router_keeps_to_its_groups(self):
        rng = np.random.default_rng(1300)
        for experts, groups, keep, k in ((8, 4, 2, 2), (8, 4, 1, 2), (12, 3, 2, 5), (6, 1, 1, 3),
                                         (16, 8, 4, 8)):
            per = experts // groups
            scores = 1 / (1 + np.exp(-rng.standard_normal((200, experts))))
            bias = rng.uniform(0, 0.2, experts)
            chosen, gap = group_limited_topk(scores, bias, groups, keep, k)
            self.assertGreater(gap, 0)
            biased = scores + bias
            for row, picks in zip(biased, chosen):
                group_score = np.sort(row.reshape(groups, per), axis=1)[:, -2:].sum(axis=1)
                kept = set(np.argsort(-group_score, kind="stable")[:keep])
                self.assertTrue({e // per for e in picks} <= kept, (experts, groups, keep))
                allowed = [e for e in range(experts) if e // per in kept]
                best = sorted(allowed, key=lambda e: -row[e])[:k]
                self.assertEqual(list(picks), best)

    def test_router_ties_go_to_the_lower_index(self):
        scores = np.array([[0.5, 0.7, 0.7, 0.5, 0.7, 0.7, 0.1, 0.1]])
        bias = np.zeros(8)
        # Group scores (sum of the top 2): 1.2, 1.2, 1.4, 0.2. Keeping 2 keeps group 2 and, of
        # the tied groups 0 and 1, group 0; then experts 1, 4 and 5 tie at 0.7 ahead of 0.
        chosen, gap = group_limited_topk(scores, bias, 4, 2, 3)
        self.assertEqual(chosen.tolist(), [[1, 4, 5]])
        self.assertEqual(gap, 0.0)
        chosen, _ = group_limited_topk(np.array([[0.3, 0.3, 0.3, 0.3]]), np.zeros(4), 1, 1, 2)
        self.assertEqual(chosen.tolist(), [[0, 1]])

    def test_router_weights_are_unbiased_scores(self):
        config, tensors = deepseek_variant("qlora_groups", 1400)
        for norm, rsf in ((True, 2.5), (False, 1.5)):
            model = ReferenceModel(dict(config, norm_topk_prob=norm, routed_scaling_factor=rsf),
                                   tensors)
            layer = model.layers[1]
            h = np.random.default_rng(1400).standard_normal((20, 32))
            chosen, weights = model._route_deepseek(layer, h)
            scores = 1 / (1 + np.exp(-(h @ layer["router"].T)))
            want = np.take_along_axis(scores, chosen, axis=1)
            if norm:
                want = want / want.sum(axis=1, keepdims=True)
            np.testing.assert_allclose(weights, want * rsf, rtol=1e-14, atol=0)

    def test_random_routing_is_not_trivial(self):
        # With the writer's bias, the biased group-limited choice differs from the unbiased one
        # and from the ungrouped one for a fair share of tokens, but not for all.
        case = next(c for c in CASES if c["name"] == "own_deepseek_v3_qlora_groups_f32")
        _, _, model = deepseek_case_model(case)
        model.route_log = []
        greedy(model, [5, 6, 7, 8], 32)
        s = model.spec
        differs = np.zeros(2)
        total = 0
        for entry in model.route_log:
            scores, picks = entry["scores"], entry["chosen"]
            unbiased, _ = group_limited_topk(scores, np.zeros_like(entry["bias"]), s.n_group,
                                             s.topk_group, s.top_k)
            ungrouped, _ = group_limited_topk(scores, entry["bias"], 1, 1, s.top_k)
            for a, b, g in zip(picks, unbiased, ungrouped):
                differs += [set(a) != set(b), set(a) != set(g)]
                total += 1
        share = differs / total
        self.assertTrue(np.all(share > 0.1) and np.all(share < 0.9), share)

    def test_bias_at_or_below_zero_is_refused(self):
        scores = np.array([[0.9, 0.8, 0.1, 0.1]])
        with self.assertRaises(NotImplementedError):
            group_limited_topk(scores, np.array([0.0, -0.85, 0.0, 0.0]), 2, 1, 2)

    def test_yarn_factor_one_is_plain_rope(self):
        config, tensors = deepseek_variant("noqlora_yarn", 1500)
        plain = dict(config, rope_scaling=None)
        one = dict(config, rope_scaling=yarn_rope_scaling(1.0, 4096), max_position_embeddings=4096)
        self.assertEqual(ReferenceModel(one, tensors).spec.softmax_scale,
                         ReferenceModel(plain, tensors).spec.softmax_scale)
        ids = [4, 8, 15, 16, 23, 42]
        np.testing.assert_allclose(ReferenceModel(one, tensors).logits(ids),
                                   ReferenceModel(plain, tensors).logits(ids), rtol=0, atol=1e-12)
        self.assertGreater(np.abs(ReferenceModel(config, tensors).logits(ids)
                                  - ReferenceModel(plain, tensors).logits(ids)).max(), 1e-2)

    def test_yarn_formulas(self):
        # rope dim 16, theta 1e4, original 4096, beta 32/1: pair index of 32 rotations
        # 16 ln(4096 / 64 pi) / (2 ln 1e4) = 2.62 -> 2, of 1 rotation 5.63 -> 6.
        self.assertEqual(yarn_correction_range(16, 1e4, 4096, 32, 1), (2, 6))
        base = 1e4 ** (-np.arange(0, 16, 2) / 16)
        got = yarn_inv_freq(16, 1e4, 40.0, 4096, 32, 1)
        ramp = np.array([0, 0, 0, 0.25, 0.5, 0.75, 1, 1])
        np.testing.assert_allclose(got, base * (1 - ramp) + base / 40 * ramp, rtol=1e-15)
        np.testing.assert_allclose(yarn_inv_freq(16, 1e4, 1.0, 4096, 32, 1), base, rtol=1e-15)
        # DeepSeek-V3's published rope_scaling: softmax scale (0.1 ln 40 + 1)^2 / sqrt(192),
        # cos/sin unscaled (mscale == mscale_all_dim).
        config = build_config("deepseek_v3", qk_nope_head_dim=128, qk_rope_head_dim=64,
                              rope_scaling=yarn_rope_scaling(40, 4096))
        spec = rm.ModelSpec(config)
        self.assertEqual(config["max_position_embeddings"], 163840)
        self.assertAlmostEqual(spec.softmax_scale,
                               (0.1 * math.log(40) + 1) ** 2 / math.sqrt(192), places=15)
        self.assertEqual(spec.rope_attention_factor, 1.0)
        ratio = rm.ModelSpec(build_config("deepseek_v3", rope_scaling=yarn_rope_scaling(
            4, 256, mscale=1.0, mscale_all_dim=0.8)))
        self.assertAlmostEqual(ratio.rope_attention_factor,
                               (0.1 * math.log(4) + 1) / (0.08 * math.log(4) + 1), places=15)
        self.assertAlmostEqual(ratio.softmax_scale,
                               (0.08 * math.log(4) + 1) ** 2 / math.sqrt(16), places=15)
        mismatch = build_config("deepseek_v3", rope_scaling=yarn_rope_scaling(4, 256),
                                max_position_embeddings=4096)
        with self.assertRaisesRegex(NotImplementedError, "transformers versions disagree"):
            rm.ModelSpec(mismatch)

    def test_rope_pairs_adjacent_dimensions(self):
        # Hugging Face's rope_interleave: stored dims (0, 1) are one rotation pair of frequency
        # inv_freq[0] = 1, so e0 at position m against e1 at position n gives sin(m - n); with
        # the rotate-half pairing (0 with d/2) they would stay orthogonal.
        config, tensors = deepseek_variant("qlora_groups", 1600)
        model = ReferenceModel(config, tensors)
        d = model.spec.qk_rope
        e0, e1 = np.eye(d)[0], np.eye(d)[1]
        for m, n in ((3, 1), (7, 2), (10, 10)):
            cm, sm = rope_cos_sin([m], d, 1e4)
            cn, sn = rope_cos_sin([n], d, 1e4)
            q = model._mla_rope(e0[None], cm, sm)[0]
            k = model._mla_rope(e1[None], cn, sn)[0]
            self.assertAlmostEqual(float(q @ k), math.sin(m - n), places=14)
            halves = ReferenceModel(dict(config, rope_interleave=False), tensors)
            q = halves._mla_rope(e0[None], cm, sm)[0]
            k = halves._mla_rope(e1[None], cn, sn)[0]
            self.assertAlmostEqual(float(q @ k), 0.0, places=14)

    def test_layout_names_and_shapes(self):
        config = build_config("deepseek_v3", layers=2, hidden=32, heads=4, experts=6, top_k=2,
                              moe_inter=8, vocab=64, q_lora_rank=12, kv_lora_rank=10,
                              qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5,
                              n_group=3, topk_group=2, n_shared_experts=2,
                              first_k_dense_replace=1)
        shapes = tensor_shapes(config)
        a = "model.layers.0.self_attn."
        self.assertEqual(shapes[a + "q_a_proj.weight"], (12, 32))
        self.assertEqual(shapes[a + "q_a_layernorm.weight"], (12,))
        self.assertEqual(shapes[a + "q_b_proj.weight"], (4 * 10, 12))
        self.assertEqual(shapes[a + "kv_a_proj_with_mqa.weight"], (10 + 4, 32))
        self.assertEqual(shapes[a + "kv_a_layernorm.weight"], (10,))
        self.assertEqual(shapes[a + "kv_b_proj.weight"], (4 * (6 + 5), 10))
        self.assertEqual(shapes[a + "o_proj.weight"], (32, 4 * 5))
        self.assertNotIn(a + "q_proj.weight", shapes)
        self.assertEqual(shapes["model.layers.0.mlp.gate_proj.weight"], (16, 32))
        self.assertNotIn("model.layers.0.mlp.gate.weight", shapes)
        m = "model.layers.1.mlp."
        self.assertEqual(shapes[m + "gate.weight"], (6, 32))
        self.assertEqual(shapes[m + "gate.e_score_correction_bias"], (6,))
        self.assertEqual(shapes[m + "experts.5.down_proj.weight"], (32, 8))
        self.assertEqual(shapes[m + "shared_experts.up_proj.weight"], (2 * 8, 32))
        self.assertIn("lm_head.weight", shapes)
        self.assertEqual(config["num_key_value_heads"], 4)
        plain = tensor_shapes(dict(config, q_lora_rank=None, first_k_dense_replace=0))
        self.assertEqual(plain[a + "q_proj.weight"], (4 * 10, 32))
        self.assertNotIn(a + "q_a_proj.weight", plain)
        self.assertIn("model.layers.0.mlp.gate.weight", plain)
        with tempfile.TemporaryDirectory() as tmp:
            write_random_checkpoint(tmp, config, "BF16", 1700)
            raw = st.read_safetensors(os.path.join(tmp, st.SINGLE_NAME), raw=True)
            self.assertEqual(raw[m + "gate.e_score_correction_bias"][0], "F32")
            self.assertEqual(raw[m + "gate.weight"][0], "BF16")
            with open(os.path.join(tmp, "config.json"), encoding="utf-8") as f:
                written = json.load(f)
            self.assertEqual(written["torch_dtype"], "bfloat16")
            self.assertEqual(written["scoring_func"], "sigmoid")
            self.assertEqual(written["topk_method"], "noaux_tc")
            self.assertEqual(ReferenceModel.load(tmp).unused_tensors, [])

    def test_explicit_null_q_lora_rank_is_honoured(self):
        # Hugging Face keeps "q_lora_rank": null (a plain q_proj) rather than its default 1536.
        config, tensors = deepseek_variant("noqlora_yarn", 1800)
        self.assertIsNone(config["q_lora_rank"])
        self.assertIsNone(ReferenceModel(config, tensors).spec.q_lora_rank)
        with self.assertRaisesRegex(KeyError, "q_a_proj"):
            ReferenceModel(dict(config, q_lora_rank=12), tensors)
        with tempfile.TemporaryDirectory() as tmp:
            write_random_checkpoint(tmp, config, "F32", 1800)
            with open(os.path.join(tmp, "config.json"), encoding="utf-8") as f:
                self.assertIn('"q_lora_rank": null', f.read())
            np.testing.assert_array_equal(ReferenceModel.load(tmp).logits([1, 2, 3]),
                                          ReferenceModel(config, tensors).logits([1, 2, 3]))

    def test_latent_norms_use_epsilon_1e6(self):
        # rms_norm_eps reaches the decoder norms only; the q_a/kv_a norms keep 1e-6.
        case = next(c for c in CASES if c["name"] == "own_deepseek_v3_eps_latent_f32")
        _, _, model = deepseek_case_model(case)
        ids = [1, 2, 3, 4, 5, 6, 7, 8]
        want = model.logits(ids)
        saved = rm.MLA_NORM_EPS
        try:
            rm.MLA_NORM_EPS = model.spec.eps
            moved = np.abs(model.logits(ids) - want).max()
        finally:
            rm.MLA_NORM_EPS = saved
        self.assertGreater(moved, 1e-3)

    def test_cases_detect_each_convention(self):
        # Every convention the reference fixes must move some case's logits by far more than
        # the 1e-4 tolerance, or a wrong engine could pass.
        def flip_interleave(m):
            m.spec.rope_interleave = not m.spec.rope_interleave

        def drop_attention_factor(m):
            m.spec.rope_attention_factor = 1.0

        def drop_mscale(m):
            m.spec.softmax_scale = 1 / math.sqrt(m.spec.qk_head_dim)

        def plain_frequencies(m):
            m.spec.rope_inv_freq = rm.rope_inv_freq(m.spec.qk_rope, m.spec.rope_theta)

        def ignore_groups(m):
            m.spec.n_group = m.spec.topk_group = 1

        def drop_routed_scaling(m):
            m.spec.routed_scaling = 1.0

        def flip_norm_topk(m):
            m.spec.norm_topk = not m.spec.norm_topk

        def drop_bias(m):
            for layer in m.layers:
                if "router_bias" in layer:
                    layer["router_bias"] = np.zeros_like(layer["router_bias"])

        def drop_shared(m):
            for layer in m.layers:
                layer.pop("shared_experts", None)

        def bias_in_weights(m):
            route = m._route_deepseek

            def biased(layer, h):
                chosen, weights = route(layer, h)
                extra = layer["router_bias"][chosen]
                return chosen, weights + extra * m.spec.routed_scaling
            m._route_deepseek = biased

        cases = [c for c in CASES if c["family"] == "deepseek_v3"]
        models = [deepseek_case_model(c) for c in cases]
        sequences, wanted = [], []
        for _, _, model in models:
            ids, _ = greedy(model, [1, 2, 3, 4, 5], 32)
            sequences.append([1, 2, 3, 4, 5] + ids)
            wanted.append(model.logits(sequences[-1]))
        for mutate in (flip_interleave, drop_attention_factor, drop_mscale, plain_frequencies,
                       ignore_groups, drop_bias, drop_routed_scaling, flip_norm_topk,
                       drop_shared, bias_in_weights):
            moved = 0.0
            for (config, tensors, _), seq, want in zip(models, sequences, wanted):
                model = ReferenceModel(config, tensors)
                mutate(model)
                moved = max(moved, float(np.abs(model.logits(seq) - want).max()))
            self.assertGreater(moved, 1e-2, mutate.__name__)

    def test_unmodelled_variants_are_refused(self):
        config, tensors = deepseek_variant("qlora_groups", 1900)
        for change, pattern in (({"scoring_func": "softmax"}, "scoring_func"),
                                ({"topk_method": "greedy"}, "topk_method"),
                                ({"moe_layer_freq": 2}, "moe_layer_freq"),
                                ({"attention_bias": True}, "attention_bias"),
                                ({"rope_scaling": {"type": "linear", "factor": 2.0}}, "RoPE")):
            with self.subTest(change=change):
                with self.assertRaisesRegex(NotImplementedError, pattern):
                    ReferenceModel(dict(config, **change), tensors)
        with self.assertRaisesRegex(ValueError, "num_key_value_heads"):
            ReferenceModel(dict(config, num_key_value_heads=1), tensors)


class DriverTest(unittest.TestCase):
    """check_brigade.py against fake_brigade.py: it passes a right engine and fails a wrong one."""

    def _run(self, extra_env, *args):
        env = dict(os.environ, **extra_env)
        with tempfile.TemporaryDirectory() as tmp:
            proc = subprocess.run(
                [sys.executable, os.path.join(HERE, "check_brigade.py"),
                 os.path.join(HERE, "fake_brigade.py"), "--workdir", tmp] + list(args),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=600)
        return proc.returncode, proc.stdout.decode()

    def test_a_faithful_engine_passes_the_quick_cases(self):
        rc, out = self._run({}, "--quick", "--steps", "12")
        self.assertEqual(rc, 0, out)
        quick = sum(1 for c in CASES if c.get("quick"))
        self.assertIn(f"{quick}/{quick} cases match", out)
        self.assertIn("own_deepseek_v3_", out)
        self.assertNotIn("SKIP", out)

    def test_a_pending_family_refused_as_unsupported_is_skipped(self):
        self.assertIn("deepseek_v3", PENDING_FAMILIES)
        env = {"FAKE_BRIGADE_UNSUPPORTED": "deepseek_v3"}
        args = ("--case", "own_deepseek_v3_qlora_groups_f32", "--case", "own_olmoe_sharded_f32",
                "--steps", "4")
        rc, out = self._run(env, *args)
        self.assertEqual(rc, 0, out)
        self.assertIn("SKIP own_deepseek_v3_qlora_groups_f32", out)
        self.assertIn("model_type 'deepseek_v3' is not supported", out)
        self.assertIn("1/1 cases match the reference", out)
        self.assertIn("1 skipped because brigade does not load deepseek_v3 yet", out)
        rc, out = self._run(env, "--strict", *args)
        self.assertEqual(rc, 1, out)
        self.assertIn("FAIL own_deepseek_v3_qlora_groups_f32", out)

    def test_an_unsupported_family_that_is_not_pending_fails(self):
        rc, out = self._run({"FAKE_BRIGADE_UNSUPPORTED": "olmoe"}, "--case",
                            "own_olmoe_sharded_f32", "--steps", "4")
        self.assertEqual(rc, 1, out)
        self.assertIn("FAIL own_olmoe_sharded_f32", out)
        self.assertNotIn("SKIP", out)

    def test_a_logit_error_fails_with_seed_and_row(self):
        rc, out = self._run({"FAKE_BRIGADE_PERTURB": "3:0.0005"}, "--case",
                            "own_olmoe_clip_qkv_bf16", "--steps", "6")
        self.assertEqual(rc, 1, out)
        self.assertIn("seed 701", out)
        self.assertIn("first differing row 3", out)

    def test_a_wrong_greedy_pick_fails(self):
        rc, out = self._run({"FAKE_BRIGADE_WRONG_PICK": "2"}, "--case",
                            "make_qwen2_moe_gqa2_bf16", "--steps", "6")
        self.assertEqual(rc, 1, out)
        self.assertIn("row 2: brigade chose", out)


if __name__ == "__main__":
    unittest.main()
