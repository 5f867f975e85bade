"""Hugging Face checkpoint files: model.safetensors (written and read here, without the
safetensors package) and config.json with every field of transformers' Qwen3MoeConfig or
Qwen3Config."""
import json
import os
import struct

import numpy as np
import torch

from . import bpe, modeling, tokenizer_files

DTYPE_NAMES = {torch.bfloat16: "BF16", torch.float32: "F32"}


def _tensor_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        # The bf16 bits, read through int16 (numpy has no bfloat16).
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write_safetensors(path, tensors, dtype=torch.bfloat16):
    """tensors: {name: float tensor}, written as dtype (rounded to nearest even), sorted by name:
    8-byte little-endian header size, the JSON header padded with spaces to a multiple of 8, the
    data."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        blob = _tensor_bytes(tensors[name].to(dtype))
        header[name] = {"dtype": DTYPE_NAMES[dtype], "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    """{name: float32 tensor} of a file write_safetensors wrote (F32 or BF16)."""
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        raw = np.frombuffer(data[start:end], dtype=np.int16 if entry["dtype"] == "BF16"
                            else np.float32).copy()
        t = torch.from_numpy(raw)
        t = t.view(torch.bfloat16).float() if entry["dtype"] == "BF16" else t
        out[name] = t.reshape(entry["shape"])
    return out


def config_json(shape, tok, aux_loss_coef=0.0):
    """config.json as transformers 4.51 writes it for Qwen3MoeForCausalLM or Qwen3ForCausalLM."""
    end = tok.special_id(bpe.END_OF_TEXT)
    c = {
        "architectures": ["Qwen3MoeForCausalLM" if shape.is_moe else "Qwen3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": end,
        "eos_token_id": end,
        "head_dim": shape.head_dim,
        "hidden_act": "silu",
        "hidden_size": shape.hidden,
        "initializer_range": 0.02,
        "intermediate_size": shape.dense_inter,
        "max_position_embeddings": shape.max_positions,
        "max_window_layers": shape.layers,
        "model_type": shape.family,
        "num_attention_heads": shape.heads,
        "num_hidden_layers": shape.layers,
        "num_key_value_heads": shape.kv_heads,
        "rms_norm_eps": shape.rms_norm_eps,
        "rope_scaling": None,
        "rope_theta": shape.rope_theta,
        "sliding_window": None,
        "tie_word_embeddings": shape.tie_embeddings,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.51.0",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": shape.vocab,
    }
    if shape.is_moe:
        c.update({
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "moe_intermediate_size": shape.moe_inter,
            "norm_topk_prob": shape.norm_topk_prob,
            "num_experts": shape.experts,
            "num_experts_per_tok": shape.top_k,
            "output_router_logits": False,
            "router_aux_loss_coef": aux_loss_coef,
        })
    return dict(sorted(c.items()))


def _write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, ensure_ascii=False)
        f.write("\n")


def write_model_dir(directory, model, tok, aux_loss_coef=0.0):
    """config.json, model.safetensors (bf16), tokenizer.json and tokenizer_config.json."""
    os.makedirs(directory, exist_ok=True)
    _write_json(os.path.join(directory, "config.json"),
                config_json(model.shape, tok, aux_loss_coef))
    write_safetensors(os.path.join(directory, "model.safetensors"), model.tensors())
    _write_json(os.path.join(directory, "tokenizer.json"), tokenizer_files.tokenizer_json(tok))
    _write_json(os.path.join(directory, "tokenizer_config.json"),
                tokenizer_files.tokenizer_config(tok))


def shape_from_config(path):
    with open(os.path.join(path, "config.json")) as f:
        c = json.load(f)
    moe = c["model_type"] == "qwen3_moe"
    return modeling.Shape(
        family=c["model_type"], vocab=c["vocab_size"], hidden=c["hidden_size"],
        layers=c["num_hidden_layers"], heads=c["num_attention_heads"],
        kv_heads=c["num_key_value_heads"], head_dim=c["head_dim"],
        dense_inter=c["intermediate_size"], experts=c.get("num_experts", 0) if moe else 0,
        top_k=c.get("num_experts_per_tok", 0) if moe else 0,
        moe_inter=c.get("moe_intermediate_size", 0) if moe else 0,
        norm_topk_prob=c.get("norm_topk_prob", True), tie_embeddings=c["tie_word_embeddings"],
        rope_theta=c["rope_theta"], rms_norm_eps=c["rms_norm_eps"],
        max_positions=c["max_position_embeddings"])


def load_model_dir(directory):
    """The CausalLM of a directory write_model_dir wrote, with its bf16 weights in float32."""
    model = modeling.CausalLM(shape_from_config(directory))
    tensors = read_safetensors(os.path.join(directory, "model.safetensors"))
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    assert not unexpected, unexpected
    assert all(m == "lm_head.weight" for m in missing) and (not missing or model.lm_head is None)
    return model.eval()


def bf16_copy(model):
    """A copy of model with every weight rounded to bf16 (what the checkpoint holds), in float32:
    what brigade computes with."""
    copy = modeling.CausalLM(model.shape)
    copy.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in model.state_dict().items()})
    return copy.eval()
