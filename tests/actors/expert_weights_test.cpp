// Expert weights as they move between shards: a copy out and back in computes what the
// original computes, bit for bit, and bytes that do not fit the model are refused with a reason.
#include "actors/expert_weights.hpp"
#include "kvcache/hash_key.hpp"

#include <catch2/catch.hpp>

#include "actors/model_context.hpp"
#include "actors/small_model.hpp"

using namespace brigade;

namespace {

std::vector<float> ffn_output(gpu::backend& dev, const model::ffn_weights& w, int hidden) {
  const int rows = 5;
  std::vector<float> x(static_cast<size_t>(rows) * hidden);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>((i * 37) % 23) / 11.0f - 1.0f;
  auto in = dev.alloc(rows, hidden), out = dev.alloc(rows, hidden);
  auto gate_up = dev.alloc(rows, 2 * w.inter), inter = dev.alloc(rows, w.inter);
  dev.upload(x.data(), in.first(rows));
  model::run_ffn(dev, w, in.first(rows), out.first(rows), gate_up.first(rows), inter.first(rows));
  std::vector<float> y(x.size());
  dev.download(out.first(rows), y.data());
  return y;
}

}  // namespace

TEST_CASE("expert weights copied out and back in compute the same outputs", "[experts]") {
  testing::small_model f{"expert-weights", 5};
  auto ctx = actors::model_context::load(f.dir.path(), kvcache::random_hash_key(), {});
  REQUIRE(ctx.ok());
  const auto& c = ctx.value()->config;
  gpu::backend& dev = *ctx.value()->dev;
  auto original = model::expert_bank::load_one(*ctx.value()->ckpt, c, dev, 1, 3);
  REQUIRE(original.ok());
  const actors::expert_weights copy = actors::export_expert(dev, original.value(), 1, 3);
  CHECK(copy.size == copy.expected_size());
  auto imported = actors::import_expert(dev, c, copy, 1, 3);
  REQUIRE(imported.ok());
  CHECK(ffn_output(dev, imported.value(), c.hidden_size) ==
        ffn_output(dev, original.value(), c.hidden_size));

  SECTION("the wrong expert is refused") {
    auto wrong = actors::import_expert(dev, c, copy, 1, 4);
    REQUIRE_FALSE(wrong.ok());
    CHECK(wrong.err().message.find("the peer sent expert 3 of layer 1") != std::string::npos);
  }
  SECTION("a shape that is not the model's is refused") {
    actors::expert_weights other = copy;
    other.inter += 1;
    auto wrong = actors::import_expert(dev, c, other, 1, 3);
    REQUIRE_FALSE(wrong.ok());
    CHECK(wrong.err().message.find("same checkpoint") != std::string::npos);
  }
  SECTION("truncated bytes are refused") {
    actors::expert_weights cut = copy;
    cut.size -= 2;
    auto wrong = actors::import_expert(dev, c, cut, 1, 3);
    REQUIRE_FALSE(wrong.ok());
    CHECK(wrong.err().message.find("bytes, the shape needs") != std::string::npos);
  }
}
