// Reads a Hugging Face tokenizer.json (and tokenizer_config.json) into the tokenizer's parts,
// checking every field it uses and naming the field when one is wrong or unsupported.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/result.hpp"
#include "model/added_vocabulary.hpp"
#include "model/bpe.hpp"
#include "model/decoder.hpp"
#include "model/normalizer.hpp"
#include "model/post_processor.hpp"
#include "model/pre_tokenizer.hpp"

namespace brigade::model::tokenizer_json {

struct parts {
  bpe model;
  normalizer norm;
  pre_tokenizer pre;
  decoder dec;
  post_processor post;
  added_vocabulary added;
  std::optional<int32_t> bos_id;
  std::optional<int32_t> eos_id;
};

/// Reads `tokenizer_json_path`, and `config_path` unless it is empty.
result<parts> read(const std::string& tokenizer_json_path, const std::string& config_path);

/// Reads tokenizer.json text already in memory; `name` labels error messages.
result<parts> parse(const std::string& text, const std::string& name);

}  // namespace brigade::model::tokenizer_json
