// Request traces in the Mooncake format (FAST'25 release; /work/shared/traces/README.md): one JSON
// object per line with the arrival time, prompt and completion lengths, and one hash id per
// 512-token block of the prompt, equal ids at equal positions meaning equal prefixes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace brigade::kvcache {

/// The trace's own block granularity: hash_ids[j] names prompt tokens [512 j, 512 (j + 1)).
inline constexpr std::size_t mooncake_block_tokens = 512;

/// One line of a trace.
struct trace_request {
  /// Arrival time in milliseconds from the start of the trace.
  std::int64_t timestamp_ms = 0;
  /// Prompt length in tokens.
  std::int64_t input_tokens = 0;
  /// Completion length in tokens.
  std::int64_t output_tokens = 0;
  /// One id per 512-token block of the prompt, the last one possibly partial.
  std::vector<std::int64_t> hash_ids;
};

/// Parses a whole trace. Blank lines are skipped; any other malformed line is an error naming
/// `source` and the line number. Requests must come in arrival order.
result<std::vector<trace_request>> parse_mooncake_trace(std::istream& in,
                                                        const std::string& source);

/// Reads and parses the trace file at `path`.
result<std::vector<trace_request>> load_mooncake_trace(const std::string& path);

/// The prompt tokens of `request`, made up since traces carry no text: block j's tokens are a
/// seeded function of hash_ids[j] alone, so requests with equal ids at equal positions get equal
/// tokens, and the last block is cut to the prompt length.
std::vector<std::int32_t> synthesize_prompt(const trace_request& request);

}  // namespace brigade::kvcache
