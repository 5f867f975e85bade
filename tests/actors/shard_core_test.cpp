// A shard's core, which workers of its process compute from without a message: rows grouped by
// slot with their experts' weights, load counted and windows closed as the shard's own handler
// counts them, refusals naming what is missing, and the grouped computation bit for bit that
// of each expert alone.
#include "actors/shard_core.hpp"

#include <caf/actor_control_block.hpp>
#include <catch2/catch.hpp>

#include "actors/small_model.hpp"
#include "kvcache/hash_key.hpp"
#include "model/transformer.hpp"

using namespace brigade;
using actors::shard_core;

namespace {

struct core_fixture {
  testing::small_model model{"shard-core", 9};
  std::shared_ptr<const actors::model_context> ctx;
  std::shared_ptr<shard_core> core = std::make_shared<shard_core>();

  core_fixture() {
    auto loaded = actors::model_context::load(model.dir.path(), kvcache::random_hash_key(), {});
    REQUIRE(loaded.ok());
    ctx = loaded.value();
    const auto& c = ctx->config;
    core->ctx = ctx;
    core->name = "expert_shard-1";
    core->index = 1;
    core->sample_interval_steps = 4;
    core->tokens_per_expert.assign(static_cast<size_t>(c.num_layers),
                                   std::vector<int64_t>(static_cast<size_t>(c.num_experts), 0));
    // Epoch 3: layer 1's slot 0 holds expert 5 and slot 2 expert 1.
    core->epochs[3][{1, 0}] = {5, expert(1, 5)};
    core->epochs[3][{1, 2}] = {1, expert(1, 1)};
  }

  std::shared_ptr<const model::ffn_weights> expert(int layer, int e) const {
    auto w = model::expert_bank::load_one(*ctx->ckpt, ctx->config, *ctx->dev, layer, e);
    REQUIRE(w.ok());
    return std::make_shared<const model::ffn_weights>(std::move(w.value()));
  }
};

std::vector<float> rows_of(int rows, int hidden, int seed) {
  std::vector<float> x(static_cast<size_t>(rows) * static_cast<size_t>(hidden));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>((i * 37 + static_cast<size_t>(seed) * 11) % 29) / 13.0f - 1.0f;
  return x;
}

}  // namespace

TEST_CASE("a shard's core groups a request's rows by slot and counts their load", "[experts]") {
  core_fixture f;
  const std::vector<int32_t> slots{2, 0, 2, 2, 0};
  actors::due_samples due;
  auto groups = f.core->take_rows({1, 7, 3, 1, &slots}, nullptr, due);
  REQUIRE(groups.ok());
  REQUIRE(groups.value().size() == 2);
  CHECK(groups.value()[0].expert == 5);
  CHECK(groups.value()[0].rows == std::vector<int32_t>{1, 4});
  CHECK(groups.value()[0].weights == f.core->epochs[3][{1, 0}].weights);
  CHECK(groups.value()[1].expert == 1);
  CHECK(groups.value()[1].rows == std::vector<int32_t>{0, 2, 3});
  CHECK(f.core->tokens_per_expert[1][5] == 2);
  CHECK(f.core->tokens_per_expert[1][1] == 3);
  CHECK(f.core->requests == 1);
  CHECK(f.core->rows == 5);
  CHECK(due.samples.empty());
}

