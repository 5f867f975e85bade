// What workers check in the work they are handed before they read any of it: a decode worker's KV
// handoff, a prefill worker's job. Either may come from another node (the handoff over the data
// plane, the job over CAF's middleman): every count, id and parameter in it is the peer's word, and
// a wrong one must be refused, not read past a buffer or fed to the sampler.
#pragma once

#include "actors/decode_worker.hpp"
#include "actors/prefill_worker.hpp"
#include "common/result.hpp"
#include "model/config.hpp"

namespace brigade::actors {

/// OK when a worker with `block_tokens`-token KV blocks serving `config` can take `h`; otherwise an
/// invalid_argument error naming the first field at fault.
status check_handoff(const kv_handoff& h, const model::model_config& config, int block_tokens);

/// OK when a prefill worker serving `config` can take `job`: tokens inside the context and the
/// vocabulary, a decode worker to hand over to, sampling parameters a sampler takes.
status check_prefill_job(const prefill_job& job, const model::model_config& config);

}  // namespace brigade::actors
