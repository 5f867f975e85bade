// One greedy request through the engine on a named CPU kernel path: what the kernel-path tests
// compare across paths (the same checkpoint, a fresh backend each time).
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/cpu/cpu_backend.hpp"
#include "model/engine.hpp"

namespace brigade::testing {

struct engine_run {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  ///< every step's logits, kept
};

inline engine_run run_engine_on_path(const std::string& checkpoint, gpu::cpu::kernel_path path,
                                     const std::vector<int32_t>& prompt, int max_tokens = 12) {
  auto dev = gpu::cpu::make_backend(nullptr, path);
  auto m = model::loaded_model::load(checkpoint, *dev, true);
  REQUIRE(m.ok());
  model::engine eng(*m.value(), *dev, model::engine_options{});
  model::request_options req;
  req.max_tokens = max_tokens;
  req.keep_logits = true;
  const int64_t id = eng.submit(prompt, req).value();
  eng.run_until_idle();
  return {eng.output(id), eng.kept_logits(id)};
}

}  // namespace brigade::testing
