// Builds attention batches over paged KV for the CUDA tests: sequences with block tables, and
// steps that feed some of each sequence's positions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gpu/backend.hpp"

namespace brigade::gpu::test {

/// Positions [start, start + count) of sequence `seq`.
struct token_range {
  int seq;
  int start;
  int count;
};

/// The host arrays of one attention_batch.
struct paged_step {
  std::vector<int32_t> positions;
  std::vector<int32_t> token_seq;
  std::vector<int32_t> block_offsets{0};
  std::vector<int32_t> block_ids;

  /// A step over `ranges`; step sequence i is ranges[i], whose block table is tables[seq].
  static paged_step make(const std::vector<std::vector<int32_t>>& tables,
                         const std::vector<token_range>& ranges) {
    paged_step s;
    for (size_t i = 0; i < ranges.size(); ++i) {
      const token_range& r = ranges[i];
      for (int p = r.start; p < r.start + r.count; ++p) {
        s.positions.push_back(p);
        s.token_seq.push_back(static_cast<int32_t>(i));
      }
      const std::vector<int32_t>& table = tables[static_cast<size_t>(r.seq)];
      s.block_ids.insert(s.block_ids.end(), table.begin(), table.end());
      s.block_offsets.push_back(static_cast<int32_t>(s.block_ids.size()));
    }
    return s;
  }

  attention_batch view() const {
    attention_batch b;
    b.positions = positions.data();
    b.token_seq = token_seq.data();
    b.block_offsets = block_offsets.data();
    b.block_ids = block_ids.data();
    b.tokens = static_cast<int>(positions.size());
    b.seqs = static_cast<int>(block_offsets.size()) - 1;
    return b;
  }
};

/// Block tables for sequences of `lengths` tokens, drawn from a shuffled pool of `blocks`
/// (or in order when rng is null).
inline std::vector<std::vector<int32_t>> make_tables(const std::vector<int>& lengths,
                                                     int block_tokens, int blocks,
                                                     std::mt19937* rng) {
  std::vector<int32_t> pool(static_cast<size_t>(blocks));
  std::iota(pool.begin(), pool.end(), 0);
  if (rng) std::shuffle(pool.begin(), pool.end(), *rng);
  std::vector<std::vector<int32_t>> tables;
  size_t next = 0;
  for (int len : lengths) {
    const int needed = (len + block_tokens - 1) / block_tokens;
    tables.emplace_back(pool.begin() + static_cast<ptrdiff_t>(next),
                        pool.begin() + static_cast<ptrdiff_t>(next) + needed);
    next += static_cast<size_t>(needed);
  }
  return tables;
}

/// n floats drawn uniformly from [-1, 1), the same for the same seed.
inline std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> out(n);
  for (float& x : out)
    x = u(rng);
  return out;
}

}  // namespace brigade::gpu::test
