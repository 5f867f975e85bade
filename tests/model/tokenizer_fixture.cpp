#include "tests/model/tokenizer_fixture.hpp"

#include <unistd.h>
#include <atomic>
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
