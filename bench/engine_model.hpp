// The benchmark models of `bench engine` and `bench speculation`: random ~100M-parameter
// qwen3_moe checkpoints (bf16), written once into the work directory and loaded from there.
// Two shapes: "default" (64 experts, top-4, hidden 768: the model every figure in the docs
// uses) and "wide" (16 experts, top-2, hidden 1024, expert width 512: fewer, bigger experts and
// twice the active parameters per token).
#pragma once

#include <memory>
#include <string>

#include "common/result.hpp"
#include "gpu/backend.hpp"
#include "model/loaded_model.hpp"
#include "model/model_writer.hpp"

namespace brigade::bench {

/// The default shape.
model::model_spec engine_model_spec();
/// The shape named `shape` ("default" or "wide"); invalid_argument names the known ones.
result<model::model_spec> engine_model_spec(const std::string& shape);
/// Where the checkpoint of `shape` lives under `work_dir`.
std::string engine_model_dir(const std::string& work_dir, const std::string& shape);

/// The model of `shape` from `work_dir` onto `dev`, writing the checkpoint there first if it is
/// missing.
result<std::unique_ptr<model::loaded_model>> load_engine_model(
    const std::string& work_dir, gpu::backend& dev, const std::string& shape = "default");

}  // namespace brigade::bench
