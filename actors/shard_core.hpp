// What an expert shard serves from, shared between the shard actor and the workers of its own
// process: the slots of every layout epoch it holds and its load accounting, behind one lock.
//
// A worker on another node sends a layer's rows to the shard as a message (expert_request) and
// the shard computes them. A worker of the same process does not: a message and its reply woke
// two threads per layer (worker -> shard -> worker), which at batch 1 cost three times the
// step's arithmetic (bench serve --overhead-only). It takes the weights of its rows' slots from
// the core (take_rows: the same checks and the same load accounting as a message) and computes
// them itself on its device's pool, every local shard's rows in one grouped hand-off, as the
// single-process engine does (actors/local_experts.hpp). The shard actor keeps what only it
// does: preparing, releasing and exporting epochs, and serving calls from other nodes.
//
// Writers of `epochs` are the shard actor's handlers; they and every reader from another thread
// hold `mutex`. A dead shard's core refuses its rows (`alive`), exactly as a dead actor refuses
// a message, so a worker fails the layer and waits for the supervisor's new shard set.
#pragma once

#include <caf/fwd.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "actors/expert_shard.hpp"
#include "common/result.hpp"
#include "gpu/backend.hpp"
#include "model/weights.hpp"

namespace brigade::actors {

struct held_slot {
  int32_t expert = 0;
  std::shared_ptr<const model::ffn_weights> weights;
};

using slot_map = std::map<std::pair<int32_t, int32_t>, held_slot>;  // (layer, slot)

/// The rows of one request that go through one slot's expert.
struct slot_rows {
  std::shared_ptr<const model::ffn_weights> weights;
  int32_t expert = 0;
  std::vector<int32_t> rows;  ///< Indices into the request's rows, ascending.
};

/// What a request names besides its rows' data.
struct rows_request {
  uint64_t step = 0;
  uint64_t caller = 0;
  uint64_t epoch = 0;
  int32_t layer = 0;
  const std::vector<int32_t>* slots = nullptr;  ///< Physical slot of each row.
};

/// Load samples a request completed, to go to `sink` under the shard's name.
struct due_samples {
  load_sink_actor sink;
  std::vector<load_sample> samples;
};

struct shard_core {
  std::shared_ptr<const model_context> ctx;
  std::string name;
  int32_t index = 0;
  int64_t sample_interval_steps = 1000;
  /// The number of its first load sample (expert_shard_config::first_window).
  uint64_t first_window = 0;

  mutable std::mutex mutex;
  bool alive = true;
  load_sink_actor load_sink;
  std::map<uint64_t, slot_map> epochs;  ///< The layouts this shard can serve.
  // Load sampling: steps are counted per calling worker from the step numbers it sends (keyed
  // by the sender and the caller it names: calls from other nodes share one sender).
  std::map<std::pair<caf::strong_actor_ptr, uint64_t>, uint64_t> last_step;
  int64_t steps = 0;
  uint64_t window = 0;
  std::vector<std::vector<int64_t>> tokens_per_expert;  ///< [layer][expert], this window
  int64_t requests = 0;
  int64_t rows = 0;
  double last_ms = 0.0;

  /// Checks a request against the epoch it names, counts its steps and its rows' load, and
  /// returns its rows grouped by slot (ascending), each with its expert's weights. Samples of
  /// windows it closed go to `due`. Fails when the shard is dead, does not hold the epoch or a
  /// slot, or holds experts of different widths in the layer.
  result<std::vector<slot_rows>> take_rows(const rows_request& req,
                                           const caf::strong_actor_ptr& sender, due_samples& due);
  /// A computed request's time, for the shard's status.
  void finished(double ms);
};

/// Scratch activations for expert FFNs on one device.
struct ffn_scratch {
  gpu::activation in, out, gate_up, inter;
  void ensure(gpu::backend& dev, const model::model_config& c, int rows);
};

/// Runs `groups` (of the rows of `input`, [rows, hidden]) through their experts on `dev` in one
/// grouped hand-off, writing each row's output to the same row of `output`.
void run_slot_rows(gpu::backend& dev, ffn_scratch& scratch, const model::model_config& c,
                   const std::vector<slot_rows>& groups, const float* input, float* output);

/// The cores of the shards alive in this process, by their actors' control blocks. Not by
/// actor address: addresses compare by actor id and node, and two actor systems in one process
/// (two topologies side by side, as a bench runs them) number their actors alike under one node.
class local_shard_cores {
 public:
  /// Keeps a weak reference: the shard's state owns the core.
  static void add(const caf::actor_control_block* shard, const std::shared_ptr<shard_core>& core);
  /// Marks the core dead and forgets it.
  static void remove(const caf::actor_control_block* shard);
  /// The core of a shard of this process, or null (another node's, or gone).
  static std::shared_ptr<shard_core> find(const caf::actor_control_block* shard);
};

}  // namespace brigade::actors
