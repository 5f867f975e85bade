#include "bench/engine_model.hpp"

#include <cstdio>
#include <filesystem>

namespace brigade::bench {

model::model_spec engine_model_spec() {
  model::model_spec s;
  s.family = "qwen3_moe";
  s.layers = 3;
  s.hidden = 768;
  s.heads = 12;
  s.kv_heads = 4;
  s.head_dim = 64;
  s.experts = 64;
  s.top_k = 4;
  s.moe_inter = 192;
  s.vocab = 8192;
  s.dtype = "bfloat16";
  s.seed = 5;
  return s;
}

result<model::model_spec> engine_model_spec(const std::string& shape) {
  model::model_spec s = engine_model_spec();
  if (shape == "default") return s;
  if (shape == "wide") {
    s.hidden = 1024;
    s.heads = 16;
    s.experts = 16;
    s.top_k = 2;
    s.moe_inter = 512;
    return s;
  }
  return error(errc::invalid_argument, "unknown model shape '" + shape + "' (default, wide)");
}

std::string engine_model_dir(const std::string& work_dir, const std::string& shape) {
  // The default keeps the directory it always had, so existing work directories stay valid.
  return work_dir + (shape == "default" ? "/engine-100m" : "/engine-" + shape);
}

result<std::unique_ptr<model::loaded_model>> load_engine_model(const std::string& work_dir,
                                                               gpu::backend& dev,
                                                               const std::string& shape) {
  auto spec = engine_model_spec(shape);
  if (!spec) return spec.err();
  const std::string dir = engine_model_dir(work_dir, shape);
  if (!std::filesystem::exists(dir + "/model.safetensors")) {
    std::fprintf(stderr, "generating the benchmark model in %s ...\n", dir.c_str());
    std::error_code ec;
    std::filesystem::create_directories(work_dir, ec);
    if (ec) return error(errc::io_error, work_dir + ": cannot create it: " + ec.message());
    status s = model::write_random_model(spec.value(), dir);
    if (!s) return s.err();
  }
  return model::loaded_model::load(dir, dev, true);
}

}  // namespace brigade::bench
