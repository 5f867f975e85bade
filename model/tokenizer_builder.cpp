#include "model/tokenizer_builder.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "model/bpe_trainer.hpp"
#include "model/byte_level.hpp"
#include "model/chat_template.hpp"
#include "model/normalizer.hpp"
#include "model/pre_tokenizer.hpp"
#include "model/tokenizer_corpus.hpp"

namespace brigade::model {
namespace {

using ordered_json = nlohmann::ordered_json;

// Vocabularies past this size would only be reserved padding and a needlessly large file.
constexpr int32_t kMaxVocabSize = 1 << 22;

struct family_tokens {
  std::vector<std::string> special;
  std::string bos;  ///< Empty for none.
  std::string eos;
  std::string pad;
  std::string tokenizer_class;
};

family_tokens tokens_for(const std::string& model_type) {
  switch (chat_format_for(model_type)) {
    case chat_format::mistral_inst:
      return {{"<s>", "</s>"}, "<s>", "</s>", "</s>", "PreTrainedTokenizerFast"};
    case chat_format::tulu:
      return {{"<|endoftext|>", "<|padding|>"},
              "",
              "<|endoftext|>",
              "<|padding|>",
              "PreTrainedTokenizerFast"};
    case chat_format::deepseek_v3:
      return {{"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"},
              "<｜begin▁of▁sentence｜>",
              "<｜end▁of▁sentence｜>",
              "<｜end▁of▁sentence｜>",
              "LlamaTokenizerFast"};
    case chat_format::chatml:
    case chat_format::qwen3:
      break;
  }
  return {{"<|endoftext|>", "<|im_start|>", "<|im_end|>"},
          "",
          "<|im_end|>",
          "<|endoftext|>",
          "Qwen2Tokenizer"};
}

std::vector<bpe::merge_pair> learn_merges(std::size_t new_tokens) {
  pre_tokenizer pre;
  pre.add_split_regex(kQwenSplitPattern, pre_tokenizer::split_behavior::isolated, false);
  normalizer nfc;
  nfc.add(normalizer::form::nfc);
  std::vector<std::string> words;
  pre.split(nfc.apply(tokenizer_corpus()), words);
  bpe_trainer trainer;
  for (const std::string& w : words)
    trainer.add_word(w);
  return trainer.train(new_tokens);
}

ordered_json byte_level_component() {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", false},
          {"use_regex", false}};
}

ordered_json added_token_json(int32_t id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

// The model section, in the field order the Hugging Face library writes.
ordered_json model_json(const std::vector<bpe::merge_pair>& merges, int32_t& next_id) {
  ordered_json vocab = ordered_json::object();
  for (int b = 0; b < 256; ++b)
    vocab[std::string(byte_level::char_of(static_cast<uint8_t>(b)))] = b;
  next_id = 256;
  ordered_json merge_list = ordered_json::array();
  for (const auto& [left, right] : merges) {
    const std::string merged = left + right;
    if (!vocab.contains(merged)) vocab[merged] = next_id++;
    // The "left right" form loads in every version of the library; byte-level tokens never
    // contain a space, so it is unambiguous.
    merge_list.push_back(left + " " + right);
  }
  return {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", nullptr},
          {"continuing_subword_prefix", ""},
          {"end_of_word_suffix", ""},
          {"fuse_unk", false},
          {"byte_fallback", false},
          {"ignore_merges", false},
          {"vocab", std::move(vocab)},
          {"merges", std::move(merge_list)}};
}

ordered_json tokenizer_json(const tokenizer_spec& spec, const family_tokens& family) {
  const auto specials = static_cast<int32_t>(family.special.size());
  const auto merges = learn_merges(static_cast<std::size_t>(spec.vocab_size - 256 - specials));
  int32_t next_id = 0;
  ordered_json model = model_json(merges, next_id);
  ordered_json added = ordered_json::array();
  for (const std::string& content : family.special)
    added.push_back(added_token_json(next_id++, content));
  for (int32_t reserved = 0; next_id < spec.vocab_size; ++reserved) {
    added.push_back(added_token_json(next_id++, "<|reserved_" + std::to_string(reserved) + "|>"));
  }
  ordered_json split = {{"type", "Split"},
                        {"pattern", {{"Regex", kQwenSplitPattern}}},
                        {"behavior", "Isolated"},
                        {"invert", false}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", std::move(added)},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer",
           {{"type", "Sequence"},
            {"pretokenizers", ordered_json::array({split, byte_level_component()})}}},
          {"post_processor", byte_level_component()},
          {"decoder", byte_level_component()},
          {"model", std::move(model)}};
}

ordered_json config_json(const tokenizer_spec& spec, const family_tokens& family) {
  const auto token_or_null = [](const std::string& t) {
    return t.empty() ? ordered_json(nullptr) : ordered_json(t);
  };
  return {{"add_bos_token", false},
          {"add_eos_token", false},
          {"bos_token", token_or_null(family.bos)},
          {"clean_up_tokenization_spaces", false},
          {"eos_token", family.eos},
          {"model_max_length", spec.model_max_length},
          {"pad_token", family.pad},
          {"tokenizer_class", family.tokenizer_class}};
}

status write_text(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path temp = path.string() + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) {
      return error{errc::io_error, "cannot write " + temp.string() + "; check disk space"};
    }
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) return error{errc::io_error, "cannot rename " + temp.string() + ": " + ec.message()};
  return ok_status();
}

}  // namespace

status write_byte_level_tokenizer(const std::string& dir, const tokenizer_spec& spec) {
  const family_tokens family = tokens_for(spec.model_type);
  const auto minimum = static_cast<int32_t>(256 + family.special.size() + 1);
  if (spec.vocab_size < minimum || spec.vocab_size > kMaxVocabSize) {
    return error{errc::invalid_argument,
                 "tokenizer vocab_size " + std::to_string(spec.vocab_size) + " for model_type '" +
                     spec.model_type + "' must be in [" + std::to_string(minimum) + ", " +
                     std::to_string(kMaxVocabSize) + "]: 256 byte tokens, the special tokens " +
                     "and at least one merge"};
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return error{errc::io_error, "cannot create directory " + dir + ": " + ec.message()};
  const std::filesystem::path base(dir);
  if (auto s = write_text(base / "tokenizer.json", tokenizer_json(spec, family).dump(2) + "\n");
      !s) {
    return s;
  }
  return write_text(base / "tokenizer_config.json", config_json(spec, family).dump(2) + "\n");
}

}  // namespace brigade::model
