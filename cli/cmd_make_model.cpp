// `brigade make-model`: writes a small random checkpoint in the Hugging Face format.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.hpp"
#include "model/model_writer.hpp"

namespace brigade::cli {

int make_model(int argc, char** argv) {
  model::model_spec spec;
  std::string out;
  CLI::App app{"Write a small random checkpoint (config.json, model.safetensors, tokenizer.json)",
               "brigade make-model"};
  app.option_defaults()->always_capture_default();
  app.add_option(
         "--family", spec.family,
         "model_type: qwen3_moe, mixtral, olmoe, qwen2_moe, deepseek_v3, qwen3, qwen2 or llama")
      ->capture_default_str();
  app.add_option("--out", out, "directory to write")->required();
  app.add_option("--layers", spec.layers, "decoder layers")->capture_default_str();
  app.add_option("--hidden", spec.hidden, "hidden size")->capture_default_str();
  app.add_option("--heads", spec.heads, "attention heads")->capture_default_str();
  app.add_option("--kv-heads", spec.kv_heads, "key/value heads")->capture_default_str();
  app.add_option("--head-dim", spec.head_dim, "size of one head")->capture_default_str();
  app.add_option("--experts", spec.experts, "routed experts per MoE layer")->capture_default_str();
  app.add_option("--top-k", spec.top_k, "experts per token")->capture_default_str();
  app.add_option("--moe-inter", spec.moe_inter, "intermediate size of an expert")
      ->capture_default_str();
  app.add_option("--inter", spec.dense_inter, "intermediate size of dense MLP layers")
      ->capture_default_str();
  app.add_option("--shared-inter", spec.shared_inter, "qwen2_moe shared expert size")
      ->default_str("2 x --moe-inter");
  app.add_option("--mlp-only-layers", spec.mlp_only_layers,
                 "qwen MoE layers that get a dense MLP instead of experts")
      ->delimiter(',')
      ->default_str("none");
  app.add_option("--vocab", spec.vocab, "vocabulary size (tokenizer ids included)")
      ->capture_default_str();
  app.add_option("--max-positions", spec.max_positions, "max_position_embeddings")
      ->capture_default_str();
  app.add_option("--dtype", spec.dtype, "float32, bfloat16 or float16")->capture_default_str();
  app.add_option("--seed", spec.seed, "random seed of the weights")->capture_default_str();
  app.add_flag("--tie-embeddings", spec.tie_embeddings, "share embed_tokens with lm_head");
  // deepseek_v3: latent attention, grouped sigmoid routing, shared experts, YaRN.
  app.add_option("--q-lora-rank", spec.q_lora_rank, "deepseek_v3: query rank; 0 a plain q_proj")
      ->capture_default_str();
  app.add_option("--kv-lora-rank", spec.kv_lora_rank, "deepseek_v3: the cached latent's width")
      ->capture_default_str();
  app.add_option("--qk-nope-head-dim", spec.qk_nope_head_dim, "deepseek_v3")->capture_default_str();
  app.add_option("--qk-rope-head-dim", spec.qk_rope_head_dim, "deepseek_v3")->capture_default_str();
  app.add_option("--v-head-dim", spec.v_head_dim, "deepseek_v3")->capture_default_str();
  app.add_option("--shared-experts", spec.shared_experts, "deepseek_v3: n_shared_experts")
      ->capture_default_str();
  app.add_option("--groups", spec.groups, "deepseek_v3: n_group")->capture_default_str();
  app.add_option("--top-groups", spec.top_groups, "deepseek_v3: topk_group")->capture_default_str();
  app.add_option("--routed-scaling", spec.routed_scaling, "deepseek_v3: routed_scaling_factor")
      ->capture_default_str();
  app.add_option("--first-dense", spec.first_dense, "deepseek_v3: first_k_dense_replace")
      ->capture_default_str();
  app.add_option("--yarn-factor", spec.yarn_factor, "deepseek_v3: YaRN factor; 0 for none")
      ->capture_default_str();
  app.add_option("--yarn-original-max-positions", spec.yarn_original_max_positions,
                 "deepseek_v3: YaRN original_max_position_embeddings")
      ->capture_default_str();
  app.add_option("--yarn-beta-fast", spec.yarn_beta_fast, "deepseek_v3")->capture_default_str();
  app.add_option("--yarn-beta-slow", spec.yarn_beta_slow, "deepseek_v3")->capture_default_str();
  app.add_option("--yarn-mscale", spec.yarn_mscale, "deepseek_v3")->capture_default_str();
  app.add_option("--yarn-mscale-all-dim", spec.yarn_mscale_all_dim, "deepseek_v3")
      ->capture_default_str();
  bool no_norm_topk = false;
  app.add_flag("--no-norm-topk-prob", no_norm_topk,
               "do not renormalise the top-k router weights (qwen, olmoe)");
  CLI11_PARSE(app, argc, argv);
  spec.norm_topk_prob = !no_norm_topk;

  status written = model::write_random_model(spec, out);
  if (!written) {
    std::fprintf(stderr, "brigade make-model: %s\n", written.err().message.c_str());
    return 1;
  }
  std::printf("wrote %s model to %s\n", spec.family.c_str(), out.c_str());
  return 0;
}

}  // namespace brigade::cli
