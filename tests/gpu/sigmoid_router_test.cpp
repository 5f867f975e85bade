// DeepSeek-V3's router on the CPU backend: sigmoid scores, the choice by score + bias inside the
// best groups, the weights from the unbiased scores. Expected values are worked out by hand.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "gpu/backend.hpp"

using namespace brigade::gpu;

namespace {

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

struct routed {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

routed route(const std::vector<float>& logits, int experts, const router_spec& spec) {
  auto cpu = make_cpu_backend();
  const int rows = static_cast<int>(logits.size()) / experts;
  std::vector<float> l = logits;
  const tensor t{l.data(), rows, experts, experts};
  routed out;
  out.experts.resize(static_cast<size_t>(rows * spec.top_k));
  out.weights.resize(out.experts.size());
  cpu->router_topk(t, spec, out.experts.data(), out.weights.data());
  return out;
}

}  // namespace

TEST_CASE("sigmoid routing: the bias picks, the unbiased scores weigh", "[router]") {
  // Expert 0 has the highest logit, but expert 2's bias lifts it above: 2 is chosen first.
  const std::vector<float> logits = {3.0f, 1.0f, 2.0f, -1.0f};
  const std::vector<float> bias = {0.0f, 0.0f, 0.5f, 0.0f};
  router_spec spec;
  spec.top_k = 2;
  spec.normalize = false;
  spec.sigmoid = true;
  spec.host_bias = bias.data();
  const routed r = route(logits, 4, spec);
  CHECK(r.experts == std::vector<int32_t>{2, 0});
  CHECK(r.weights[0] == sigmoid(2.0f));
  CHECK(r.weights[1] == sigmoid(3.0f));

  spec.normalize = true;
  spec.scale = 2.5f;
  const routed n = route(logits, 4, spec);
  const float sum = sigmoid(2.0f) + sigmoid(3.0f);
  CHECK(n.weights[0] == Approx(sigmoid(2.0f) / sum * 2.5f).epsilon(1e-6));
  CHECK(n.weights[1] == Approx(sigmoid(3.0f) / sum * 2.5f).epsilon(1e-6));
}

TEST_CASE("group-limited routing keeps the groups whose two best sum highest", "[router]") {
  // Four groups of two. Group 0 holds the single best expert (0) but a poor second; group 1 has
  // two good ones, group 2 two fair ones. With one group kept, experts come from group 1 only,
  // even though expert 0 scores highest of all.
  const std::vector<float> logits = {4.0f, -4.0f, 2.0f, 2.5f, 1.0f, 1.5f, -2.0f, -1.0f};
  router_spec spec;
  spec.top_k = 2;
  spec.normalize = false;
  spec.sigmoid = true;
  spec.groups = 4;
  spec.top_groups = 1;
  CHECK(route(logits, 8, spec).experts == std::vector<int32_t>{3, 2});
  // Two groups kept: 1 (sum 1.80) and 2 (1.55) beat 0 (1.00 = sigmoid(4) + sigmoid(-4)).
  spec.top_groups = 2;
  CHECK(route(logits, 8, spec).experts == std::vector<int32_t>{3, 2});
  // Three: group 0 is in, and its best expert wins.
  spec.top_groups = 3;
  CHECK(route(logits, 8, spec).experts == std::vector<int32_t>{0, 3});
  // One group: plain top-k over all experts.
  spec.groups = 1;
  spec.top_groups = 1;
  CHECK(route(logits, 8, spec).experts == std::vector<int32_t>{0, 3});
}

TEST_CASE("sigmoid routing breaks ties to the lower group and expert", "[router]") {
  const std::vector<float> logits(8, 0.5f);
  router_spec spec;
  spec.top_k = 3;
  spec.sigmoid = true;
  spec.groups = 4;
  spec.top_groups = 2;
  const routed r = route(logits, 8, spec);
  CHECK(r.experts == std::vector<int32_t>{0, 1, 2});
  for (float w : r.weights)
    CHECK(w == Approx(1.0f / 3).epsilon(1e-6));
}

TEST_CASE("a row's routing does not depend on its batch", "[router]") {
  std::vector<float> logits;
  for (int i = 0; i < 5 * 16; ++i)
    logits.push_back(std::sin(i * 0.7f) * 3);
  std::vector<float> bias;
  for (int i = 0; i < 16; ++i)
    bias.push_back(std::cos(i * 1.3f) * 0.2f);
  router_spec spec;
  spec.top_k = 4;
  spec.sigmoid = true;
  spec.host_bias = bias.data();
  spec.groups = 4;
  spec.top_groups = 2;
  spec.scale = 2.5f;
  const routed all = route(logits, 16, spec);
  for (int r = 0; r < 5; ++r) {
    const std::vector<float> one(logits.begin() + r * 16, logits.begin() + (r + 1) * 16);
    const routed alone = route(one, 16, spec);
    for (int j = 0; j < 4; ++j) {
      CHECK(alone.experts[static_cast<size_t>(j)] == all.experts[static_cast<size_t>(r * 4 + j)]);
      CHECK(alone.weights[static_cast<size_t>(j)] == all.weights[static_cast<size_t>(r * 4 + j)]);
    }
  }
}
