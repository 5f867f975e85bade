// engine::cancel and engine::release: a server drops requests mid-flight and forgets finished
// ones, and neither may disturb the other sequences or leak KV blocks.
#include <catch2/catch.hpp>

#include "model/engine.hpp"
#include "model/model_writer.hpp"
#include "support/small_model_spec.hpp"
#include "support/temp_dir.hpp"

using namespace brigade;
using namespace brigade::model;

namespace {

struct small_model {
  testing::temp_dir dir{"engine-cancel"};
  std::unique_ptr<gpu::backend> dev = gpu::make_cpu_backend();
  std::unique_ptr<loaded_model> model;

  small_model() {
    REQUIRE(write_random_model(testing::small_model_spec(5), dir.path()).ok());
    auto m = loaded_model::load(dir.path(), *dev, true);
    REQUIRE(m.ok());
    model = std::move(m.value());
  }
};

std::vector<int32_t> alone(small_model& m, const std::vector<int32_t>& prompt, int max_tokens) {
  engine eng(*m.model, *m.dev, {});
  request_options r;
  r.max_tokens = max_tokens;
  auto id = eng.submit(prompt, r);
  REQUIRE(id.ok());
  eng.run_until_idle();
  return eng.output(id.value());
}

}  // namespace

TEST_CASE("cancel drops waiting and running requests and frees their blocks", "[engine]") {
  small_model m;
  engine_options options;
  options.max_running = 2;
  options.kv_tokens = 256;
  engine eng(*m.model, *m.dev, options);
  const int free_at_start = eng.free_kv_blocks();
  request_options r;
  r.max_tokens = 20;
  const std::vector<int32_t> kept_prompt = {3, 1, 4, 1, 5, 9};
  auto kept = eng.submit(kept_prompt, r);
  auto running = eng.submit({2, 7, 1, 8}, r);
  auto waiting = eng.submit({1, 6, 1, 8}, r);  // max_running 2: this one waits.
  REQUIRE((kept.ok() && running.ok() && waiting.ok()));
  std::vector<token_event> events;
  for (int i = 0; i < 3; ++i)
    eng.step(events);
  REQUIRE(eng.running() == 2);
  REQUIRE(eng.waiting() == 1);

  REQUIRE(eng.cancel(waiting.value()).ok());
  REQUIRE(eng.cancel(running.value()).ok());
  REQUIRE(eng.waiting() == 0);
  REQUIRE(eng.running() == 1);
  REQUIRE(eng.cancel(running.value()).err().code == errc::not_found);
  REQUIRE(eng.cancel(12345).err().code == errc::not_found);

  eng.run_until_idle();
  // The survivor's tokens are those it would have produced alone.
  REQUIRE(eng.output(kept.value()) == alone(m, kept_prompt, 20));
  REQUIRE(eng.free_kv_blocks() == free_at_start);
}

TEST_CASE("release forgets a finished request only", "[engine]") {
  small_model m;
  engine eng(*m.model, *m.dev, {});
  request_options r;
  r.max_tokens = 3;
  auto id = eng.submit({4, 4, 2}, r);
  REQUIRE(id.ok());
  REQUIRE(eng.release(id.value()).err().code == errc::not_found);  // Not finished yet.
  eng.run_until_idle();
  REQUIRE(eng.output(id.value()).size() == 3);
  REQUIRE(eng.release(id.value()).ok());
  REQUIRE_THROWS_AS(eng.output(id.value()), std::out_of_range);
  REQUIRE(eng.release(id.value()).err().code == errc::not_found);
}
