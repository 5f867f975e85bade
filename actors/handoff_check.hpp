// What a decode worker checks in a KV handoff before it reads any of it. The handoff may come from
// a prefill worker on another node, over the data plane: every count, id and parameter in it is
// the peer's word, and a wrong one must be refused, not read past a buffer or fed to the sampler.
#pragma once

#include "actors/decode_worker.hpp"
#include "common/result.hpp"
#include "model/config.hpp"

namespace brigade::actors {

/// OK when a worker with `block_tokens`-token KV blocks serving `config` can take `h`; otherwise an
/// invalid_argument error naming the first field at fault.
status check_handoff(const kv_handoff& h, const model::model_config& config, int block_tokens);

}  // namespace brigade::actors
