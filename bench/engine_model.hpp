// The benchmark model of `bench engine` and `bench speculation`: a random 100M-parameter
// qwen3_moe checkpoint (64 experts, top-4, bf16), written once into the work directory.
#pragma once

#include <string>

#include "common/result.hpp"
#include "model/model_writer.hpp"

namespace brigade::bench {

model::model_spec engine_model_spec();

/// The model's directory under `work_dir`, writing the checkpoint there first if it is missing.
result<std::string> ensure_engine_model(const std::string& work_dir);

}  // namespace brigade::bench
