// One expert's FFN weights as bytes: the form in which they move from the shard that holds them
// to the shard that needs them during a migration. In one process the bytes are shared, across
// nodes they travel over the data plane (UCX), never through CAF's serialiser.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/result.hpp"
#include "gpu/backend.hpp"
#include "model/config.hpp"
#include "model/weights.hpp"

namespace brigade::actors {

struct expert_weights {
  int32_t layer = 0;
  int32_t expert = 0;
  int32_t hidden = 0;
  int32_t inter = 0;
  gpu::dtype type = gpu::dtype::f32;
  /// The gate and up rows ([2 * inter, hidden]), then down ([hidden, inter]), row-major,
  /// elements of `type`.
  std::shared_ptr<const std::byte> bytes;
  size_t size = 0;
  /// Set instead of the bytes when the asking shard shares the source's process, and so its
  /// device: the new slot shares the weights already in memory, nothing is copied.
  std::shared_ptr<const model::ffn_weights> shared;

  /// The byte count the shape and type call for.
  size_t expected_size() const;
};

/// Copies a shard's weights for (layer, expert) out of the backend.
expert_weights export_expert(gpu::backend& dev, const model::ffn_weights& w, int layer, int expert);

/// Builds backend weights from received bytes, after checking they are the expert that was
/// asked for and fit the model; the error names what does not match.
result<model::ffn_weights> import_expert(gpu::backend& dev, const model::model_config& config,
                                         const expert_weights& in, int layer, int expert);

}  // namespace brigade::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::actors::expert_weights)
