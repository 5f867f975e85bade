#include "tests/model/tokenizer_fixture.hpp"

#include <unistd.h>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <vector>

#include "model/byte_level.hpp"
#include "model/pre_tokenizer.hpp"

namespace brigade::model::testing {

nlohmann::json tiny_tokenizer_json() {
  using json = nlohmann::json;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b)
    vocab[std::string(byte_level::char_of(static_cast<uint8_t>(b)))] = b;
  const char* merged[] = {"he", "ll", "hell", "hello", "Ġw", "or", "Ġwor", "aa", "bc", "ab"};
  for (int i = 0; i < 10; ++i)
    vocab[merged[i]] = 256 + i;
  const json merges =
      json::array({"h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "a a", "b c", "a b"});
  const auto added = [](int id, const char* content, bool special) {
    return json{{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", false}, {"special", special}};
  };
  const json byte_level_step = {{"type", "ByteLevel"},
                                {"add_prefix_space", false},
                                {"trim_offsets", false},
                                {"use_regex", false}};
  return json{
      {"version", "1.0"},
      {"added_tokens", json::array({added(300, "<|im_start|>", true),
                                    added(301, "<|im_end|>", true), added(302, "<think>", false)})},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", json::array({{{"type", "Split"},
                                        {"pattern", {{"Regex", kQwenSplitPattern}}},
                                        {"behavior", "Isolated"},
                                        {"invert", false}},
                                       byte_level_step})}}},
      {"post_processor", byte_level_step},
      {"decoder", byte_level_step},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"vocab", vocab},
        {"merges", merges}}}};
}

nlohmann::json llama_tokenizer_json() {
  using json = nlohmann::json;
  const std::string space = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  const std::vector<std::string> chars = {space, "h", "e", "l", "o", "w", "r", "d"};
  for (std::size_t i = 0; i < chars.size(); ++i)
    vocab[chars[i]] = 259 + static_cast<int>(i);
  const std::vector<std::pair<std::string, std::string>> merges = {
      {space, "h"}, {"l", "l"}, {space + "h", "e"},  {space + "he", "ll"}, {space + "hell", "o"},
      {space, "w"}, {"o", "r"}, {space + "w", "or"}, {space, space}};
  json merge_list = json::array();
  for (std::size_t i = 0; i < merges.size(); ++i) {
    vocab[merges[i].first + merges[i].second] = 267 + static_cast<int>(i);
    merge_list.push_back(merges[i].first + " " + merges[i].second);
  }
  const auto added = [](int id, const char* content) {
    return json{{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  const json bos = {{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}};
  return json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", json::array({added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")})},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         json::array(
             {{{"type", "Prepend"}, {"prepend", space}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", space}}})}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({bos, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"pair", json::array()},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         json::array({{{"type", "Replace"}, {"pattern", {{"String", space}}}, {"content", " "}},
                      {{"type", "ByteFallback"}},
                      {{"type", "Fuse"}},
                      {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", "<unk>"},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", true},
        {"byte_fallback", true},
        {"vocab", vocab},
        {"merges", merge_list}}}};
}

namespace {

// Removes this process's scratch directories at exit, so repeated runs leave nothing behind.
// Other processes' directories are left alone: ctest runs test cases in parallel.
struct scratch_registry {
  std::mutex mutex;
  std::vector<std::filesystem::path> dirs;
  ~scratch_registry() {
    std::error_code ec;
    for (const auto& d : dirs)
      std::filesystem::remove_all(d, ec);
  }
};

scratch_registry& registry() {
  static scratch_registry r;
  return r;
}

}  // namespace

std::string scratch_dir(const std::string& label) {
  static std::atomic<int> counter{0};
  const std::filesystem::path dir =
      std::filesystem::path(BRIGADE_BINARY_DIR) / "test_scratch" /
      (label + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  scratch_registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  r.dirs.push_back(dir);
  return dir.string();
}

namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

}  // namespace

result<tokenizer> load_json(const nlohmann::json& tok, const nlohmann::json& config) {
  const std::string dir = scratch_dir("tok");
  write_file(dir + "/tokenizer.json", tok.dump());
  if (!config.is_null()) write_file(dir + "/tokenizer_config.json", config.dump());
  return tokenizer::load(dir);
}

result<tokenizer> load_text(const std::string& text) {
  const std::string dir = scratch_dir("tok");
  write_file(dir + "/tokenizer.json", text);
  return tokenizer::load(dir);
}

}  // namespace brigade::model::testing
