// Message payloads shared by several roles, with the inspect overloads CAF needs to copy them
// into messages and, across nodes, to serialise them.
#pragma once

#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/finish_rules.hpp"
#include "model/logprobs.hpp"
#include "model/sampler.hpp"
#include "model/speculation.hpp"

namespace brigade::model {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, token_bias& x) {
  return f(caf::meta::type_name("token_bias"), x.token, x.bias);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sampling_params& x) {
  return f(caf::meta::type_name("sampling_params"), x.temperature, x.top_k, x.top_p, x.seed,
           x.presence_penalty, x.frequency_penalty, x.repetition_penalty, x.logit_bias,
           x.min_tokens);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, speculation_options& x) {
  return f(caf::meta::type_name("speculation_options"), x.max_draft, x.draft, x.draft_model,
           x.draft_attention_window, x.max_ngram, x.min_ngram, x.min_trust, x.lookback_tokens,
           x.adaptive, x.disable_above_batch, x.measured_gate);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, token_logprob& x) {
  return f(caf::meta::type_name("token_logprob"), x.token, x.logprob);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, position_logprobs& x) {
  return f(caf::meta::type_name("position_logprobs"), x.chosen, x.top);
}

}  // namespace brigade::model

namespace brigade::actors {

/// What every role's status starts with; each role's protocol header adds its own figures
/// (decode_status, router_status, ...), typed until the HTTP edge writes them as JSON.
struct role_status {
  std::string name;           ///< "decode-0"
  std::string role;           ///< "decode"
  int32_t queue_depth = 0;    ///< Work waiting to start.
  int32_t in_flight = 0;      ///< Work started and not finished.
  double last_step_ms = 0.0;  ///< Duration of the most recent step.
  int64_t steps = 0;          ///< Steps run since spawn.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, role_status& x) {
  return f(caf::meta::type_name("role_status"), x.name, x.role, x.queue_depth, x.in_flight,
           x.last_step_ms, x.steps);
}

/// Rows of float32 activations, row-major.
struct tensor_rows {
  int32_t rows = 0;
  int32_t cols = 0;
  std::vector<float> data;  ///< rows * cols values.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor_rows& x) {
  return f(caf::meta::type_name("tensor_rows"), x.rows, x.cols, x.data);
}

/// Float32 values shared without copying: KV blocks on their way from a prefill worker to a
/// decode worker. Across nodes they travel over the data plane (UCX) straight from and into
/// these buffers, never through CAF's serialiser.
class shared_floats {
 public:
  shared_floats() = default;
  /// Takes ownership of `values`.
  static shared_floats adopt(std::vector<float>&& values) {
    auto owner = std::make_shared<std::vector<float>>(std::move(values));
    shared_floats s;
    s.size_ = owner->size();
    s.data_ = std::shared_ptr<const float>(owner, owner->data());
    return s;
  }
  /// Wraps memory kept alive by `owner` (e.g. a received transport buffer).
  static shared_floats alias(std::shared_ptr<const void> owner, const float* data, size_t size) {
    shared_floats s;
    s.data_ = std::shared_ptr<const float>(std::move(owner), data);
    s.size_ = size;
    return s;
  }
  const float* data() const { return data_.get(); }
  size_t size() const { return size_; }
  /// The owner, for aliasing transport buffers onto the same allocation.
  const std::shared_ptr<const float>& owner() const { return data_; }

 private:
  std::shared_ptr<const float> data_;
  size_t size_ = 0;
};

/// What a generation needs besides its tokens: how to sample and when to stop.
struct generation_params {
  model::sampling_params sampling;
  int32_t max_tokens = 16;        ///< Tokens still to generate.
  int32_t draw_offset = 0;        ///< Index of the next token in the whole generation.
  std::vector<int32_t> stop_ids;  ///< Generation ends after producing one of these.
  /// Log-probabilities with each token: -1 none; 0 the chosen token's; n also the n likeliest.
  int32_t top_logprobs = -1;
  /// Log-probabilities of the prompt's tokens after the first, under the model's raw
  /// distribution: -1 none; n also the n likeliest. Only a first attempt asks (draw_offset 0).
  int32_t prompt_logprobs = -1;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generation_params& x) {
  return f(caf::meta::type_name("generation_params"), x.sampling, x.max_tokens, x.draw_offset,
           x.stop_ids, x.top_logprobs, x.prompt_logprobs);
}

/// Tokens a decode worker produced for one request, in order.
struct token_update {
  uint64_t request = 0;
  uint32_t attempt = 0;     ///< Dispatch attempt; stale attempts are ignored.
  int32_t first_index = 0;  ///< Index of tokens[0] in the whole generation.
  std::vector<int32_t> tokens;
  model::finish_reason finished = model::finish_reason::none;  ///< none while it runs
  int32_t cached_tokens = 0;  ///< Prompt tokens served from the prefix cache.
  /// One per token when the request asked for them (generation_params::top_logprobs).
  std::vector<model::position_logprobs> logprobs;
  /// With the first token, when generation_params::prompt_logprobs asked: one per prompt token
  /// after the first.
  std::vector<model::position_logprobs> prompt_logprobs;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, token_update& x) {
  return f(caf::meta::type_name("token_update"), x.request, x.attempt, x.first_index, x.tokens,
           x.finished, x.cached_tokens, x.logprobs, x.prompt_logprobs);
}

/// A worker could not finish a request; the router re-dispatches it or fails it.
struct job_failed {
  uint64_t request = 0;
  uint32_t attempt = 0;
  std::string reason;
  bool retryable = true;  ///< False when retrying cannot help (e.g. the prompt is too long).
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_failed& x) {
  return f(caf::meta::type_name("job_failed"), x.request, x.attempt, x.reason, x.retryable);
}

/// Registers the payloads above (and the standard containers messages carry) with an actor
/// system's config.
void register_payload_types(caf::actor_system_config& cfg);

}  // namespace brigade::actors
