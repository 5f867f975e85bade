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

result<std::unique_ptr<model::loaded_model>> load_engine_model(const std::string& work_dir,
                                                               gpu::backend& dev) {
  const std::string dir = work_dir + "/engine-100m";
  if (!std::filesystem::exists(dir + "/model.safetensors")) {
    std::fprintf(stderr, "generating the benchmark model in %s ...\n", dir.c_str());
    std::error_code ec;
    std::filesystem::create_directories(work_dir, ec);
    if (ec) return error(errc::io_error, work_dir + ": cannot create it: " + ec.message());
    status s = model::write_random_model(engine_model_spec(), dir);
    if (!s) return s.err();
  }
  return model::loaded_model::load(dir, dev, true);
}

}  // namespace brigade::bench
