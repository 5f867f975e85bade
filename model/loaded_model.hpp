// A checkpoint loaded onto a backend: config, dense weights, experts and the forward pass.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "gpu/backend.hpp"
#include "model/checkpoint.hpp"
#include "model/config.hpp"
#include "model/transformer.hpp"
#include "model/weights.hpp"

namespace brigade::model {

struct loaded_model {
  /// The backend the model was loaded onto when the model owns it (a draft model's int8 CPU
  /// backend); null when the caller's backend outlives the model. First: destroyed last.
  std::shared_ptr<gpu::backend> own_device;
  std::string dir;
  model_config config;
  std::unique_ptr<checkpoint> ckpt;
  std::unique_ptr<dense_weights> dense;
  std::unique_ptr<expert_bank> experts;  ///< Every expert, or none for a decode-only worker.
  std::unique_ptr<transformer> forward;
  /// A draft's own attention window (its draft_settings.json, read by draft_model::load); 0: all
  /// positions.
  int attention_window = 0;

  /// Loads DIR onto `dev`. With load_experts false, expert FFNs are left to expert shards.
  /// `progress` receives (done, total) in loading units as layers and experts arrive.
  static result<std::unique_ptr<loaded_model>> load(const std::string& dir, gpu::backend& dev,
                                                    bool load_experts,
                                                    const load_progress& progress = {});
};

}  // namespace brigade::model
