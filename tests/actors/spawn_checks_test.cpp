// A node refuses a spawn whose configuration or layout would divide by zero, allocate past any
// model or route to experts the model lacks, naming what is wrong; the coordinator's own configs
// pass. Layouts from peers are checked before they are indexed.
#include "actors/spawn_checks.hpp"

#include <catch2/catch.hpp>

using namespace brigade;
using namespace brigade::actors;

namespace {

// Four layers, the odd ones MoE with 8 experts.
model::model_config moe_config() {
  model::model_config c;
  c.vocab_size = 100;
  c.num_layers = 4;
  c.num_experts = 8;
  c.decoder_sparse_step = 2;
  return c;
}

shard_set valid_shards() {
  shard_set set;
  auto layout = expert_layout::initial(moe_config(), 2, 5);
  REQUIRE(layout.ok());
  set.layout = layout.value();
  set.shards.resize(2);
  return set;
}

std::string refusal(const status& s) {
  REQUIRE_FALSE(s.ok());
  CHECK(s.err().code == errc::invalid_argument);
  return s.err().message;
}

}  // namespace

TEST_CASE("a layout from a peer is checked whatever its numbers", "[actors][spawn]") {
  const expert_layout good = valid_shards().layout;
  CHECK(good.check().ok());
  CHECK(good.fits(moe_config()).ok());
  CHECK(expert_layout{}.check().ok());  // no MoE layers: nothing to route
  auto spoiled = [&](auto spoil) {
    expert_layout l = good;
    spoil(l);
    return refusal(l.check());
  };
  CHECK_THAT(spoiled([](expert_layout& l) { l.experts = -1; }), Catch::Contains("impossible"));
  CHECK_THAT(spoiled([](expert_layout& l) { l.slots_per_shard = 0; }),
             Catch::Contains("impossible"));
  CHECK_THAT(spoiled([](expert_layout& l) { l.shards = 1 << 30; }), Catch::Contains("impossible"));
  CHECK_THAT(spoiled([](expert_layout& l) { l.phy2log[1][3] = 8; }),
             Catch::Contains("slot 3 holds expert 8"));
  CHECK_THAT(spoiled([](expert_layout& l) { l.phy2log[1].pop_back(); }),
             Catch::Contains("layer 1 has 9 slots, expected 10"));
  CHECK_THAT(spoiled([](expert_layout& l) { l.phy2log[3][5] = l.phy2log[3][6]; }),
             Catch::Contains("twice on one shard"));
  // Valid on its own, but not this model's.
  expert_layout other = good;
  other.phy2log.pop_back();
  CHECK_THAT(refusal(other.fits(moe_config())), Catch::Contains("3 layers but the model 4"));
  other = good;
  other.phy2log[0] = other.phy2log[1];
  CHECK_THAT(refusal(other.fits(moe_config())), Catch::Contains("layer 0 has no experts"));
  model::model_config more = moe_config();
  more.num_experts = 9;
  CHECK_THAT(refusal(good.fits(more)), Catch::Contains("places 8 experts per layer"));
}

TEST_CASE("a spawn a node cannot honour is refused by field", "[actors][spawn]") {
  const auto model = moe_config();
  decode_worker_config decode;
  decode.name = "decode-0";
  CHECK(check_spawn(model, decode, valid_shards()).ok());
  decode.block_tokens = 0;
  CHECK_THAT(refusal(check_spawn(model, decode, valid_shards())),
             Catch::Contains("cannot spawn decode-0: block_tokens is 0"));
  decode.block_tokens = 16;
  decode.kv_tokens = -4;
  CHECK_THAT(refusal(check_spawn(model, decode, valid_shards())), Catch::Contains("kv_tokens"));
  decode.kv_tokens = 1024;
  shard_set short_set = valid_shards();
  short_set.shards.pop_back();
  CHECK_THAT(refusal(check_spawn(model, decode, short_set)),
             Catch::Contains("names 1 shards for a layout of 2"));

  prefill_worker_config prefill;
  prefill.name = "prefill-0";
  CHECK(check_spawn(model, prefill, valid_shards()).ok());
  prefill.max_step_tokens = 0;
  CHECK_THAT(refusal(check_spawn(model, prefill, valid_shards())),
             Catch::Contains("max_step_tokens"));

  expert_shard_config shard;
  shard.name = "expert_shard-0";
  shard.plan = {0, {{1, 0, 3}}, {}};
  CHECK(check_spawn(model, shard).ok());
  shard.sample_interval_steps = 0;
  CHECK_THAT(refusal(check_spawn(model, shard)), Catch::Contains("sample_interval_steps is 0"));
  shard.sample_interval_steps = 1000;
  shard.plan.slots[0].layer = 0;  // a dense layer
  CHECK_THAT(refusal(check_spawn(model, shard)),
             Catch::Contains("expert 3 of layer 0, which the model does not have"));
}

TEST_CASE("KV storage past this machine's memory is refused before any allocation",
          "[actors][spawn]") {
  model::model_config model = moe_config();
  model.num_kv_heads = 8;
  model.head_dim = 128;
  const uint64_t per_token = 2 * 4 * static_cast<uint64_t>(model.num_layers) *
                             static_cast<uint64_t>(model.num_kv_heads) *
                             static_cast<uint64_t>(model.head_dim);
  // Whole blocks: 17 tokens in blocks of 16 take two.
  CHECK(actors::kv_storage_bytes(model, 17, 16) == 32 * per_token);
  CHECK(actors::kv_storage_bytes(model, 0, 16) == 0);
  REQUIRE(actors::physical_memory_bytes() > 0);
  CHECK(actors::check_kv_fits(1 << 20, "a little").ok());
  const status big = actors::check_kv_fits(actors::physical_memory_bytes() + 1, "too much");
  REQUIRE_FALSE(big.ok());
  CHECK_THAT(big.err().message, Catch::Contains("too much") && Catch::Contains("kv_tokens"));

  actors::decode_worker_config cfg;
  cfg.name = "decode-0";
  cfg.kv_tokens = 1 << 28;
  cfg.block_tokens = 16;
  // 2^28 tokens of this model's KV: 8 TiB at 32 KiB a token, past any test machine.
  REQUIRE(actors::kv_storage_bytes(model, cfg.kv_tokens, 16) > actors::physical_memory_bytes());
  const status refused = actors::check_spawn(model, cfg, valid_shards());
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.err().message, Catch::Contains("KV storage for kv_tokens"));
}
