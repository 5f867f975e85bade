#include "kvcache/trace_replay.hpp"

#include <catch2/catch.hpp>
#include <random>
#include <sstream>

using namespace brigade::kvcache;
using brigade::errc;
using brigade::result;

namespace {

trace_request make_request(std::int64_t t_ms, std::int64_t tokens, std::vector<std::int64_t> ids) {
  return trace_request{t_ms, tokens, 10, std::move(ids)};
}

/// Four requests whose hits are worked out by hand in the tests below (512-token blocks):
///   r1 t=0s  1124 tokens ids [1,2,3]: full blocks b1 b2 (the 100-token tail is not cacheable)
///   r2 t=1s  1024 tokens ids [1,2]:   b1 b2
///   r3 t=2s  1536 tokens ids [1,4,5]: b1 c4 c5
///   r4 t=3s  1024 tokens ids [1,2]:   b1 b2
std::vector<trace_request> hand_trace() {
  return {make_request(0, 1124, {1, 2, 3}), make_request(1000, 1024, {1, 2}),
          make_request(2000, 1536, {1, 4, 5}), make_request(3000, 1024, {1, 2})};
}

constexpr double total_prompt = 1124 + 1024 + 1536 + 1024;

result<replay_report> run(const std::vector<trace_request>& trace, replay_options o) {
  return replay(prepare_replay(trace, o.block_size), o);
}

}  // namespace

TEST_CASE("replay hit rates match a hand count", "[kvcache][replay]") {
  replay_options o;
  o.block_size = 512;

  // Unbounded: r2 hits b1 b2, r3 hits b1, r4 hits b1 b2.
  const double ideal = (1024 + 512 + 1024) / total_prompt;
  CHECK(ideal_hit_rate(prepare_replay(hand_trace(), 512), 512) == Approx(ideal));

  SECTION("one replica holding three blocks") {
    // r3 needs room for c5: b2 (released before b1) goes. r4 then finds only b1, and evicts c5.
    o.replicas = 1;
    o.cache_tokens_per_replica = 3 * 512;
    auto r = run(hand_trace(), o);
    REQUIRE(r);
    CHECK(r->hit_rate == Approx((1024 + 512 + 512) / total_prompt));
    CHECK(r->ideal_hit_rate == Approx(ideal));
    CHECK(r->replicas[0].evicted_blocks == 2);
    CHECK(r->max_over_mean_load == Approx(1.0));
  }
  SECTION("round robin over two replicas") {
    // r1 -> 0, r2 -> 1 (a miss), r3 -> 0 (hits b1), r4 -> 1 (hits b1 b2 that r2 left).
    o.replicas = 2;
    o.policy = choice_policy::round_robin;
    auto r = run(hand_trace(), o);
    REQUIRE(r);
    CHECK(r->hit_rate == Approx((512 + 1024) / total_prompt));
    CHECK(r->replicas[0].computed_tokens == 1124 + 1024);
    CHECK(r->replicas[1].computed_tokens == 1024);
    CHECK(r->max_over_mean_load == Approx(2148.0 / ((2148.0 + 1024.0) / 2)));
  }
  SECTION("pooled over two replicas of three blocks each") {
    // Six pooled blocks hold all five distinct ones: as good as unbounded.
    o.replicas = 2;
    o.cache_tokens_per_replica = 3 * 512;
    o.policy = choice_policy::pooled;
    auto r = run(hand_trace(), o);
    REQUIRE(r);
    CHECK(r->hit_rate == Approx(ideal));
  }
  SECTION("smaller blocks split the trace's blocks") {
    // With 256-token blocks r1's tail still holds no full 256-token block past b2 (100 tokens).
    o.replicas = 1;
    o.block_size = 256;
    auto r = run(hand_trace(), o);
    REQUIRE(r);
    CHECK(r->hit_rate == Approx(ideal));
  }
}

TEST_CASE("replay rejects bad options", "[kvcache][replay]") {
  replay_options o;
  o.replicas = 0;
  CHECK(run(hand_trace(), o).err().code == errc::invalid_argument);
  o.replicas = 2;
  o.prefill_tokens_per_s = 0;
  CHECK(run(hand_trace(), o).err().code == errc::invalid_argument);
}

