// The benchmark model of `bench engine` and `bench speculation`: a random 100M-parameter
// qwen3_moe checkpoint (64 experts, top-4, bf16), written once into the work directory and loaded
// from there.
#pragma once

#include <memory>
#include <string>

#include "common/result.hpp"
#include "gpu/backend.hpp"
#include "model/loaded_model.hpp"
#include "model/model_writer.hpp"

namespace brigade::bench {

model::model_spec engine_model_spec();

/// The model from `work_dir` onto `dev`, writing the checkpoint there first if it is missing.
result<std::unique_ptr<model::loaded_model>> load_engine_model(const std::string& work_dir,
                                                               gpu::backend& dev);

}  // namespace brigade::bench
