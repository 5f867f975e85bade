// Writes a small byte-level BPE tokenizer in the Hugging Face format, for generated checkpoints.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.hpp"

namespace brigade::model {

struct tokenizer_spec {
  /// Total ids, added tokens included. At least 256 bytes + the special tokens + 1.
  int32_t vocab_size = 1024;
  /// Hugging Face model_type, which decides the special tokens and chat format.
  std::string model_type = "qwen3_moe";
};

/// Writes DIR/tokenizer.json and DIR/tokenizer_config.json. Merges are learned by a small BPE
/// trainer from an embedded English/code corpus, deterministically, so the files never change.
status write_byte_level_tokenizer(const std::string& dir, const tokenizer_spec& spec);

}  // namespace brigade::model
