#include "eplb/replica_dispatch.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <vector>

using namespace brigade::eplb;

namespace {

// 2 shards x 3 slots for 4 experts; experts 0 and 1 have a replica on each shard:
// shard 0 holds 0 1 2, shard 1 holds 3 0 1.
layout two_shards() {
  auto l = layout::from_phy2log({1, 4, 2, 3}, {{0, 1, 2, 3, 0, 1}}, 0);
  REQUIRE(l.ok());
  return std::move(l.value());
}

std::vector<int> rows_per_shard(const layout& l, const std::vector<int32_t>& slots) {
  std::vector<int> rows(static_cast<size_t>(l.shards()), 0);
  for (int32_t s : slots)
    ++rows[static_cast<size_t>(l.shard_of(s))];
  return rows;
}

}  // namespace

TEST_CASE("every row goes to a replica of its own expert", "[eplb][replica_dispatch]") {
  const layout l = two_shards();
  replica_dispatch d;
  std::mt19937 rng(7);
  for (int step = 0; step < 50; ++step) {
    std::vector<int32_t> experts(static_cast<size_t>(1 + rng() % 12));
    for (auto& e : experts)
      e = static_cast<int32_t>(rng() % 4);
    std::vector<int32_t> slots(experts.size());
    d.assign(l, 0, experts.data(), static_cast<int>(experts.size()), slots.data());
    for (size_t i = 0; i < experts.size(); ++i)
      REQUIRE(l.logical(0, slots[i]) == experts[i]);
  }
}

TEST_CASE("replicated experts fill in around the rows that have one place to go",
          "[eplb][replica_dispatch]") {
  const layout l = two_shards();
  replica_dispatch d;
  // Four rows of expert 2 (shard 0 only) and four of expert 0 (either shard), expert 0's rows
  // first: an even split would give shard 0 six rows and shard 1 two.
  const std::vector<int32_t> experts{0, 0, 0, 0, 2, 2, 2, 2};
  std::vector<int32_t> slots(experts.size());
  d.assign(l, 0, experts.data(), 8, slots.data());
  CHECK(rows_per_shard(l, slots) == std::vector<int>{4, 4});
}

TEST_CASE("a batch of one alternates between replicas instead of always taking the first",
          "[eplb][replica_dispatch]") {
  const layout l = two_shards();
  replica_dispatch d;
  std::vector<int> rows{0, 0};
  for (int step = 0; step < 100; ++step) {
    const int32_t expert = 1;
    int32_t slot = -1;
    d.assign(l, 0, &expert, 1, &slot);
    ++rows[static_cast<size_t>(l.shard_of(slot))];
  }
  CHECK(rows == std::vector<int>{50, 50});
}

TEST_CASE("under a skew the layout was not planned for, the shards stay level",
          "[eplb][replica_dispatch]") {
  // Expert 3 (shard 1 only) turns hot: the replicated experts' rows move to shard 0.
  const layout l = two_shards();
  replica_dispatch d;
  std::mt19937 rng(3);
  std::discrete_distribution<int> pick({2.0, 2.0, 1.0, 3.0});
  std::vector<int> even{0, 0}, dispatched{0, 0};
  for (int step = 0; step < 400; ++step) {
    std::vector<int32_t> experts(4);
    for (auto& e : experts)
      e = pick(rng);
    std::vector<int32_t> slots(experts.size());
    d.assign(l, 0, experts.data(), 4, slots.data());
    for (size_t i = 0; i < experts.size(); ++i) {
      ++dispatched[static_cast<size_t>(l.shard_of(slots[i]))];
      const auto replicas = l.log2phy(0, experts[i]);
      ++even[static_cast<size_t>(l.shard_of(replicas[static_cast<int>(i) % replicas.size()]))];
    }
  }
  const auto ratio = [](const std::vector<int>& r) {
    return *std::max_element(r.begin(), r.end()) / ((r[0] + r[1]) / 2.0);
  };
  INFO("even split " << even[0] << "/" << even[1] << ", dispatched " << dispatched[0] << "/"
                     << dispatched[1]);
  CHECK(ratio(dispatched) < 1.01);
  CHECK(ratio(dispatched) < ratio(even));
}

TEST_CASE("the history forgets: old load does not starve a shard now", "[eplb][replica_dispatch]") {
  const layout l = two_shards();
  replica_dispatch d(4.0);
  // Shard 1 alone is loaded for a while (expert 3), then only replicated rows come.
  for (int step = 0; step < 40; ++step) {
    const std::vector<int32_t> hot{3, 3, 3, 3};
    std::vector<int32_t> slots(4);
    d.assign(l, 0, hot.data(), 4, slots.data());
  }
  std::vector<int> rows{0, 0};
  for (int step = 0; step < 60; ++step) {
    const std::vector<int32_t> replicated{0, 1};
    std::vector<int32_t> slots(2);
    d.assign(l, 0, replicated.data(), 2, slots.data());
    if (step >= 30) {
      for (int32_t s : slots)
        ++rows[static_cast<size_t>(l.shard_of(s))];
    }
  }
  // Thirty steps later (7.5 half-lives) the old load is gone and the rows split evenly.
  CHECK(rows[1] >= 28);
  CHECK(rows[0] >= 28);
  const auto recent = d.recent_load(0);
  REQUIRE(recent.size() == 2);
  CHECK(recent[0] == Approx(recent[1]).margin(1.5));
}
