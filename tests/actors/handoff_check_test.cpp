// A decode worker refuses a KV handoff whose fields it cannot trust, naming the field, and a
// prefill worker a job; well-formed ones pass. Both may come from peers on other nodes.
#include "actors/handoff_check.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>

using namespace brigade;
using namespace brigade::actors;

namespace {

model::model_config small_config() {
  model::model_config c;
  c.vocab_size = 100;
  c.num_layers = 2;
  c.num_kv_heads = 2;
  c.head_dim = 4;
  c.max_positions = 64;
  return c;
}

constexpr int block_tokens = 4;

// Nine tokens: eight in the KV (two blocks), the ninth just sampled.
kv_handoff valid_handoff() {
  kv_handoff h;
  h.tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  h.block_tokens = block_tokens;
  h.kv = shared_floats::adopt(std::vector<float>(2 * 2 * 2 * block_tokens * 2 * 4, 0.5f));
  h.params.max_tokens = 5;
  h.params.sampling.temperature = 0.7f;
  h.params.sampling.top_p = 0.9f;
  h.cached_tokens = 4;
  return h;
}

std::string refusal(const std::function<void(kv_handoff&)>& spoil) {
  kv_handoff h = valid_handoff();
  spoil(h);
  const status s = check_handoff(h, small_config(), block_tokens);
  REQUIRE_FALSE(s.ok());
  CHECK(s.err().code == errc::invalid_argument);
  return s.err().message;
}

}  // namespace

TEST_CASE("a well-formed KV handoff passes", "[actors][handoff]") {
  CHECK(check_handoff(valid_handoff(), small_config(), block_tokens).ok());
  kv_handoff one = valid_handoff();
  one.tokens = {7};  // a one-token prompt has no KV yet
  one.kv = {};
  one.cached_tokens = 0;
  CHECK(check_handoff(one, small_config(), block_tokens).ok());
}

TEST_CASE("each untrustworthy field of a KV handoff is refused by name", "[actors][handoff]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK_THAT(refusal([](kv_handoff& h) { h.tokens.clear(); }), Catch::Contains("no tokens"));
  CHECK_THAT(refusal([](kv_handoff& h) { h.tokens.assign(65, 1); }),
             Catch::Contains("65 tokens, past the model's context of 64"));
  CHECK_THAT(refusal([](kv_handoff& h) { h.tokens[3] = 100; }),
             Catch::Contains("token 100 at position 3 is outside the vocabulary of 100"));
  CHECK_THAT(refusal([](kv_handoff& h) { h.tokens[0] = -1; }), Catch::Contains("token -1"));
  CHECK_THAT(refusal([](kv_handoff& h) { h.block_tokens = 8; }),
             Catch::Contains("KV blocks of 8 tokens; this worker uses 4"));
  CHECK_THAT(refusal([](kv_handoff& h) { h.tokens.push_back(10); }),  // needs a third block
             Catch::Contains("256 KV values for 10 tokens, which need 384"));
  CHECK_THAT(refusal([](kv_handoff& h) { h.params.max_tokens = 0; }),
             Catch::Contains("max_tokens 0"));
  CHECK_THAT(refusal([](kv_handoff& h) { h.params.draw_offset = -2; }),
             Catch::Contains("draw_offset -2"));
  CHECK_THAT(refusal([](kv_handoff& h) { h.cached_tokens = 10; }),
             Catch::Contains("cached_tokens 10 for 9 tokens"));
  CHECK_THAT(refusal([&](kv_handoff& h) { h.params.sampling.temperature = nan; }),
             Catch::Contains("temperature"));
  CHECK_THAT(refusal([](kv_handoff& h) { h.params.sampling.temperature = -1; }),
             Catch::Contains("temperature"));
  CHECK_THAT(refusal([](kv_handoff& h) { h.params.sampling.top_p = 0; }), Catch::Contains("top_p"));
  CHECK_THAT(refusal([&](kv_handoff& h) { h.params.sampling.top_p = nan; }),
             Catch::Contains("top_p"));
  CHECK_THAT(refusal([](kv_handoff& h) { h.params.sampling.top_k = -3; }),
             Catch::Contains("top_k -3"));
}

namespace {

prefill_job valid_job() {
  prefill_job job;
  job.tokens = {1, 2, 3, 4, 5};
  job.params.max_tokens = 3;
  job.params.sampling.temperature = 0.7f;
  return job;
}

std::string job_refusal(const std::function<void(prefill_job&)>& spoil, const caf::actor& some) {
  prefill_job job = valid_job();
  job.decode = caf::actor_cast<decode_worker_actor>(some);  // the check only asks for one
  spoil(job);
  const status s = check_prefill_job(job, small_config());
  REQUIRE_FALSE(s.ok());
  CHECK(s.err().code == errc::invalid_argument);
  return s.err().message;
}

}  // namespace

TEST_CASE("a prefill job is checked like a handoff before its tokens index anything",
          "[actors][handoff]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto some = sys.spawn([]() -> caf::behavior { return {[](int) {}}; });
  prefill_job job = valid_job();
  job.decode = caf::actor_cast<decode_worker_actor>(some);
  CHECK(check_prefill_job(job, small_config()).ok());
  CHECK_THAT(job_refusal([](prefill_job& j) { j.tokens.clear(); }, some),
             Catch::Contains("prefill job refused: it holds no tokens"));
  CHECK_THAT(job_refusal([](prefill_job& j) { j.tokens.assign(65, 1); }, some),
             Catch::Contains("65 tokens, past the model's context of 64"));
  CHECK_THAT(job_refusal([](prefill_job& j) { j.tokens[4] = 1 << 30; }, some),
             Catch::Contains("outside the vocabulary"));
  CHECK_THAT(job_refusal([](prefill_job& j) { j.decode = decode_worker_actor{}; }, some),
             Catch::Contains("no decode worker"));
  CHECK_THAT(job_refusal([](prefill_job& j) { j.params.max_tokens = -5; }, some),
             Catch::Contains("max_tokens -5"));
  CHECK_THAT(job_refusal([](prefill_job& j) { j.params.sampling.top_p = 2; }, some),
             Catch::Contains("top_p"));
  caf::anon_send_exit(some, caf::exit_reason::user_shutdown);
}

TEST_CASE("an MLA model's KV handoff carries each cached row once", "[actors][handoff][mla]") {
  model::model_config c = small_config();
  c.num_kv_heads = 1;
  c.mla.kv_lora_rank = 6;
  c.mla.qk_rope_head_dim = 2;
  c.mla.qk_nope_head_dim = 4;
  c.mla.v_head_dim = 4;
  c.head_dim = c.mla.cache_dim();
  REQUIRE(c.kv_planes() == 1);
  kv_handoff h = valid_handoff();
  // Two blocks of four tokens, two layers, one row of 8 per token.
  h.kv = shared_floats::adopt(std::vector<float>(2 * 2 * block_tokens * 8, 0.5f));
  CHECK(check_handoff(h, c, block_tokens).ok());
  // Keys and values both, as a model without MLA sends them: refused.
  h.kv = shared_floats::adopt(std::vector<float>(2 * 2 * 2 * block_tokens * 8, 0.5f));
  const status s = check_handoff(h, c, block_tokens);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.err().message, Catch::Contains("256 KV values for 9 tokens, which need 128"));
}
