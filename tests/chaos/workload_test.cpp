// A chaos run's requests: drawn from the seed, fitting the model, sharing prefixes where asked.
#include <catch2/catch.hpp>

#include <fstream>

#include "chaos/workload.hpp"
#include "support/temp_dir.hpp"

using namespace brigade;
using namespace brigade::chaos;

TEST_CASE("generated requests: the same seed gives the same, within vocabulary and context",
          "[chaos]") {
  workload_spec w;
  w.requests = 40;
  w.min_prompt_tokens = 5;
  w.max_prompt_tokens = 30;
  w.shared_prefix_tokens = 8;
  w.max_tokens = 100;
  w.draw = workload_spec::sampling::mixed;
  w.stream = workload_spec::streaming::mixed;
  auto a = make_requests(w, 500, 64, 3, {});
  auto b = make_requests(w, 500, 64, 3, {});
  auto c = make_requests(w, 500, 64, 4, {});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(c.ok());
  REQUIRE(a->size() == 40);
  int sampled = 0, streamed = 0;
  for (size_t i = 0; i < a->size(); ++i) {
    const request_spec& r = (*a)[i];
    CHECK(r.prompt == (*b)[i].prompt);
    CHECK(r.seed == (*b)[i].seed);
    CHECK(r.prompt.size() + static_cast<size_t>(r.max_tokens) <= 62);
    CHECK(std::equal(r.prompt.begin(), r.prompt.begin() + 8, (*a)[0].prompt.begin()));
    for (int32_t id : r.prompt) {
      CHECK(id >= 0);
      CHECK(id < 500);
    }
    sampled += r.temperature > 0 ? 1 : 0;
    streamed += r.stream ? 1 : 0;
  }
  CHECK(sampled > 5);
  CHECK(sampled < 35);
  CHECK(streamed > 5);
  CHECK(streamed < 35);
  CHECK((*a)[3].prompt != (*c)[3].prompt);
}

TEST_CASE("an open-loop workload arrives in increasing times at about its rate", "[chaos]") {
  workload_spec w;
  w.requests = 200;
  w.rate_per_s = 50;
  auto r = make_requests(w, 2048, 2048, 1, {});
  REQUIRE(r.ok());
  for (size_t i = 1; i < r->size(); ++i)
    CHECK((*r)[i].arrival_ms >= (*r)[i - 1].arrival_ms);
  CHECK(r->back().arrival_ms > 2000);
  CHECK(r->back().arrival_ms < 8000);
}

TEST_CASE("prompt files hold token lists or text, and a bad line is named", "[chaos]") {
  testing::temp_dir dir("chaos-prompts");
  const std::string path = dir.path() + "/p.jsonl";
  std::ofstream(path) << "[5, 6, 7]\n\"hello\"\n";
  workload_spec w;
  w.prompts = workload_spec::source::file;
  w.path = path;
  w.requests = 3;
  auto r = make_requests(w, 1000, 512, 1,
                         [](const std::string& t) { return std::vector<int32_t>(t.size(), 42); });
  REQUIRE(r.ok());
  CHECK((*r)[0].prompt == std::vector<int32_t>{5, 6, 7});
  CHECK((*r)[1].prompt == std::vector<int32_t>(5, 42));
  CHECK((*r)[2].prompt == (*r)[0].prompt);
  std::ofstream(path) << "[5, 6]\n{\"x\": 1}\n";
  auto bad = make_requests(w, 1000, 512, 1, {});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.err().message, Catch::Contains("p.jsonl:2"));
}
