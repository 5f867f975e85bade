// Choosing the next token from logits: greedy, temperature, top-k, top-p, with a seed.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace brigade::model {

struct sampling_params {
  float temperature = 0.0f;  ///< 0 means greedy.
  int top_k = 0;             ///< 0 means no limit.
  float top_p = 1.0f;        ///< 1 means no nucleus cut.
  uint64_t seed = 0;
};

/// The distribution `params` draws from: (token, probability) in descending probability order
/// (ties to the lower id), after temperature, top-k and top-p. Greedy gives one token with 1.
std::vector<std::pair<int32_t, double>> sampling_distribution(const float* logits, int vocab,
                                                              const sampling_params& params);

/// The next token. The random draw depends only on (seed, draw_index) — use the index of the
/// token being generated — so batching, re-dispatch and topology never change a sample.
int32_t sample(const float* logits, int vocab, const sampling_params& params, uint64_t draw_index);

/// A uniform number in [0, 1) that is a pure function of (seed, index).
double uniform_draw(uint64_t seed, uint64_t index);

/// Index of the largest logit, ties to the lowest index.
int32_t argmax(const float* logits, int vocab);

}  // namespace brigade::model
