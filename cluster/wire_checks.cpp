#include "cluster/wire_checks.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "model/logprobs.hpp"
#include "model/sampler.hpp"

namespace brigade::cluster::wire {
namespace {

// count x element_bytes, or false when a count is negative or the product overflows.
bool bytes_of(std::int64_t count, std::uint64_t element_bytes, std::uint64_t& out) {
  if (count < 0) return false;
  return !__builtin_mul_overflow(static_cast<std::uint64_t>(count), element_bytes, &out);
}

// rows x cols x element_bytes, with the same checks.
bool bytes_of(std::int64_t rows, std::int64_t cols, std::uint64_t element_bytes,
              std::uint64_t& out) {
  std::uint64_t row_bytes = 0;
  if (!bytes_of(cols, element_bytes, row_bytes)) return false;
  return bytes_of(rows, row_bytes, out);
}

error mismatch(const std::string& what, std::size_t payload_bytes, const std::string& header) {
  return error(errc::bad_format, what + " arrived with " + std::to_string(payload_bytes) +
                                     " payload bytes, which do not match its header (" + header +
                                     ")");
}

std::string shape(std::int32_t rows, std::int32_t cols) {
  return "rows " + std::to_string(rows) + ", cols " + std::to_string(cols);
}

}  // namespace

status check(const expert_call_header& h, std::size_t payload_bytes) {
  std::uint64_t slots = 0, values = 0, total = 0;
  if (!bytes_of(h.rows, sizeof(std::int32_t), slots) ||
      !bytes_of(h.rows, h.cols, sizeof(float), values) ||
      __builtin_add_overflow(slots, values, &total) || total != payload_bytes) {
    return mismatch("an expert call", payload_bytes, shape(h.rows, h.cols));
  }
  return ok_status();
}

status check(const answer_header& h, std::size_t payload_bytes) {
  std::uint64_t values = 0;
  if (!h.ok) return ok_status();  // an error answer: only its message counts
  if (!bytes_of(h.rows, h.cols, sizeof(float), values) || values != payload_bytes) {
    return mismatch("an answer", payload_bytes, shape(h.rows, h.cols));
  }
  return ok_status();
}

status check(const kv_meta_header& h, std::size_t token_bytes, std::size_t block_bytes) {
  std::uint64_t tokens = 0, stops = 0, biases = 0, pairs = 0, ids = 0, blocks = 0, prompt = 0;
  if (!bytes_of(h.tokens, sizeof(std::int32_t), tokens) ||
      !bytes_of(h.stop_ids, sizeof(std::int32_t), stops) ||
      !bytes_of(h.bias_pairs, 2 * sizeof(std::int32_t), biases) ||
      !bytes_of(h.logprob_pairs, 2 * sizeof(std::int32_t), pairs) ||
      !bytes_of(h.prompt_positions, std::int64_t{1} + std::max(h.prompt_logprobs, 0),
                2 * sizeof(std::int32_t), prompt) ||
      __builtin_add_overflow(tokens, stops, &ids) || __builtin_add_overflow(ids, biases, &ids) ||
      __builtin_add_overflow(ids, pairs, &ids) || __builtin_add_overflow(ids, prompt, &ids) ||
      ids != token_bytes) {
    return mismatch("a KV handoff's token list", token_bytes,
                    "tokens " + std::to_string(h.tokens) + ", stop ids " +
                        std::to_string(h.stop_ids) + ", bias pairs " +
                        std::to_string(h.bias_pairs) + ", logprob pairs " +
                        std::to_string(h.logprob_pairs) + ", prompt positions " +
                        std::to_string(h.prompt_positions));
  }
  if (h.prompt_logprobs < -1 || h.prompt_logprobs > model::max_top_logprobs ||
      h.prompt_positions < 0 || h.prompt_positions > h.tokens) {
    return error(errc::invalid_argument, "a KV handoff carries prompt log-probabilities for " +
                                             std::to_string(h.prompt_positions) + " positions of " +
                                             std::to_string(h.tokens) +
                                             " tokens with prompt_logprobs " +
                                             std::to_string(h.prompt_logprobs));
  }
  if (h.bias_pairs > model::max_logit_biases) {
    return error(errc::invalid_argument, "a KV handoff carries " + std::to_string(h.bias_pairs) +
                                             " logit biases; at most " +
                                             std::to_string(model::max_logit_biases));
  }
  // At most the chosen token and the likeliest ones a request may ask for.
  if (h.logprob_pairs > 1 + model::max_top_logprobs) {
    return error(errc::invalid_argument, "a KV handoff carries " + std::to_string(h.logprob_pairs) +
                                             " logprob pairs; at most " +
                                             std::to_string(1 + model::max_top_logprobs));
  }
  if (__builtin_mul_overflow(h.kv_floats, std::uint64_t{sizeof(float)}, &blocks) ||
      blocks != block_bytes) {
    return mismatch("a KV handoff's blocks", block_bytes,
                    "kv_floats " + std::to_string(h.kv_floats));
  }
  return ok_status();
}

}  // namespace brigade::cluster::wire
