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
  app.add_option("--family", spec.family,
                 "model_type: qwen3_moe, mixtral, olmoe, qwen2_moe, qwen3, qwen2 or llama")
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