namespace {

/// Conversations that grow turn by turn after a shared system prompt of `shared_blocks` blocks;
/// every request starts with the same block(s). Arrivals are spread so queues stay short.
std::vector<trace_request> conversations(int count, int turns, int shared_blocks,
                                         std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::pair<std::int64_t, trace_request>> arrivals;
  std::int64_t next_id = 1000;
  for (int c = 0; c < count; ++c) {
    std::vector<std::int64_t> ids;
    for (int s = 0; s < shared_blocks; ++s)
      ids.push_back(s);
    std::int64_t t = std::uniform_int_distribution<std::int64_t>(0, 600'000)(rng);
    for (int turn = 0; turn < turns; ++turn) {
      const int grow = std::uniform_int_distribution<int>(1, 4)(rng);
      for (int g = 0; g < grow; ++g)
        ids.push_back(next_id++);
      // The prompt ends 200 tokens into its last block; that partial block is never reused.
      const auto tokens = static_cast<std::int64_t>(ids.size() - 1) * 512 + 200;
      arrivals.push_back({t, make_request(t, tokens, ids)});
      ids.pop_back();  // the next turn rewrites the partial block
      ids.push_back(next_id++);
      t += std::uniform_int_distribution<std::int64_t>(5'000, 60'000)(rng);
    }
  }
  std::stable_sort(arrivals.begin(), arrivals.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<trace_request> trace;
  for (auto& a : arrivals)
    trace.push_back(std::move(a.second));
  return trace;
}

}  // namespace

TEST_CASE("cache_aware keeps hits high and load even when every request shares its first block",
          "[kvcache][replay]") {
  for (int shared : {1, 8}) {
    INFO("shared prefix of " << shared << " blocks");
    const auto trace = conversations(300, 6, shared, 77);
    replay_options o;
    o.replicas = 4;
    o.cache_tokens_per_replica = 100'000'000;
    o.prefill_tokens_per_s = 20'000;
    o.policy = choice_policy::cache_aware;
    auto aware = run(trace, o);
    o.policy = choice_policy::round_robin;
    auto rr = run(trace, o);
    REQUIRE(aware);
    REQUIRE(rr);
    CHECK(aware->max_over_mean_load <= 1.1);
    CHECK(aware->hit_rate >= 0.9 * aware->ideal_hit_rate);
    CHECK(aware->hit_rate > rr->hit_rate + 0.1);
  }
}

TEST_CASE("the keyed block hash replays exactly as the old unkeyed one did", "[kvcache][replay]") {
  // Hashes change names, never structure: with no collision under either scheme, every policy
  // finds the same hits, evicts the same blocks and places the same load (a small cache forces
  // evictions).
  const auto trace = conversations(400, 6, 2, 91);
  for (auto policy :
       {choice_policy::cache_aware, choice_policy::round_robin, choice_policy::pooled}) {
    replay_options o;
    o.replicas = 3;
    o.cache_tokens_per_replica = 40 * 512;
    o.policy = policy;
    auto keyed = replay(prepare_replay(trace, o.block_size, replay_hashing::keyed), o);
    auto legacy = replay(prepare_replay(trace, o.block_size, replay_hashing::legacy_xxh3_64), o);
    REQUIRE(keyed);
    REQUIRE(legacy);
    INFO("policy " << static_cast<int>(policy));
    CHECK(keyed->hit_tokens == legacy->hit_tokens);
    CHECK(keyed->hit_rate == legacy->hit_rate);
    CHECK(keyed->ideal_hit_rate == legacy->ideal_hit_rate);
    REQUIRE(keyed->replicas.size() == legacy->replicas.size());
    for (std::size_t r = 0; r < keyed->replicas.size(); ++r) {
      CHECK(keyed->replicas[r].hit_tokens == legacy->replicas[r].hit_tokens);
      CHECK(keyed->replicas[r].evicted_blocks == legacy->replicas[r].evicted_blocks);
      CHECK(keyed->replicas[r].computed_tokens == legacy->replicas[r].computed_tokens);
    }
    CHECK(keyed->hit_rate > 0.1);
  }
}

TEST_CASE("malformed trace lines give errors naming the line", "[kvcache][trace]") {
  const std::string good = R"({"timestamp": 0, "input_length": 600, "output_length": 5, )"
                           R"("hash_ids": [0, 1]})";
  auto parse = [&](const std::string& second_line) {
    std::istringstream in(good + "\n\n" + second_line + "\n");
    return parse_mooncake_trace(in, "t.jsonl");
  };
  auto expect_error = [&](const std::string& line, const std::string& words) {
    auto r = parse(line);
    REQUIRE_FALSE(r);
    INFO(r.err().message);
    CHECK(r.err().code == errc::bad_format);
    CHECK(r.err().message.rfind("t.jsonl:3: ", 0) == 0);
    CHECK(r.err().message.find(words) != std::string::npos);
  };
  REQUIRE(parse(good));
  CHECK(parse(good)->size() == 2);
  expect_error("{not json", "not valid JSON");
  expect_error(R"({"timestamp": 1e999, "input_length": 600, "output_length": 5})",
               "not valid JSON");
  expect_error("[1, 2]", "expected a JSON object");
  expect_error(R"({"timestamp": 1, "input_length": 600, "output_length": 5})", "hash_ids");
  expect_error(R"({"input_length": 600, "output_length": 5, "hash_ids": [0, 1]})",
               "missing field 'timestamp'");
  expect_error(R"({"timestamp": 1, "input_length": 1025, "output_length": 5, "hash_ids": [0, 1]})",
               "needs 3 hash_ids");
  expect_error(R"({"timestamp": 1, "input_length": 600, "output_length": 5, "hash_ids": [0, -1]})",
               "non-negative");
  expect_error(R"({"timestamp": -1, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]})",
               "'timestamp' must be an integer >= 0");
  expect_error(R"({"timestamp": 1, "input_length": "600", "output_length": 5, "hash_ids": [0]})",
               "'input_length'");

  std::istringstream unsorted(good.substr(0, 14) + "9" + good.substr(15) + "\n" + good + "\n");
  auto r = parse_mooncake_trace(unsorted, "u.jsonl");
  REQUIRE_FALSE(r);
  CHECK(r.err().message.rfind("u.jsonl:2: ", 0) == 0);
  CHECK(r.err().message.find("sorted by arrival time") != std::string::npos);

  CHECK(load_mooncake_trace("/nonexistent/trace.jsonl").err().code == errc::not_found);
}

TEST_CASE("synthesized prompts depend only on the block ids", "[kvcache][trace]") {
  const auto a = synthesize_prompt(make_request(0, 1024, {7, 8}));
  const auto b = synthesize_prompt(make_request(0, 700, {7, 9}));
  REQUIRE(a.size() == 1024);
  REQUIRE(b.size() == 700);
  CHECK(std::equal(a.begin(), a.begin() + 512, b.begin()));
  CHECK_FALSE(std::equal(a.begin() + 512, a.begin() + 700, b.begin() + 512));
  // A partial last block is the start of the same id's full block.
  const auto c = synthesize_prompt(make_request(0, 1024, {7, 9}));
  CHECK(std::equal(b.begin(), b.end(), c.begin()));
}
