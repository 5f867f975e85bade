// Fuzz target: the files and texts brigade reads that a user or a disk hands it. The first byte
// picks the reader; the rest is the content.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "eplb/layout.hpp"
#include "eplb/load_matrix.hpp"
#include "kvcache/mooncake_trace.hpp"
#include "kvcache/ssd_block_file.hpp"
#include "model/confidence_head.hpp"
#include "model/config.hpp"
#include "model/draft_settings.hpp"
#include "model/safetensors.hpp"
#include "model/tokenizer_json.hpp"
#include "transport/fault_points.hpp"
#include "transport/frame_header.hpp"
#include "transport/worker_address.hpp"

using namespace brigade;

namespace {

// Where the safetensors case leaves what it read, so that the reads are not optimised away.
volatile unsigned checksum_sink = 0;

// Readers that take a path get the content through this file.
const std::string& scratch_file(const std::string& content) {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("brigade-fuzz-" + std::to_string(::getpid())))
          .string();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 12) {
    case 0:
      (void)model::parse_config(text, "config.json");
      break;
    case 1: {
      // Every byte a tensor claims must be readable.
      auto file = model::safetensors_file::open(scratch_file(text));
      if (!file) break;
      unsigned sum = 0;
      for (const auto& entry : file.value()->tensors()) {
        for (size_t i = 0; i < entry.second.bytes; ++i)
          sum += entry.second.data[i];
      }
      checksum_sink = sum;
      break;
    }
    case 2: {
      std::istringstream in(text);
      (void)kvcache::parse_mooncake_trace(in, "trace.jsonl");
      break;
    }
    case 3:
      (void)eplb::layout_from_json(text, eplb::layout_shape{2, 8, 4, 3});
      break;
    case 4:
      (void)eplb::load_matrix_from_json(text);
      break;
    case 5:
      (void)model::tokenizer_json::parse(text, "tokenizer.json");
      break;
    case 6: {
      static const auto model =
          kvcache::model_fingerprint::make("m", kvcache::kv_block_shape{2, 4, 2, 4}).value();
      (void)kvcache::ssd_block_file::read(scratch_file(text), model, 42, 7, false);
      break;
    }
    case 7:
      (void)transport::fault_points::parse(text);
      break;
    case 8:
      (void)transport::worker_address::decode({text.data(), text.size()});
      break;
    case 9:
      (void)transport::frame_header::decode({text.data(), text.size()}, size);
      break;
    case 10: {
      // A head that parses answers for any batch.
      auto head = model::confidence_head::parse(text, "confidence_head.json");
      if (!head) break;
      model::draft_feature f;
      f.probability = 0.5f;
      f.entropy = 1.0f;
      for (int batch : {1, 2, 3, 64, 1 << 30})
        checksum_sink = checksum_sink + static_cast<unsigned>(head->keep({f, f, f}, batch));
      (void)head->to_json();
      break;
    }
    case 11:
      (void)model::draft_settings::parse(text, "draft_settings.json");
      break;
  }
  return 0;
}
