#include "bench/engine_device.hpp"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench/engine_measure.hpp"
#include "bench/engine_model.hpp"
#include "bench/table.hpp"
#include "model/loaded_model.hpp"

namespace brigade::bench {
namespace {

using json = nlohmann::json;

constexpr int prefill_tokens = 512;
const int decode_batches[] = {1, 64, 256};
// This bench runs the engine with its default KV cache, f32 (a bf16 one halves these reads).
constexpr size_t kv_element_bytes = 4;

struct decode_row {
  int batch = 0;
  double tokens_per_s = 0;
  throughput_bound bound;
  decode_step_reads reads;
};

struct device_figures {
  std::string device;
  std::string dtype;
  size_t element_bytes = 2;
  double active_weight_bytes_per_token = 0;
  double prefill_tokens_per_s = 0;
  double prefill_bound_tokens_per_s = 0;
  double prefill_flops_per_token = 0;
  int decode_context_tokens = 0;
  std::vector<decode_row> decode;
};

// Bytes per weight of the checkpoint's main dtype: the backends keep bf16 and f16 as they are.
size_t element_bytes_of(const std::string& safetensors_dtype) {
  return safetensors_dtype == "BF16" || safetensors_dtype == "F16" ? 2 : 4;
}

result<std::unique_ptr<model::loaded_model>> load_model(gpu::backend& dev,
                                                        const device_bench_options& o) {
  if (o.model_dir.empty()) return load_engine_model(o.work_dir, dev, o.shape);
  std::fprintf(stderr, "loading %s onto %s ...\n", o.model_dir.c_str(), dev.name().c_str());
  return model::loaded_model::load(o.model_dir, dev, true);
}

device_figures measure(const model::loaded_model& m, gpu::backend& dev,
                       const device_bench_options& o) {
  const model::model_config& c = m.config;
  device_figures f;
  f.device = dev.name();
  f.dtype = m.ckpt->main_dtype();
  f.element_bytes = element_bytes_of(f.dtype);
  f.active_weight_bytes_per_token = active_weight_bytes_per_token(c, f.element_bytes);
  std::fprintf(stderr, "measuring prefill (%d tokens) on %s ...\n", prefill_tokens,
               f.device.c_str());
  f.prefill_tokens_per_s = prefill_tokens_per_s(m, dev, prefill_tokens, o.quick ? 2 : 3);
  f.prefill_bound_tokens_per_s = prefill_flop_bound_tokens_per_s(c, prefill_tokens, o.peaks);
  f.prefill_flops_per_token = flops_per_token(c, (prefill_tokens + 1) / 2.0);
  const int steps = o.quick ? 8 : 32;
  // Each timed step attends to the prompt, the first token and the tokens decoded so far.
  f.decode_context_tokens = decode_prompt_tokens + 1 + steps / 2;
  for (int batch : decode_batches) {
    std::fprintf(stderr, "measuring decode at batch %d ...\n", batch);
    decode_row r;
    r.batch = batch;
    r.tokens_per_s = decode_tokens_per_s(m, dev, batch, steps);
    r.bound =
        decode_bound(c, f.element_bytes, kv_element_bytes, batch, f.decode_context_tokens, o.peaks);
    r.reads =
        decode_step_bytes(c, f.element_bytes, kv_element_bytes, batch, f.decode_context_tokens);
    f.decode.push_back(r);
  }
  return f;
}

json figures_json(const model::loaded_model& m, const device_figures& f,
                  const device_bench_options& o) {
  const model::model_config& c = m.config;
  json j;
  j["device"] = f.device;
  j["model"] = {{"dir", m.dir},
                {"params", c.total_params()},
                {"active_params", c.active_params()},
                {"hidden", c.hidden_size},
                {"layers", c.num_layers},
                {"experts", c.num_experts},
                {"top_k", c.top_k},
                {"dtype", f.dtype}};
  j["bounds"] = {{"bandwidth_gb_per_s", o.peaks.bandwidth_gb_per_s},
                 {"bandwidth_flag", "--bandwidth-gbs"},
                 {"bf16_tflop_per_s", o.peaks.bf16_tflop_per_s},
                 {"tflop_flag", "--peak-tflops"},
                 {"kv_element_bytes", kv_element_bytes}};
  j["active_weight_bytes_per_token"] = f.active_weight_bytes_per_token;
  j["decode_context_tokens"] = f.decode_context_tokens;
  j["decode"] = json::array();
  for (const decode_row& r : f.decode) {
    j["decode"].push_back({{"batch", r.batch},
                           {"tokens_per_s", r.tokens_per_s},
                           {"bound_tokens_per_s", r.bound.tokens_per_s},
                           {"share", r.tokens_per_s / r.bound.tokens_per_s},
                           {"bound_by", r.bound.by_bandwidth ? "bandwidth" : "flops"},
                           {"weight_bytes_per_step", r.reads.weight_bytes},
                           {"kv_bytes_per_step", r.reads.kv_bytes}});
  }
  j["prefill"] = {{"prompt_tokens", prefill_tokens},
                  {"tokens_per_s", f.prefill_tokens_per_s},
                  {"flop_bound_tokens_per_s", f.prefill_bound_tokens_per_s},
                  {"share", f.prefill_tokens_per_s / f.prefill_bound_tokens_per_s},
                  {"flops_per_token", f.prefill_flops_per_token}};
  return j;
}

void print_figures(const model::loaded_model& m, const device_figures& f,
                   const device_bench_options& o) {
  const model::model_config& c = m.config;
  std::printf("device: %s\n", f.device.c_str());
  std::printf(
      "model: %s, hidden %d, %d layers, %.0fM parameters (%.1fM active), %d experts "
      "top-%d, %s\n",
      m.dir.c_str(), c.hidden_size, c.num_layers, c.total_params() / 1e6, c.active_params() / 1e6,
      c.num_experts, c.top_k, f.dtype.c_str());
  std::printf(
      "bounds: %.0f GB/s memory bandwidth (--bandwidth-gbs), %.0f TFLOP/s dense bf16 "
      "(--peak-tflops); %.1f MB of weights per token at batch 1; decode sequences hold "
      "%d tokens of f32 KV on average\n\n",
      o.peaks.bandwidth_gb_per_s, o.peaks.bf16_tflop_per_s, f.active_weight_bytes_per_token / 1e6,
      f.decode_context_tokens);
  table t({"phase", "tokens/s", "bound tokens/s", "share of bound", "bound by"});
  t.add_row({"prefill (" + std::to_string(prefill_tokens) + "-token prompt)",
             fixed(f.prefill_tokens_per_s, 0), fixed(f.prefill_bound_tokens_per_s, 0),
             fixed(100.0 * f.prefill_tokens_per_s / f.prefill_bound_tokens_per_s, 1) + "%",
             "bf16 FLOPs"});
  for (const decode_row& r : f.decode) {
    t.add_row({"decode batch " + std::to_string(r.batch), fixed(r.tokens_per_s, 1),
               fixed(r.bound.tokens_per_s, 1),
               fixed(100.0 * r.tokens_per_s / r.bound.tokens_per_s, 1) + "%",
               r.bound.by_bandwidth ? "bandwidth" : "bf16 FLOPs"});
  }
  std::printf("%s\n", t.render().c_str());
}

}  // namespace

int bench_engine_on_device(gpu::backend& dev, const device_bench_options& options) {
  auto loaded = load_model(dev, options);
  if (!loaded) {
    std::fprintf(stderr, "brigade bench engine: %s\n", loaded.err().message.c_str());
    return 1;
  }
  const model::loaded_model& m = *loaded.value();
  const device_figures f = measure(m, dev, options);
  if (options.as_json) {
    std::printf("%s\n", figures_json(m, f, options).dump(2).c_str());
  } else {
    print_figures(m, f, options);
  }
  return 0;
}

}  // namespace brigade::bench
