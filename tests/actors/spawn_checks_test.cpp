// A node refuses a spawn whose configuration or layout would divide by zero, allocate past any
// model or route to experts the model lacks, naming what is wrong; the coordinator's own configs
// pass. Layouts from peers are checked before they are indexed.
#include "actors/spawn_checks.hpp"

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
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
  auto layout = initial_layout(moe_config(), 2, 5);
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

// What a peer may send where a layout goes: any numbers, in the layout's wire format.
struct forged_layout {
  int layers = 0, experts = 0, shards = 0, slots_per_shard = 0;
  uint64_t epoch = 0;
  std::vector<std::vector<int32_t>> phy2log;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, forged_layout& x) {
  return f(x.layers, x.experts, x.shards, x.slots_per_shard, x.epoch, x.phy2log);
}

forged_layout forged_from(const eplb::layout& l) {
  return {l.layers(), l.experts(), l.shards(), l.slots_per_shard(), l.epoch(), l.phy2log()};
}

// Deserializes `sent` as a layout; the error it fails with ("" if it arrives).
std::string arrival(forged_layout sent) {
  std::vector<char> bytes;
  caf::binary_serializer sink{nullptr, bytes};
  REQUIRE_FALSE(sink(sent));
  eplb::layout received;
  caf::binary_deserializer source{nullptr, bytes};
  const caf::error err = source(received);
  return err ? caf::to_string(err) : std::string();
}

TEST_CASE("a layout from a peer is checked whatever its numbers, before it is indexed",
          "[actors][spawn]") {
  const eplb::layout good = valid_shards().layout;
  CHECK(arrival(forged_from(good)).empty());
  CHECK(arrival(forged_layout{}).empty());  // the empty layout of a model without experts
  CHECK(check_layout(good, moe_config()).ok());
  auto spoiled = [&](auto spoil) {
    forged_layout l = forged_from(good);
    spoil(l);
    return arrival(l);
  };
  CHECK_THAT(spoiled([](forged_layout& l) { l.experts = -1; }), Catch::Contains("positive"));
  CHECK_THAT(spoiled([](forged_layout& l) { l.slots_per_shard = 0; }), Catch::Contains("positive"));
  CHECK_THAT(spoiled([](forged_layout& l) { l.shards = 1 << 30; }),
             Catch::Contains("past any model"));
  CHECK_THAT(spoiled([](forged_layout& l) { l.phy2log[1][3] = 8; }),
             Catch::Contains("slot 3 holds expert 8"));
  CHECK_THAT(spoiled([](forged_layout& l) { l.phy2log[1].pop_back(); }),
             Catch::Contains("layer 1 has 9 slots"));
  CHECK_THAT(spoiled([](forged_layout& l) { l.phy2log[1][5] = l.phy2log[1][6]; }),
             Catch::Contains("twice on shard 1"));
  // Valid on its own, but not this model's.
  auto one_layer = eplb::layout::from_phy2log({1, 8, 2, 5}, {good.phy2log(0)}, 0);
  REQUIRE(one_layer.ok());
  CHECK_THAT(refusal(check_layout(one_layer.value(), moe_config())),
             Catch::Contains("in 1 layers but the model has 2 MoE layers"));
  model::model_config more = moe_config();
  more.num_experts = 9;
  CHECK_THAT(refusal(check_layout(good, more)), Catch::Contains("places 8 experts per layer"));
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

TEST_CASE("a manifest that leaves slots_per_shard 0 gets a quarter spare slots for replicas",
          "[layout]") {
  // 16 experts on 4 shards: 20 slots, 4 replicas; on 8 shards 24; never a second copy per shard.
  CHECK(default_slots_per_shard(16, 4) == 5);
  CHECK(default_slots_per_shard(16, 8) == 3);
  CHECK(default_slots_per_shard(128, 6) == 27);
  CHECK(default_slots_per_shard(8, 1) == 8);
  auto layout = initial_layout(moe_config(), 2, 0);
  REQUIRE(layout.ok());
  CHECK(layout->slots() == 10);  // 8 experts, 2 replicas
}
