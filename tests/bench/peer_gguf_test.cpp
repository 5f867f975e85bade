// The GGUF that `brigade bench engine --peer llamacpp` hands llama.cpp, read back by a reader
// written from the GGUF specification alone: header, metadata, the tensor table, alignment, sizes,
// and the bytes of a few tensors against the checkpoint they came from.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/peers/llamacpp/qwen3moe_gguf.hpp"
#include "model/safetensors.hpp"
#include "tests/support/run_brigade.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

// One metadata value: scalars as numbers or text, arrays by element type and count.
struct gguf_kv {
  uint32_t type = 0;
  uint64_t number = 0;
  std::string text;
  uint32_t array_type = 0;
  std::vector<std::string> strings;  // string arrays only
  uint64_t count = 0;                // array elements
};

struct gguf_tensor {
  std::vector<uint64_t> dims;
  uint32_t type = 0;
  uint64_t offset = 0;
};

struct gguf_file {
  uint32_t version = 0;
  uint64_t tensor_count = 0, kv_count = 0;
  std::map<std::string, gguf_kv> kv;
  std::map<std::string, gguf_tensor> tensors;
  uint64_t data_start = 0;
  std::vector<unsigned char> bytes;
};

class cursor {
 public:
  explicit cursor(const std::vector<unsigned char>& b) : b_(b) {}
  template <class T>
  T get() {
    if (at_ + sizeof(T) > b_.size()) throw std::runtime_error("GGUF ends early");
    T v;
    std::memcpy(&v, &b_[at_], sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string text() {
    const uint64_t n = get<uint64_t>();
    if (at_ + n > b_.size()) throw std::runtime_error("GGUF string runs past the end");
    std::string s(reinterpret_cast<const char*>(&b_[at_]), n);
    at_ += n;
    return s;
  }
  size_t at() const { return at_; }

 private:
  const std::vector<unsigned char>& b_;
  size_t at_ = 0;
};

// Scalar sizes by GGUF value type: u8 i8 u16 i16 u32 i32 f32 bool (string, array) u64 i64 f64.
size_t scalar_bytes(uint32_t type) {
  static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  if (type > 12 || sizes[type] == 0) throw std::runtime_error("not a scalar type");
  return sizes[type];
}

uint64_t read_scalar(cursor& c, uint32_t type) {
  switch (scalar_bytes(type)) {
    case 1:
      return c.get<uint8_t>();
    case 2:
      return c.get<uint16_t>();
    case 4:
      return c.get<uint32_t>();
    default:
      return c.get<uint64_t>();
  }
}

gguf_file read_gguf(const std::string& path) {
  gguf_file f;
  std::ifstream in(path, std::ios::binary);
  f.bytes.assign(std::istreambuf_iterator<char>(in), {});
  cursor c(f.bytes);
  if (c.get<uint32_t>() != 0x46554747u) throw std::runtime_error("no GGUF magic");
  f.version = c.get<uint32_t>();
  f.tensor_count = c.get<uint64_t>();
  f.kv_count = c.get<uint64_t>();
  for (uint64_t i = 0; i < f.kv_count; ++i) {
    const std::string key = c.text();
    gguf_kv v;
    v.type = c.get<uint32_t>();
    if (v.type == 8) {
      v.text = c.text();
    } else if (v.type == 9) {
      v.array_type = c.get<uint32_t>();
      v.count = c.get<uint64_t>();
      for (uint64_t k = 0; k < v.count; ++k) {
        if (v.array_type == 8)
          v.strings.push_back(c.text());
        else
          (void)read_scalar(c, v.array_type);
      }
    } else {
      v.number = read_scalar(c, v.type);
    }
    if (!f.kv.emplace(key, v).second) throw std::runtime_error("duplicate key " + key);
  }
  for (uint64_t i = 0; i < f.tensor_count; ++i) {
    const std::string name = c.text();
    gguf_tensor t;
    const uint32_t n_dims = c.get<uint32_t>();
    for (uint32_t d = 0; d < n_dims; ++d)
      t.dims.push_back(c.get<uint64_t>());
    t.type = c.get<uint32_t>();
    t.offset = c.get<uint64_t>();
    if (!f.tensors.emplace(name, t).second) throw std::runtime_error("duplicate tensor " + name);
  }
  const uint64_t alignment =
      f.kv.count("general.alignment") ? f.kv["general.alignment"].number : 32;
  f.data_start = (c.at() + alignment - 1) / alignment * alignment;
  return f;
}

uint64_t tensor_bytes(const gguf_tensor& t) {
  uint64_t n = t.type == 0 ? 4 : 2;  // f32; f16 and bf16
  for (uint64_t d : t.dims)
    n *= d;
  return n;
}

const std::string tiny_model_args =
    "--family qwen3_moe --layers 2 --hidden 64 --heads 2 --kv-heads 1 --head-dim 32 --experts 4 "
    "--top-k 2 --moe-inter 32 --vocab 300 --seed 3";

}  // namespace

TEST_CASE("the qwen3moe GGUF of a make-model checkpoint reads back whole", "[bench][peer]") {
  brigade::testing::temp_dir dir("peer_gguf");
  const std::string model_dir = dir.file("tiny");
  const auto made =
      brigade::testing::run_brigade("make-model --out " + model_dir + " " + tiny_model_args);
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  const std::string out = dir.file("tiny.gguf");
  const auto written = brigade::bench::llamacpp::write_qwen3moe_gguf(model_dir, out);
  REQUIRE(written.ok());

  const gguf_file f = read_gguf(out);
  CHECK(f.version == 3);
  // Per layer: 4 norms, the router, q/k/v/o, 3 expert stacks; then embedding, final norm, head.
  CHECK(f.tensor_count == 2 * 12 + 3);
  CHECK(f.tensors.size() == f.tensor_count);
  CHECK(written->tensors == f.tensor_count);
  CHECK(written->file_bytes == f.bytes.size());
  CHECK(f.kv.at("general.architecture").text == "qwen3moe");
  CHECK(f.kv.at("general.alignment").number == 32);
  const std::map<std::string, uint64_t> hparams{{"qwen3moe.block_count", 2},
                                                {"qwen3moe.embedding_length", 64},
                                                {"qwen3moe.attention.head_count", 2},
                                                {"qwen3moe.attention.head_count_kv", 1},
                                                {"qwen3moe.attention.key_length", 32},
                                                {"qwen3moe.attention.value_length", 32},
                                                {"qwen3moe.expert_count", 4},
                                                {"qwen3moe.expert_used_count", 2},
                                                {"qwen3moe.expert_feed_forward_length", 32}};
  for (const auto& [key, value] : hparams) {
    INFO(key);
    REQUIRE(f.kv.count(key) == 1);
    CHECK(f.kv.at(key).type == 4);
    CHECK(f.kv.at(key).number == value);
  }
  for (const char* key : {"qwen3moe.rope.freq_base", "qwen3moe.attention.layer_norm_rms_epsilon",
                          "qwen3moe.context_length", "tokenizer.ggml.merges",
                          "tokenizer.ggml.eos_token_id", "tokenizer.ggml.pre"}) {
    INFO(key);
    CHECK(f.kv.count(key) == 1);
  }
  const gguf_kv& tokens = f.kv.at("tokenizer.ggml.tokens");
  CHECK(tokens.array_type == 8);
  REQUIRE(tokens.strings.size() == 300);
  CHECK(std::set<std::string>(tokens.strings.begin(), tokens.strings.end()).size() == 300);
  CHECK(f.kv.at("tokenizer.ggml.token_type").count == 300);
  CHECK(tokens.strings.at(f.kv.at("tokenizer.ggml.eos_token_id").number) == "<|im_end|>");

  // Every tensor inside the data section, aligned, and none overlapping the next.
  CHECK(f.data_start % 32 == 0);
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const auto& [name, t] : f.tensors) {
    INFO(name);
    CHECK(t.offset % 32 == 0);
    CHECK(f.data_start + t.offset + tensor_bytes(t) <= f.bytes.size());
    const bool kept_f32 = t.dims.size() == 1 || name.find("ffn_gate_inp") != std::string::npos;
    CHECK(t.type == (kept_f32 ? 0u : 30u));
    spans.emplace_back(t.offset, t.offset + tensor_bytes(t));
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    CHECK(spans[i - 1].second <= spans[i].first);
  CHECK(f.bytes.size() - f.data_start == (spans.back().second + 31) / 32 * 32);
  CHECK(f.tensors.at("token_embd.weight").dims == std::vector<uint64_t>{64, 300});
  CHECK(f.tensors.at("blk.1.ffn_gate_inp.weight").dims == std::vector<uint64_t>{64, 4});
  CHECK(f.tensors.at("blk.0.ffn_up_exps.weight").dims == std::vector<uint64_t>{64, 32, 4});
  CHECK(f.tensors.at("blk.1.ffn_down_exps.weight").dims == std::vector<uint64_t>{32, 64, 4});

  // Expert 2 of layer 1's stack is that expert's bf16 matrix, byte for byte.
  auto st = brigade::model::safetensors_file::open(model_dir + "/model.safetensors");
  REQUIRE(st.ok());
  const auto* down = st.value()->find("model.layers.1.mlp.experts.2.down_proj.weight");
  REQUIRE(down != nullptr);
  REQUIRE(down->type == brigade::model::st_dtype::bf16);
  const gguf_tensor& stack = f.tensors.at("blk.1.ffn_down_exps.weight");
  const unsigned char* slice = &f.bytes[f.data_start + stack.offset + 2 * down->bytes];
  CHECK(std::memcmp(slice, down->data, down->bytes) == 0);
}

TEST_CASE("a checkpoint llama.cpp's qwen3moe would run differently is refused", "[bench][peer]") {
  brigade::testing::temp_dir dir("peer_gguf_refused");
  const std::string model_dir = dir.file("dense_layer");
  const auto made = brigade::testing::run_brigade("make-model --out " + model_dir + " " +
                                                  tiny_model_args + " --mlp-only-layers 1");
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  const auto written =
      brigade::bench::llamacpp::write_qwen3moe_gguf(model_dir, dir.file("refused.gguf"));
  REQUIRE_FALSE(written.ok());
  CHECK(written.err().message.find("dense") != std::string::npos);
}
