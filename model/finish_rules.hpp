// When a generation ends: the one set of rules the engine, the prefill worker (a generation that
// ends with its first token) and the decode worker all apply.
#pragma once

#include <cstdint>
#include <vector>

namespace brigade::model {

/// Why a generation ended. The values are also the wire form (actors' token_update).
enum class finish_reason : int32_t { none = 0, stop = 1, length = 2, context = 3 };

const char* to_string(finish_reason r);

/// What ends a generation that just produced `token`, in this order: the token is one of
/// `stop_ids`; it was the `produced`-th of at most `max_tokens`; the sequence, now
/// `sequence_tokens` long (prompt and output), fills a context of `max_positions`.
finish_reason finish_after(int32_t token, const std::vector<int32_t>& stop_ids, int produced,
                           int max_tokens, int sequence_tokens, int max_positions);

}  // namespace brigade::model
