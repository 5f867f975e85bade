#!/usr/bin/python3
"""Self-tests of the reference oracle and its driver; they need no brigade binary.

The reference is only worth something if it is right, so it is checked against a second,
deliberately plain implementation (scalar loops per token, head and expert, written from the
same published descriptions), against identities the architectures imply (a KV cache changes
nothing, one expert with top-1 is a dense MLP, top-all with renormalization is a softmax mixture,
RoPE at position 0 is the identity), and its file reader against hand-made bytes.

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
from random_checkpoint import build_config, random_tensors, tensor_shapes  # noqa: E402
from reference_model import (ReferenceModel, apply_rope, causal_attention,  # noqa: E402
                             rope_cos_sin)


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
        self.assertIn("8/8 cases match", out)

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
