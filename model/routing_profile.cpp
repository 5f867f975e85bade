#include "model/routing_profile.hpp"

#include <string>

#include "model/kv_layout.hpp"
#include "model/step_batch.hpp"
#include "model/transformer.hpp"
#include "model/workspace.hpp"

namespace brigade::model {

result<std::vector<std::vector<int64_t>>> profile_routing(const loaded_model& m, gpu::backend& dev,
                                                          const std::vector<int32_t>& prompt) {
  const model_config& c = m.config;
  if (!m.experts) return error(errc::invalid_argument, "the model was loaded without its experts");
  if (prompt.empty()) return error(errc::invalid_argument, "the prompt has no tokens");
  if (static_cast<int>(prompt.size()) > c.max_positions) {
    return error(errc::invalid_argument, "the prompt has " + std::to_string(prompt.size()) +
                                             " tokens; the context is " +
                                             std::to_string(c.max_positions));
  }
  for (int32_t t : prompt) {
    if (t < 0 || t >= c.vocab_size) {
      return error(errc::invalid_argument,
                   "token id " + std::to_string(t) + " is outside the vocabulary");
    }
  }
  constexpr int block_tokens = 16;
  const int tokens = static_cast<int>(prompt.size());
  const gpu::kv_layout layout =
      kv_layout_for(c, (tokens + block_tokens - 1) / block_tokens, block_tokens);
  auto kv = dev.make_kv(layout);
  std::vector<int32_t> blocks(static_cast<size_t>(layout.blocks));
  for (int i = 0; i < layout.blocks; ++i)
    blocks[static_cast<size_t>(i)] = i;
  step_batch b;
  b.add_sequence(prompt.data(), tokens, 0, blocks.data(), layout.blocks, 0);
  workspace ws(c, dev, tokens);
  const transformer& t = *m.forward;
  std::vector<std::vector<int64_t>> counts;
  routing r;
  t.embed(b, ws);
  for (int l = 0; l < c.num_layers; ++l) {
    t.attention(l, b, *kv, ws);
    if (!c.is_moe_layer(l)) {
      t.dense_mlp(l, b, ws);
      continue;
    }
    t.route(l, b, ws, r);
    std::vector<int64_t>& layer = counts.emplace_back(static_cast<size_t>(c.num_experts), 0);
    for (int32_t e : r.experts)
      ++layer[static_cast<size_t>(e)];
    run_local_experts(t, *m.experts, l, r, ws);
    t.combine(l, b, ws, r);
  }
  return counts;
}

}  // namespace brigade::model
