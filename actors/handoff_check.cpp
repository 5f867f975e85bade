#include "actors/handoff_check.hpp"

#include <cmath>
#include <string>

#include "actors/step_resources.hpp"

namespace brigade::actors {
namespace {

error refuse(const std::string& what) {
  return error(errc::invalid_argument, "KV handoff refused: " + what);
}

}  // namespace

status check_handoff(const kv_handoff& h, const model::model_config& config, int block_tokens) {
  const size_t context = h.tokens.size();
  if (context == 0) return refuse("it holds no tokens");
  if (context > static_cast<size_t>(config.max_positions)) {
    return refuse(std::to_string(context) + " tokens, past the model's context of " +
                  std::to_string(config.max_positions));
  }
  for (size_t i = 0; i < context; ++i) {
    if (h.tokens[i] < 0 || h.tokens[i] >= config.vocab_size) {
      return refuse("token " + std::to_string(h.tokens[i]) + " at position " + std::to_string(i) +
                    " is outside the vocabulary of " + std::to_string(config.vocab_size));
    }
  }
  if (h.block_tokens != block_tokens) {
    return refuse("KV blocks of " + std::to_string(h.block_tokens) + " tokens; this worker uses " +
                  std::to_string(block_tokens));
  }
  const size_t blocks =
      static_cast<size_t>(blocks_for(static_cast<int>(context) - 1, block_tokens));
  const size_t block_floats = static_cast<size_t>(block_tokens) *
                              static_cast<size_t>(config.num_kv_heads) *
                              static_cast<size_t>(config.head_dim);
  const size_t expected = blocks * static_cast<size_t>(config.num_layers) * 2 * block_floats;
  if (h.kv.size() != expected) {
    return refuse(std::to_string(h.kv.size()) + " KV values for " + std::to_string(context) +
                  " tokens, which need " + std::to_string(expected));
  }
  const generation_params& p = h.params;
  if (p.max_tokens < 1) return refuse("max_tokens " + std::to_string(p.max_tokens) + " < 1");
  if (p.draw_offset < 0) return refuse("draw_offset " + std::to_string(p.draw_offset) + " < 0");
  if (h.cached_tokens < 0 || static_cast<size_t>(h.cached_tokens) > context) {
    return refuse("cached_tokens " + std::to_string(h.cached_tokens) + " for " +
                  std::to_string(context) + " tokens");
  }
  const model::sampling_params& s = p.sampling;
  if (!std::isfinite(s.temperature) || s.temperature < 0) {
    return refuse("temperature " + std::to_string(s.temperature) + " is not a number >= 0");
  }
  if (!std::isfinite(s.top_p) || s.top_p <= 0 || s.top_p > 1) {
    return refuse("top_p " + std::to_string(s.top_p) + " is not in (0, 1]");
  }
  if (s.top_k < 0) return refuse("top_k " + std::to_string(s.top_k) + " < 0");
  return ok_status();
}

}  // namespace brigade::actors
