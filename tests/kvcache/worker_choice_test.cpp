#include "kvcache/worker_choice.hpp"

#include <catch2/catch.hpp>

using namespace brigade::kvcache;

TEST_CASE("policies parse by name", "[kvcache][routing]") {
  CHECK(*parse_choice_policy("cache_aware") == choice_policy::cache_aware);
  CHECK(*parse_choice_policy("round_robin") == choice_policy::round_robin);
  CHECK(*parse_choice_policy("pooled") == choice_policy::pooled);
  auto bad = parse_choice_policy("random");
  REQUIRE_FALSE(bad);
  CHECK(bad.err().message.find("round_robin, cache_aware or pooled") != std::string::npos);
}

TEST_CASE("round robin cycles through the workers", "[kvcache][routing]") {
  worker_chooser p(choice_policy::round_robin);
  std::vector<worker_load> w(3);
  w[1].cached_tokens = 1000;
  std::vector<std::size_t> picks;
  for (int i = 0; i < 6; ++i)
    picks.push_back(p.choose(1000, w));
  CHECK(picks == std::vector<std::size_t>{0, 1, 2, 0, 1, 2});
}

TEST_CASE("cache_aware weighs uncached tokens against queued work", "[kvcache][routing]") {
  worker_chooser p(choice_policy::cache_aware, 0.05);
  std::vector<worker_load> w(3);
  for (auto& x : w)
    x.computed_tokens = 100'000;
  // Equal queues: the worker holding most of the prompt wins.
  w[2].cached_tokens = 4096;
  CHECK(p.choose(5000, w) == 2);
  // Its queue now exceeds what its cache saves (4096 tokens): another worker is faster.
  w[2].queued_tokens = 5000;
  CHECK(p.choose(5000, w) == 0);
  w[0].queued_tokens = 2000;
  w[1].queued_tokens = 500;
  CHECK(p.choose(5000, w) == 1);
}

TEST_CASE("cache_aware's balance guard caps a hot worker's load", "[kvcache][routing]") {
  worker_chooser p(choice_policy::cache_aware, 0.05);
  std::vector<worker_load> w(4);
  for (auto& x : w)
    x.computed_tokens = 100'000;
  w[0].cached_tokens = 9000;
  // 1000 more tokens keep worker 0 within 5% of the mean: the cache wins.
  CHECK(p.choose(10'000, w) == 0);
  // Already 10% above the others, it may not take more uncached work however well it is cached.
  w[0].computed_tokens = 110'000;
  CHECK(p.choose(10'000, w) == 1);
  // A prompt it holds entirely adds no load, so the guard lets it stay.
  CHECK(p.choose(9000, w) == 0);
}

TEST_CASE("cache_aware sends work to the least loaded worker when none is eligible",
          "[kvcache][routing]") {
  worker_chooser p(choice_policy::cache_aware, 0.0);
  std::vector<worker_load> w(3);
  w[0].computed_tokens = 30;
  w[1].computed_tokens = 10;
  w[2].computed_tokens = 20;
  CHECK(p.choose(1000, w) == 1);
}

TEST_CASE("pooled places by queued work alone", "[kvcache][routing]") {
  worker_chooser p(choice_policy::pooled, 0.05);
  std::vector<worker_load> w(3);
  for (auto& x : w) {
    x.cached_tokens = 2048;
    x.computed_tokens = 50'000;
  }
  w[0].queued_tokens = 300;
  w[1].queued_tokens = 100;
  w[2].queued_tokens = 200;
  CHECK(p.choose(4096, w) == 1);
}
