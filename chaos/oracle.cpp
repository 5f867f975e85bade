#include "chaos/oracle.hpp"

#include <algorithm>

#include "gpu/backend.hpp"
#include "model/engine.hpp"
#include "model/loaded_model.hpp"
#include "model/tokenizer.hpp"

namespace brigade::chaos {

struct oracle::impl {
  explicit impl(model::tokenizer t) : tok(std::move(t)) {}
  std::unique_ptr<gpu::backend> dev;
  std::unique_ptr<model::loaded_model> model;
  model::tokenizer tok;
};

oracle::oracle(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
oracle::~oracle() = default;

result<std::unique_ptr<oracle>> oracle::load(const std::string& model_dir) {
  auto tok = model::tokenizer::load(model_dir);
  if (!tok) return tok.err();
  auto p = std::make_unique<impl>(std::move(tok.value()));
  p->dev = gpu::make_cpu_backend();
  auto loaded = model::loaded_model::load(model_dir, *p->dev, true, {});
  if (!loaded) return loaded.err();
  p->model = std::move(loaded.value());
  return std::unique_ptr<oracle>(new oracle(std::move(p)));
}

int oracle::vocab() const {
  return impl_->model->config.vocab_size;
}

int oracle::max_positions() const {
  return impl_->model->config.max_positions;
}

std::vector<int32_t> oracle::encode(const std::string& text) const {
  return impl_->tok.encode(text);
}

result<std::vector<std::string>> oracle::answers(const std::vector<request_spec>& requests) {
  std::vector<std::string> out;
  // Batch invariance makes one engine run per chunk of requests give each its own answer.
  constexpr size_t chunk = 32;
  for (size_t begin = 0; begin < requests.size(); begin += chunk) {
    const size_t end = std::min(requests.size(), begin + chunk);
    int kv_tokens = 16;
    for (size_t i = begin; i < end; ++i) {
      kv_tokens += static_cast<int>(requests[i].prompt.size()) + requests[i].max_tokens + 32;
    }
    model::engine_options options;
    options.kv_tokens = kv_tokens;
    options.max_running = static_cast<int>(end - begin);
    model::engine eng(*impl_->model, *impl_->dev, options);
    std::vector<int64_t> ids;
    for (size_t i = begin; i < end; ++i) {
      model::request_options r;
      r.max_tokens = requests[i].max_tokens;
      r.sampling.temperature = static_cast<float>(requests[i].temperature);
      r.sampling.top_p = static_cast<float>(requests[i].top_p);
      r.sampling.seed = requests[i].seed;
      auto id = eng.submit(requests[i].prompt, r);
      if (!id) return id.err();
      ids.push_back(id.value());
    }
    eng.run_until_idle();
    for (int64_t id : ids)
      out.push_back(impl_->tok.decode(eng.output(id), true));
  }
  return out;
}

}  // namespace brigade::chaos
