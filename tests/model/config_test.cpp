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

namespace {

const char* deepseek = R"({"model_type": "deepseek_v3", "vocab_size": 100, "hidden_size": 32,
  "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 4,
  "q_lora_rank": 24, "kv_lora_rank": 16, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
  "v_head_dim": 16, "n_routed_experts": 8, "n_shared_experts": 2, "num_experts_per_tok": 2,
  "moe_intermediate_size": 12, "intermediate_size": 64, "n_group": 4, "topk_group": 2,
  "norm_topk_prob": true, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
  "topk_method": "noaux_tc", "first_k_dense_replace": 1, "moe_layer_freq": 1,
  "max_position_embeddings": 512,
  "rope_scaling": {"type": "yarn", "factor": 4, "original_max_position_embeddings": 128,
                   "beta_fast": 32, "beta_slow": 1, "mscale": 1, "mscale_all_dim": 1}})";

}  // namespace

TEST_CASE("deepseek_v3 config: latent attention, grouped routing, shared experts, YaRN",
          "[config]") {
  auto c = parse_config(deepseek, "config.json");
  REQUIRE(c.ok());
  CHECK(c->fam == family::deepseek_v3);
  CHECK(c->mla.enabled());
  CHECK(c->mla.q_lora_rank == 24);
  // The cache holds one row per token: the latent and the rope key, shared by all heads.
  CHECK(c->num_kv_heads == 1);
  CHECK(c->head_dim == 16 + 8);
  CHECK(c->num_experts == 8);
  CHECK(c->shared_expert_intermediate == 2 * 12);
  CHECK_FALSE(c->shared_expert_gated);
  CHECK(c->sigmoid_router);
  CHECK(c->expert_groups == 4);
  CHECK(c->topk_groups == 2);
  CHECK(c->routed_scaling == 2.5f);
  CHECK_FALSE(c->is_moe_layer(0));
  CHECK(c->is_moe_layer(1));
  CHECK(c->is_moe_layer(2));
  CHECK(c->yarn.enabled);
  CHECK(c->yarn.factor == 4.0);
  CHECK(c->yarn.original_max_positions == 128);
  // A plain q_proj when q_lora_rank is null.
  auto plain = parse_config(with(deepseek, "q_lora_rank", "null"), "config.json");
  REQUIRE(plain.ok());
  CHECK(plain->mla.q_lora_rank == 0);
}

TEST_CASE("deepseek_v3 options brigade cannot honour are refused, naming the field", "[config]") {
  CHECK_THAT(parse_error(with(deepseek, "scoring_func", "\"softmax\"")),
             Catch::Contains("'scoring_func'"));
  CHECK_THAT(parse_error(with(deepseek, "topk_method", "\"greedy\"")),
             Catch::Contains("'topk_method'"));
  CHECK_THAT(parse_error(with(deepseek, "moe_layer_freq", "2")),
             Catch::Contains("'moe_layer_freq'"));
  // `with` replaces flat values only: the rope cases start from the config without rope_scaling.
  const std::string text = deepseek;
  const std::string unscaled = text.substr(0, text.find(",\n  \"rope_scaling\"")) + "}";
  REQUIRE(parse_config(unscaled, "config.json").ok());
  CHECK_THAT(parse_error(with(unscaled, "rope_scaling", R"({"type": "linear", "factor": 2})")),
             Catch::Contains("'rope_scaling.type'"));
  CHECK_THAT(parse_error(with(unscaled, "rope_scaling",
                              R"({"type": "yarn", "factor": 2, "attention_factor": 1})")),
             Catch::Contains("'rope_scaling.attention_factor'"));
  CHECK_THAT(parse_error(with(deepseek, "n_group", "3")), Catch::Contains("n_group"));
  CHECK_THAT(parse_error(with(deepseek, "topk_group", "5")), Catch::Contains("topk_group"));
  CHECK_THAT(parse_error(with(deepseek, "qk_rope_head_dim", "7")),
             Catch::Contains("qk_rope_head_dim"));
  CHECK_THAT(parse_error(with(deepseek, "kv_lora_rank", "0")), Catch::Contains("kv_lora_rank"));
}
