#include "actors/shard_core.hpp"

#include <algorithm>

#include "model/transformer.hpp"

namespace brigade::actors {

result<std::vector<slot_rows>> shard_core::take_rows(const rows_request& req,
                                                     const caf::strong_actor_ptr& sender,
                                                     due_samples& due) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!alive) return error(errc::unavailable, name + " is down");
  // Counts each caller's steps and closes a window whenever enough have passed. A worker's step
  // numbers grow one at a time, with gaps where its steps routed nothing here; one request
  // advances the count by at most a window, so a wild step number (a peer's bug or forgery)
  // costs at most one early sample, never a flood of them or an overflow.
  const auto interval = static_cast<uint64_t>(std::max<int64_t>(1, sample_interval_steps));
  uint64_t& last = last_step[{sender, req.caller}];
  if (req.step > last) {
    const uint64_t advance = last == 0 ? 1 : req.step - last;
    steps += static_cast<int64_t>(std::min(advance, interval));
    last = req.step;
  }
  while (window < first_window + static_cast<uint64_t>(steps) / interval) {
    due.sink = load_sink;
    due.samples.push_back(load_sample{index, window, tokens_per_expert});
    for (auto& row : tokens_per_expert)
      std::fill(row.begin(), row.end(), 0);
    ++window;
  }
  auto epoch = epochs.find(req.epoch);
  if (epoch == epochs.end()) {
    return error(errc::not_found, name + " holds no layout of epoch " + std::to_string(req.epoch));
  }
  const std::vector<int32_t>& slots = *req.slots;
  std::map<int32_t, std::vector<int32_t>> by_slot;  // slot -> row indices, ascending
  for (size_t i = 0; i < slots.size(); ++i)
    by_slot[slots[i]].push_back(static_cast<int32_t>(i));
  std::vector<slot_rows> out;
  out.reserve(by_slot.size());
  for (auto& [slot, rows_of_slot] : by_slot) {
    auto it = epoch->second.find({req.layer, slot});
    if (it == epoch->second.end()) {
      return error(errc::not_found, name + " does not hold slot " + std::to_string(slot) +
                                        " of layer " + std::to_string(req.layer));
    }
    if (!out.empty() && out.front().weights->inter != it->second.weights->inter) {
      return error(errc::invalid_argument, name +
                                               " holds experts of different intermediate sizes "
                                               "in layer " +
                                               std::to_string(req.layer));
    }
    out.push_back({it->second.weights, it->second.expert, std::move(rows_of_slot)});
  }
  // A slot found means a layer and an expert of the model (a request of no rows names none).
  for (const slot_rows& g : out) {
    tokens_per_expert[static_cast<size_t>(req.layer)][static_cast<size_t>(g.expert)] +=
        static_cast<int64_t>(g.rows.size());
  }
  ++requests;
  rows += static_cast<int64_t>(slots.size());
  return out;
}

void shard_core::finished(double ms) {
  std::lock_guard<std::mutex> lock(mutex);
  last_ms = ms;
}

void ffn_scratch::ensure(gpu::backend& dev, const model::model_config& c, int rows) {
  if (in.capacity_rows() >= rows) return;
  const int capacity = std::max(rows, 2 * in.capacity_rows());
  in = dev.alloc(capacity, c.hidden_size);
  out = dev.alloc(capacity, c.hidden_size);
  gate_up = dev.alloc(capacity, 2 * c.expert_intermediate);
  inter = dev.alloc(capacity, c.expert_intermediate);
}

void run_slot_rows(gpu::backend& dev, ffn_scratch& scratch, const model::model_config& c,
                   const std::vector<slot_rows>& groups, const float* input, float* output) {
  // Every slot's rows one after another (`order`), so that the slots' matmuls go to the device
  // together (model::run_ffn_group).
  std::vector<model::ffn_part> parts;
  std::vector<int32_t> order;
  parts.reserve(groups.size());
  for (const slot_rows& g : groups) {
    parts.push_back({g.weights.get(), static_cast<int>(g.rows.size())});
    order.insert(order.end(), g.rows.begin(), g.rows.end());
  }
  const int n = static_cast<int>(order.size());
  if (n == 0) return;
  const int hidden = c.hidden_size;
  const size_t row_floats = static_cast<size_t>(hidden);
  scratch.ensure(dev, c, n);
  std::vector<float> staged(static_cast<size_t>(n) * row_floats);
  for (int r = 0; r < n; ++r) {
    std::copy_n(input + static_cast<size_t>(order[static_cast<size_t>(r)]) * row_floats, hidden,
                &staged[static_cast<size_t>(r) * row_floats]);
  }
  const int width = parts.front().weights->inter;
  dev.upload(staged.data(), scratch.in.first(n));
  model::run_ffn_group(dev, parts, scratch.in.first(n), scratch.out.first(n),
                       scratch.gate_up.first(n).cols_view(0, 2 * width),
                       scratch.inter.first(n).cols_view(0, width));
  dev.download(scratch.out.first(n), staged.data());
  for (int r = 0; r < n; ++r) {
    std::copy_n(&staged[static_cast<size_t>(r) * row_floats], hidden,
                output + static_cast<size_t>(order[static_cast<size_t>(r)]) * row_floats);
  }
}

namespace {

struct core_registry {
  std::mutex mutex;
  // Weak: the shard's state owns its core, and a core holds strong handles (the supervisor as
  // its load sink, the workers as callers), which a process-wide strong reference would keep
  // alive past their topology's shutdown.
  std::map<const caf::actor_control_block*, std::weak_ptr<shard_core>> cores;
};

core_registry& registry() {
  static core_registry r;
  return r;
}

}  // namespace

void local_shard_cores::add(const caf::actor_control_block* shard,
                            const std::shared_ptr<shard_core>& core) {
  core_registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.cores[shard] = core;
}

void local_shard_cores::remove(const caf::actor_control_block* shard) {
  core_registry& r = registry();
  std::shared_ptr<shard_core> core;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.cores.find(shard);
    if (it == r.cores.end()) return;
    core = it->second.lock();
    r.cores.erase(it);
  }
  if (!core) return;
  std::lock_guard<std::mutex> lock(core->mutex);
  core->alive = false;
}

std::shared_ptr<shard_core> local_shard_cores::find(const caf::actor_control_block* shard) {
  core_registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.cores.find(shard);
  return it == r.cores.end() ? nullptr : it->second.lock();
}

}  // namespace brigade::actors
