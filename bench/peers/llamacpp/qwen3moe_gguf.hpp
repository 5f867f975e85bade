// Converts a Hugging Face qwen3_moe checkpoint (config.json, one model.safetensors,
// tokenizer.json, as `brigade make-model` writes it) into a GGUF file for llama.cpp's `qwen3moe`
// architecture, so that llama.cpp runs the very weights brigade runs.
//
// The 2-D weights (embedding, attention, experts, lm_head) are stored bf16: a bf16 source is
// copied bit for bit, an f32 or f16 source rounded to nearest even. The norms and the router
// (ffn_gate_inp) are stored f32, which is exact for every source type. The vocabulary goes in
// as a byte-level BPE ("gpt2") tokenizer with its merges, because llama.cpp will not load a
// model without one, even though the benchmark only feeds token ids.
#pragma once

#include <string>

#include "common/result.hpp"

namespace brigade::bench::llamacpp {

/// What one conversion wrote.
struct gguf_summary {
  size_t tensors = 0;
  size_t file_bytes = 0;
};

/// Writes `out_path` from the checkpoint in `model_dir`; refuses configurations that llama.cpp's
/// qwen3moe would run differently from brigade (dense layers, rope scaling, unnormalised top-k).
result<gguf_summary> write_qwen3moe_gguf(const std::string& model_dir, const std::string& out_path);

}  // namespace brigade::bench::llamacpp
