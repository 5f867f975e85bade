#include "bench/block_hash_timing.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "kvcache/block_hash.hpp"
#include "kvcache/hash_key.hpp"
#include "kvcache/legacy_hash.hpp"

namespace brigade::bench {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

block_hash_timing time_block_hashes(int block_tokens) {
  constexpr std::size_t blocks = 4096;
  constexpr int rounds = 9;
  const auto bt = static_cast<std::size_t>(block_tokens);
  std::mt19937 rng(5);
  std::vector<std::int32_t> tokens(blocks * bt);
  for (auto& t : tokens)
    t = static_cast<std::int32_t>(rng() % 150000);
  const kvcache::block_hasher hasher(kvcache::random_hash_key());
  std::vector<double> keyed, legacy;
  std::uint64_t sink = 0;  // keeps the work from being optimised away
  using clock = std::chrono::steady_clock;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = clock::now();
    const auto k = hasher.chain(tokens.data(), tokens.size(), bt);
    auto t1 = clock::now();
    const auto l = kvcache::legacy::chain(tokens.data(), tokens.size(), bt);
    auto t2 = clock::now();
    sink ^= k.back().lo ^ l.back().lo;
    keyed.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / blocks);
    legacy.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count() / blocks);
  }
  asm volatile("" : : "r"(sink));  // the hashes are used: keep them computed
  block_hash_timing out;
  out.block_tokens = block_tokens;
  out.keyed_ns_per_block = median(keyed);
  out.legacy_ns_per_block = median(legacy);
  return out;
}

nlohmann::json to_json(const block_hash_timing& t) {
  return {{"block_tokens", t.block_tokens},
          {"scheme", kvcache::block_hasher::scheme},
          {"ns_per_block", t.keyed_ns_per_block},
          {"legacy_scheme", "xxh3-64 (unkeyed)"},
          {"legacy_ns_per_block", t.legacy_ns_per_block},
          {"ratio", t.legacy_ns_per_block > 0 ? t.keyed_ns_per_block / t.legacy_ns_per_block : 0}};
}

}  // namespace brigade::bench
