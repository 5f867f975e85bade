// What a prefill or decode worker needs to run model steps: KV storage with its block pool, a
// workspace and the step driver over them. No actor headers here.
#pragma once

#include <memory>

#include "actors/model_context.hpp"
#include "gpu/backend.hpp"
#include "kvcache/block_pool.hpp"
#include "model/step_driver.hpp"
#include "model/workspace.hpp"

namespace brigade::actors {

struct step_resources {
  std::unique_ptr<gpu::kv_storage> kv;
  std::unique_ptr<kvcache::block_pool> pool;
  std::unique_ptr<model::workspace> ws;
  std::unique_ptr<model::step_driver> driver;  ///< Refers to *kv and *ws.
};

/// Blocks of `block_tokens` that hold `tokens` tokens.
inline int blocks_for(int tokens, int block_tokens) {
  return (tokens + block_tokens - 1) / block_tokens;
}

/// KV for `kv_tokens` tokens in blocks of `block_tokens`, and a workspace for steps of at most
/// `max_rows` tokens, on the context's device; KV elements of type `element` (f32 or bf16).
step_resources make_step_resources(const model_context& ctx, int kv_tokens, int block_tokens,
                                   int max_rows, gpu::dtype element);

}  // namespace brigade::actors
