#include "model/config.hpp"

#include <catch2/catch.hpp>

using namespace brigade;
using namespace brigade::model;

namespace {

const char* qwen3 = R"({"model_type": "qwen3_moe", "vocab_size": 100, "hidden_size": 32,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
  "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
  "intermediate_size": 64, "norm_topk_prob": true, "mlp_only_layers": [1],
  "max_position_embeddings": 128, "eos_token_id": [5, 7]})";

std::string parse_error(const std::string& text) {
  auto c = parse_config(text, "config.json");
  REQUIRE_FALSE(c.ok());
  return c.err().message;
}

std::string with(const std::string& base, const std::string& field, const std::string& value) {
  std::string s = base;
  const auto at = s.find("\"" + field + "\"");
  if (at == std::string::npos)
    return s.substr(0, s.size() - 1) + ", \"" + field + "\": " + value + "}";
  const auto colon = s.find(':', at);
  const auto end = s.find_first_of(",}", colon);
  return s.substr(0, colon + 1) + " " + value + s.substr(end);
}

}  // namespace

TEST_CASE("qwen3_moe config parses with Hugging Face field names", "[config]") {
  auto c = parse_config(qwen3, "config.json");
  REQUIRE(c.ok());
  CHECK(c->fam == family::qwen3_moe);
  CHECK(c->qk_norm == qk_norm_kind::per_head);
  CHECK(c->is_moe_layer(0));
  CHECK_FALSE(c->is_moe_layer(1));
  CHECK(c->eos_token_ids == std::vector<int>{5, 7});
  CHECK(c->norm_topk_prob);
}

TEST_CASE("config errors name the field and the problem", "[config]") {
  CHECK_THAT(parse_error("{"), Catch::Contains("not valid JSON"));
  CHECK_THAT(parse_error(with(qwen3, "model_type", "\"gpt2\"")),
             Catch::Contains("gpt2") && Catch::Contains("not supported"));
  CHECK_THAT(parse_error(with(qwen3, "hidden_size", "\"32\"")),
             Catch::Contains("'hidden_size'") && Catch::Contains("integer"));
  CHECK_THAT(parse_error(with(qwen3, "num_experts", "null")),
             Catch::Contains("'num_experts'") && Catch::Contains("missing"));
  CHECK_THAT(parse_error(with(qwen3, "num_key_value_heads", "3")), Catch::Contains("multiple"));
  CHECK_THAT(parse_error(with(qwen3, "num_experts_per_tok", "9")),
             Catch::Contains("num_experts_per_tok"));
  CHECK_THAT(parse_error(with(qwen3, "norm_topk_prob", "1")),
             Catch::Contains("'norm_topk_prob'") && Catch::Contains("true or false"));
  CHECK_THAT(parse_error(with(qwen3, "rope_scaling", R"({"type": "yarn"})")),
             Catch::Contains("rope_scaling"));
  CHECK_THAT(parse_error(with(qwen3, "head_dim", "7")), Catch::Contains("head_dim"));
  CHECK_THAT(parse_error(with(qwen3, "vocab_size", "-3")), Catch::Contains("out of range"));
}

TEST_CASE("family options", "[config]") {
  auto mixtral = parse_config(R"({"model_type": "mixtral", "vocab_size": 10, "hidden_size": 8,
    "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
    "num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 16,
    "sliding_window": 32, "max_position_embeddings": 64})",
                              "m");
  REQUIRE(mixtral.ok());
  CHECK(mixtral->head_dim == 4);
  CHECK(mixtral->norm_topk_prob);
  CHECK(mixtral->sliding_window == 32);
  auto olmoe = parse_config(R"({"model_type": "olmoe", "vocab_size": 10, "hidden_size": 8,
    "num_hidden_layers": 1, "num_attention_heads": 2, "num_experts": 4,
    "num_experts_per_tok": 2, "intermediate_size": 16, "clip_qkv": 1.5})",
                            "o");
  REQUIRE(olmoe.ok());
  CHECK(olmoe->qk_norm == qk_norm_kind::whole);
  CHECK(olmoe->clip_qkv == 1.5f);
  CHECK_FALSE(olmoe->norm_topk_prob);
  auto qwen2 = parse_config(R"({"model_type": "qwen2_moe", "vocab_size": 10, "hidden_size": 8,
    "num_hidden_layers": 1, "num_attention_heads": 2, "num_experts": 4,
    "num_experts_per_tok": 2, "moe_intermediate_size": 16,
    "shared_expert_intermediate_size": 32, "sliding_window": 4, "use_sliding_window": false})",
                            "q");
  REQUIRE(qwen2.ok());
  CHECK(qwen2->qkv_bias);
  CHECK(qwen2->shared_expert_intermediate == 32);
  CHECK(qwen2->sliding_window == 0);
}