TEST_CASE("a shard's core closes a load window every interval of a caller's steps", "[experts]") {
  core_fixture f;
  const std::vector<int32_t> slots{0, 2};
  actors::due_samples due;
  for (uint64_t step = 1; step <= 3; ++step)
    REQUIRE(f.core->take_rows({step, 7, 3, 1, &slots}, nullptr, due).ok());
  CHECK(due.samples.empty());
  // The fourth step completes window 0, with the rows of the three before it.
  REQUIRE(f.core->take_rows({4, 7, 3, 1, &slots}, nullptr, due).ok());
  REQUIRE(due.samples.size() == 1);
  CHECK(due.samples[0].shard == 1);
  CHECK(due.samples[0].window == 0);
  CHECK(due.samples[0].tokens[1][5] == 3);
  CHECK(due.samples[0].tokens[1][1] == 3);
  CHECK(f.core->tokens_per_expert[1][5] == 1);
  // A wild step number advances the count by one window at most.
  actors::due_samples wild;
  REQUIRE(f.core->take_rows({1'000'000'000, 7, 3, 1, &slots}, nullptr, wild).ok());
  REQUIRE(wild.samples.size() == 1);
  CHECK(wild.samples[0].window == 1);
  CHECK(f.core->window == 2);
}

TEST_CASE("a shard's core refuses what it does not hold, and everything once it is down",
          "[experts]") {
  core_fixture f;
  actors::due_samples due;
  const std::vector<int32_t> held{0}, missing{0, 7};
  auto no_epoch = f.core->take_rows({1, 7, 9, 1, &held}, nullptr, due);
  REQUIRE_FALSE(no_epoch.ok());
  CHECK(no_epoch.err().message == "expert_shard-1 holds no layout of epoch 9");
  auto no_slot = f.core->take_rows({2, 7, 3, 1, &missing}, nullptr, due);
  REQUIRE_FALSE(no_slot.ok());
  CHECK(no_slot.err().message == "expert_shard-1 does not hold slot 7 of layer 1");
  CHECK(f.core->requests == 0);
  CHECK(f.core->tokens_per_expert[1][5] == 0);

  // The registry hands the core to workers while the shard lives; its removal (the shard's
  // exit) makes the core refuse rows that a worker found before.
  int block = 0;  // stands for a shard's control block: only its address is a key
  const auto* shard = reinterpret_cast<const caf::actor_control_block*>(&block);
  actors::local_shard_cores::add(shard, f.core);
  CHECK(actors::local_shard_cores::find(shard) == f.core);
  actors::local_shard_cores::remove(shard);
  CHECK(actors::local_shard_cores::find(shard) == nullptr);
  auto down = f.core->take_rows({3, 7, 3, 1, &held}, nullptr, due);
  REQUIRE_FALSE(down.ok());
  CHECK(down.err().message == "expert_shard-1 is down");
}

TEST_CASE("rows of several slots computed together equal each expert's rows computed alone",
          "[experts]") {
  core_fixture f;
  const auto& c = f.ctx->config;
  const int hidden = c.hidden_size;
  // Rows of two slots interleaved, as a worker's rows of several shards lie in one input.
  const std::vector<int32_t> slots{2, 0, 2, 0, 0, 2, 2};
  actors::due_samples due;
  auto groups = f.core->take_rows({1, 7, 3, 1, &slots}, nullptr, due);
  REQUIRE(groups.ok());
  const int n = static_cast<int>(slots.size());
  const std::vector<float> input = rows_of(n, hidden, 3);
  std::vector<float> together(input.size());
  actors::ffn_scratch scratch;
  actors::run_slot_rows(*f.ctx->dev, scratch, c, groups.value(), input.data(), together.data());

  gpu::backend& dev = *f.ctx->dev;
  for (const actors::slot_rows& g : groups.value()) {
    const int rows = static_cast<int>(g.rows.size());
    std::vector<float> x;
    for (int32_t r : g.rows) {
      x.insert(x.end(), input.begin() + static_cast<ptrdiff_t>(r) * hidden,
               input.begin() + static_cast<ptrdiff_t>(r + 1) * hidden);
    }
    auto in = dev.alloc(rows, hidden), out = dev.alloc(rows, hidden);
    auto gate_up = dev.alloc(rows, 2 * g.weights->inter), inter = dev.alloc(rows, g.weights->inter);
    dev.upload(x.data(), in.first(rows));
    model::run_ffn(dev, *g.weights, in.first(rows), out.first(rows), gate_up.first(rows),
                   inter.first(rows));
    std::vector<float> alone(x.size());
    dev.download(out.first(rows), alone.data());
    for (int k = 0; k < rows; ++k) {
      INFO("expert " << g.expert << " row " << g.rows[static_cast<size_t>(k)]);
      const auto at = static_cast<ptrdiff_t>(g.rows[static_cast<size_t>(k)]) * hidden;
      CHECK(std::equal(alone.begin() + static_cast<ptrdiff_t>(k) * hidden,
                       alone.begin() + static_cast<ptrdiff_t>(k + 1) * hidden,
                       together.begin() + at));
    }
  }
}
