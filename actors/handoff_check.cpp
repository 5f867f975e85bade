#include "actors/handoff_check.hpp"

#include <cmath>
#include <functional>
#include <string>

#include "actors/step_resources.hpp"

namespace brigade::actors {
namespace {

status check_tokens(const std::vector<int32_t>& tokens, const model::model_config& config,
                    const std::function<error(const std::string&)>& refuse) {
  if (tokens.empty()) return refuse("it holds no tokens");
  if (tokens.size() > static_cast<size_t>(config.max_positions)) {
    return refuse(std::to_string(tokens.size()) + " tokens, past the model's context of " +
                  std::to_string(config.max_positions));
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= config.vocab_size) {
      return refuse("token " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                    " is outside the vocabulary of " + std::to_string(config.vocab_size));
    }
  }
  return ok_status();
}

status check_params(const generation_params& p, int vocab,
                    const std::function<error(const std::string&)>& refuse) {
  if (p.max_tokens < 1) return refuse("max_tokens " + std::to_string(p.max_tokens) + " < 1");
  if (p.draw_offset < 0) return refuse("draw_offset " + std::to_string(p.draw_offset) + " < 0");
  if (status ok = model::check_sampling(p.sampling, vocab); !ok) return refuse(ok.err().message);
  if (p.top_logprobs < -1 || p.top_logprobs > model::max_top_logprobs) {
    return refuse("top_logprobs " + std::to_string(p.top_logprobs) + " is not in [-1, " +
                  std::to_string(model::max_top_logprobs) + "]");
  }
  if (p.prompt_logprobs < -1 || p.prompt_logprobs > model::max_top_logprobs) {
    return refuse("prompt_logprobs " + std::to_string(p.prompt_logprobs) + " is not in [-1, " +
                  std::to_string(model::max_top_logprobs) + "]");
  }
  if (p.prompt_logprobs >= 0 && p.draw_offset != 0) {
    return refuse("prompt_logprobs asked by a retry (draw_offset " + std::to_string(p.draw_offset) +
                  ")");
  }
  return ok_status();
}

}  // namespace

status check_handoff(const kv_handoff& h, const model::model_config& config, int block_tokens) {
  const auto refuse = [](const std::string& what) {
    return error(errc::invalid_argument, "KV handoff refused: " + what);
  };
  if (status ok = check_tokens(h.tokens, config, refuse); !ok) return ok;
  const size_t context = h.tokens.size();
  if (h.block_tokens != block_tokens) {
    return refuse("KV blocks of " + std::to_string(h.block_tokens) + " tokens; this worker uses " +
                  std::to_string(block_tokens));
  }
  const size_t blocks =
      static_cast<size_t>(blocks_for(static_cast<int>(context) - 1, block_tokens));
  const size_t block_floats = static_cast<size_t>(block_tokens) *
                              static_cast<size_t>(config.num_kv_heads) *
                              static_cast<size_t>(config.head_dim);
  const size_t expected = blocks * static_cast<size_t>(config.num_layers) *
                          static_cast<size_t>(config.kv_planes()) * block_floats;
  if (h.kv.size() != expected) {
    return refuse(std::to_string(h.kv.size()) + " KV values for " + std::to_string(context) +
                  " tokens, which need " + std::to_string(expected));
  }
  if (status ok = check_params(h.params, config.vocab_size, refuse); !ok) return ok;
  if (h.cached_tokens < 0 || static_cast<size_t>(h.cached_tokens) > context) {
    return refuse("cached_tokens " + std::to_string(h.cached_tokens) + " for " +
                  std::to_string(context) + " tokens");
  }
  // The sampled token's log-probabilities, as asked: one position, `top_logprobs` alternatives.
  const size_t positions = h.params.top_logprobs < 0 ? 0 : 1;
  if (h.logprobs.size() != positions ||
      (positions == 1 && (h.logprobs[0].top.size() != static_cast<size_t>(h.params.top_logprobs) ||
                          h.logprobs[0].chosen.token != h.tokens.back()))) {
    return refuse("log-probabilities that do not match top_logprobs " +
                  std::to_string(h.params.top_logprobs) + " and the sampled token");
  }
  // The prompt's: one per prompt token after the first, each naming that token.
  const size_t prompt_positions = h.params.prompt_logprobs < 0 ? 0 : context - 2;
  bool prompt_ok = h.prompt_logprobs.size() == prompt_positions;
  for (size_t i = 0; prompt_ok && i < h.prompt_logprobs.size(); ++i) {
    prompt_ok = h.prompt_logprobs[i].chosen.token == h.tokens[i + 1] &&
                h.prompt_logprobs[i].top.size() == static_cast<size_t>(h.params.prompt_logprobs);
  }
  if (!prompt_ok) {
    return refuse("prompt log-probabilities that do not match prompt_logprobs " +
                  std::to_string(h.params.prompt_logprobs) + " and the prompt");
  }
  return ok_status();
}

status check_prefill_job(const prefill_job& job, const model::model_config& config) {
  const auto refuse = [](const std::string& what) {
    return error(errc::invalid_argument, "prefill job refused: " + what);
  };
  if (status ok = check_tokens(job.tokens, config, refuse); !ok) return ok;
  if (!job.decode) return refuse("it names no decode worker");
  return check_params(job.params, config.vocab_size, refuse);
}

}  // namespace brigade::actors
