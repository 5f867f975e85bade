// Checks that a data-plane message from a peer is what its header says, before anything is read
// from its payload. Sizes are computed in checked 64-bit arithmetic: a header with negative or huge
// counts must never wrap around to the payload's length and pass.
#pragma once

#include <cstddef>

#include "cluster/wire.hpp"
#include "common/result.hpp"

namespace brigade::cluster::wire {

/// An expert call carries `rows` slots (int32) and then rows x cols activations (float32).
status check(const expert_call_header& h, std::size_t payload_bytes);

/// An answer that says ok carries rows x cols floats (none for a KV answer, where both are 0).
status check(const answer_header& h, std::size_t payload_bytes);

/// A KV handoff's tokens and stop ids (int32 each) and its kv_floats floats of blocks.
status check(const kv_meta_header& h, std::size_t token_bytes, std::size_t block_bytes);

}  // namespace brigade::cluster::wire
