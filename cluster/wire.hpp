// The data plane's message formats: fixed-layout headers (memcpy'd: every node runs the same
// brigade build) and the channels they travel on. Payloads follow their header: activations,
// token lists, and KV blocks straight from and into their buffers.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>

#include "transport/byte_buffer.hpp"
#include "transport/ids.hpp"

namespace brigade::cluster::wire {

enum channel : transport::channel_id {
  expert_call = 1,     ///< Rows for an expert shard. Payload: slots (int32 each), then rows.
  expert_answer = 2,   ///< A shard's output rows, or an error. Payload: rows.
  kv_meta = 3,         ///< A KV handoff's tokens and parameters. Payload: tokens, stop ids,
                       ///< then the first token's log-probabilities as (token, logprob) pairs.
  kv_data = 4,         ///< A KV handoff's blocks. Payload: the blocks, float32.
  kv_answer = 5,       ///< Whether the decode worker took the sequence. No payload.
  weights_call = 6,    ///< A shard asks a peer shard for an expert's weights. No payload.
  weights_answer = 7,  ///< The weights (gate_up then down, file dtype), or an error.
};

/// Rows for the expert shard `target` (an actor id on the receiving node).
struct expert_call_header {
  uint64_t correlation = 0;
  uint64_t target = 0;
  uint64_t step = 0;
  uint64_t epoch = 0;
  int32_t layer = 0;
  int32_t rows = 0;
  int32_t cols = 0;
  uint32_t caller = 0;  ///< The calling worker's actor id (its low bits): steps count per worker.
};

/// The outcome of a call: ok with rows (expert answers), or an error message.
struct answer_header {
  uint64_t correlation = 0;
  uint64_t step = 0;
  int32_t ok = 0;
  int32_t layer = 0;
  int32_t rows = 0;
  int32_t cols = 0;
  char message[192] = {};

  void set_message(const std::string& text) {
    std::strncpy(message, text.c_str(), sizeof message - 1);
  }
  /// The message as sent; a peer's message need not end in a NUL, so it is read to the array's end
  /// at most.
  std::string message_text() const {
    return std::string(message, strnlen(message, sizeof message));
  }
};

/// Asks the expert shard `target` (an actor id on the receiving node) for an expert's weights.
struct weights_call_header {
  uint64_t correlation = 0;
  uint64_t target = 0;
  int32_t layer = 0;
  int32_t expert = 0;
};

/// An expert's weights (the payload) or why the shard could not give them.
struct weights_answer_header {
  uint64_t correlation = 0;
  uint64_t bytes = 0;
  int32_t ok = 0;
  int32_t layer = 0;
  int32_t expert = 0;
  int32_t hidden = 0;
  int32_t inter = 0;
  int32_t type = 0;  ///< gpu::dtype
  char message[192] = {};

  void set_message(const std::string& text) {
    std::strncpy(message, text.c_str(), sizeof message - 1);
  }
  /// The message as sent; a peer's message need not end in a NUL, so it is read to the array's end
  /// at most.
  std::string message_text() const {
    return std::string(message, strnlen(message, sizeof message));
  }
};

/// Everything of a KV handoff but its tokens (in this message's payload) and blocks (kv_data).
struct kv_meta_header {
  uint64_t correlation = 0;
  uint64_t target = 0;
  uint64_t request = 0;
  uint64_t seed = 0;
  uint64_t kv_floats = 0;
  uint32_t attempt = 0;
  int32_t block_tokens = 0;
  int32_t tokens = 0;
  int32_t stop_ids = 0;
  int32_t cached_tokens = 0;
  int32_t max_tokens = 0;
  int32_t draw_offset = 0;
  int32_t top_k = 0;
  float temperature = 0;
  float top_p = 1;
  int32_t top_logprobs = -1;  ///< generation_params::top_logprobs
  /// (token, bias) pairs after the stop ids: sampling_params::logit_bias.
  int32_t bias_pairs = 0;
  /// (token, logprob) pairs after those: the chosen token's, then the likeliest ones.
  int32_t logprob_pairs = 0;
  int32_t min_tokens = 0;
  float presence_penalty = 0;
  float frequency_penalty = 0;
  float repetition_penalty = 1;
  int32_t prompt_logprobs = -1;  ///< generation_params::prompt_logprobs
  /// Prompt positions whose log-probabilities follow the pairs above, each as
  /// 1 + max(prompt_logprobs, 0) (token, logprob) pairs: the prompt's token, then the likeliest.
  int32_t prompt_positions = 0;
};

/// Pairs a kv_data message with its kv_meta.
struct kv_data_header {
  uint64_t correlation = 0;
};

template <class T>
transport::byte_view as_bytes(const T& header) {
  static_assert(std::is_trivially_copyable<T>::value, "wire headers are plain data");
  return {&header, sizeof header};
}

/// The header at the front of `bytes`, if it is long enough.
template <class T>
std::optional<T> read(transport::byte_view bytes) {
  static_assert(std::is_trivially_copyable<T>::value, "wire headers are plain data");
  if (bytes.size() < sizeof(T)) return std::nullopt;
  T out;
  std::memcpy(&out, bytes.data(), sizeof out);
  return out;
}

}  // namespace brigade::cluster::wire
