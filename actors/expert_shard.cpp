#include "actors/expert_shard.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>

#include "common/log.hpp"
#include "model/transformer.hpp"

namespace brigade::actors {
namespace {

struct held_slot {
  int32_t expert = 0;
  model::ffn_weights weights;
};

struct shard_state {
  std::shared_ptr<const model_context> ctx;
  expert_shard_config config;
  std::map<std::pair<int32_t, int32_t>, held_slot> slots;  // (layer, slot) -> weights
  std::vector<std::vector<int64_t>> tokens_per_expert;     // [layer][expert]
  // Grow-only device buffers for one group of rows.
  gpu::activation in, out, gate_up, inter;
  int64_t steps = 0;
  int64_t rows = 0;
  double last_ms = 0.0;
  static inline const char* name = "expert_shard";
};

using shard_pointer = expert_shard_actor::stateful_pointer<shard_state>;

void ensure_rows(shard_state& st, int rows) {
  if (st.in.capacity_rows() >= rows) return;
  const auto& c = st.ctx->config;
  const int capacity = std::max(rows, 2 * st.in.capacity_rows());
  st.in = st.ctx->dev->alloc(capacity, c.hidden_size);
  st.out = st.ctx->dev->alloc(capacity, c.hidden_size);
  st.gate_up = st.ctx->dev->alloc(capacity, 2 * c.expert_intermediate);
  st.inter = st.ctx->dev->alloc(capacity, c.expert_intermediate);
}

// Runs each slot's group of rows through its expert; rows keep their order in the reply.
result<expert_reply> compute(shard_state& st, const expert_request& req) {
  gpu::backend& dev = *st.ctx->dev;
  const int hidden = st.ctx->config.hidden_size;
  const int n = static_cast<int>(req.slots.size());
  if (req.input.rows != n || req.input.cols != hidden ||
      req.input.data.size() != static_cast<size_t>(n) * static_cast<size_t>(hidden)) {
    return error(errc::invalid_argument, "expert request rows do not match its slots");
  }
  expert_reply reply;
  reply.step = req.step;
  reply.layer = req.layer;
  reply.output.rows = n;
  reply.output.cols = hidden;
  reply.output.data.resize(req.input.data.size());
  std::map<int32_t, std::vector<int32_t>> groups;  // slot -> row indices, in row order
  for (int i = 0; i < n; ++i) groups[req.slots[static_cast<size_t>(i)]].push_back(i);
  ensure_rows(st, n);
  for (const auto& [slot, rows] : groups) {
    auto it = st.slots.find({req.layer, slot});
    if (it == st.slots.end()) {
      return error(errc::not_found, st.config.name + " does not hold slot " +
                                        std::to_string(slot) + " of layer " +
                                        std::to_string(req.layer));
    }
    const int m = static_cast<int>(rows.size());
    std::vector<float> staged(static_cast<size_t>(m) * static_cast<size_t>(hidden));
    for (int r = 0; r < m; ++r) {
      std::copy_n(&req.input.data[static_cast<size_t>(rows[static_cast<size_t>(r)]) * hidden],
                  hidden, &staged[static_cast<size_t>(r) * hidden]);
    }
    const int inter = it->second.weights.inter;
    dev.upload(staged.data(), st.in.first(m));
    model::run_ffn(dev, it->second.weights, st.in.first(m), st.out.first(m),
                   st.gate_up.first(m).cols_view(0, 2 * inter), st.inter.first(m).cols_view(0, inter));
    dev.download(st.out.first(m), staged.data());
    for (int r = 0; r < m; ++r) {
      std::copy_n(&staged[static_cast<size_t>(r) * hidden], hidden,
                  &reply.output.data[static_cast<size_t>(rows[static_cast<size_t>(r)]) * hidden]);
    }
    auto& counts = st.tokens_per_expert[static_cast<size_t>(req.layer)];
    counts[static_cast<size_t>(it->second.expert)] += m;
  }
  return reply;
}

expert_shard_actor::behavior_type shard_behavior(shard_pointer self,
                                                 std::shared_ptr<const model_context> ctx,
                                                 expert_shard_config config) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.config = std::move(config);
  const auto& c = st.ctx->config;
  st.tokens_per_expert.assign(static_cast<size_t>(c.num_layers),
                              std::vector<int64_t>(static_cast<size_t>(c.num_experts), 0));
  for (const auto& a : st.config.slots) {
    auto w = model::expert_bank::load_one(*st.ctx->ckpt, c, *st.ctx->dev, a.layer, a.expert);
    if (!w) {
      // The shard cannot serve: it stops, and the supervisor sees why.
      log::error(st.config.name, w.err().describe());
      self->quit(caf::make_error(caf::sec::runtime_error, w.err().message));
      break;
    }
    st.slots[{a.layer, a.slot}] = held_slot{a.expert, std::move(w.value())};
  }
  return {
      [=](expert_request& req) -> caf::result<expert_reply> {
        const auto start = std::chrono::steady_clock::now();
        auto reply = compute(self->state, req);
        if (!reply) return caf::make_error(caf::sec::invalid_argument, reply.err().message);
        auto& s = self->state;
        ++s.steps;
        s.rows += static_cast<int64_t>(req.slots.size());
        s.last_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                              start)
                        .count();
        return std::move(reply.value());
      },
      [=](status_atom) {
        const auto& s = self->state;
        role_status out;
        out.name = s.config.name;
        out.role = "expert_shard";
        out.last_step_ms = s.last_ms;
        out.steps = s.steps;
        out.detail = nlohmann::json{{"slots", s.slots.size()}, {"rows", s.rows}}.dump();
        return out;
      },
  };
}

}  // namespace

expert_shard_actor spawn_expert_shard(caf::actor_system& sys,
                                      std::shared_ptr<const model_context> ctx,
                                      expert_shard_config config) {
  return sys.spawn<caf::detached>(shard_behavior, std::move(ctx), std::move(config));
}

}  // namespace brigade::actors
