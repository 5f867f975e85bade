// Draft models for speculative decoding tests. Random weights make a random draft agree with its
// target about one time in the vocabulary, which tests nothing but rejections; a draft cut out of
// its target agrees often, so that drafts are both kept and rejected:
//
//   target: qwen3_moe, layer 0 dense (mlp_only_layers), layer 1 MoE
//   draft:  qwen3 (dense) with the target's embeddings, layer 0 and head: the target without its
//           MoE layer
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_writer.hpp"
#include "model/safetensors.hpp"
#include "support/small_model_spec.hpp"

namespace brigade::testing {

/// The small MoE model with a dense first layer, which a draft can share.
inline model::model_spec target_with_dense_layer(uint64_t seed) {
  model::model_spec spec = small_model_spec(seed);
  spec.mlp_only_layers = {0};
  return spec;
}

/// Writes into `draft_dir` a dense qwen3 draft of `target` (written in `target_dir`): every
/// tensor the target has under the same name and shape is the target's.
inline void write_derived_draft(const model::model_spec& target, const std::string& target_dir,
                                const std::string& draft_dir) {
  model::model_spec spec = target;
  spec.family = "qwen3";
  spec.layers = 1;
  spec.mlp_only_layers.clear();
  REQUIRE(model::write_random_model(spec, draft_dir).ok());
  const std::string weights = draft_dir + "/model.safetensors";
  std::vector<model::tensor_to_write> tensors;
  {
    auto from = model::safetensors_file::open(target_dir + "/model.safetensors");
    auto own = model::safetensors_file::open(weights);
    REQUIRE(from.ok());
    REQUIRE(own.ok());
    for (const auto& [name, view] : own.value()->tensors()) {
      const model::tensor_view* shared = from.value()->find(name);
      const bool same = shared && shared->shape == view.shape && shared->type == view.type;
      const model::tensor_view& src = same ? *shared : view;
      tensors.push_back({name, src.type, src.shape, {src.data, src.data + src.bytes}});
    }
  }
  REQUIRE(model::write_safetensors(weights, tensors, {{"format", "pt"}}).ok());
}

}  // namespace brigade::testing
