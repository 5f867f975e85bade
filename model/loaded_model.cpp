#include "model/loaded_model.hpp"

namespace brigade::model {

result<std::unique_ptr<loaded_model>> loaded_model::load(const std::string& dir, gpu::backend& dev,
                                                         bool load_experts,
                                                         const load_progress& progress) {
  auto m = std::make_unique<loaded_model>();
  m->dir = dir;
  auto config = load_config(dir);
  if (!config) return config.err();
  m->config = config.value();
  auto ck = checkpoint::open(dir);
  if (!ck) return ck.err();
  m->ckpt = std::move(ck.value());
  const auto expert_keys =
      load_experts ? expert_bank::all_experts(m->config) : std::vector<expert_bank::key>{};
  const size_t total = static_cast<size_t>(m->config.num_layers) + expert_keys.size();
  auto dense = dense_weights::load(*m->ckpt, m->config, dev, [&](size_t done, size_t) {
    if (progress) progress(done, total);
  });
  if (!dense) return dense.err();
  m->dense = std::move(dense.value());
  const size_t layers = static_cast<size_t>(m->config.num_layers);
  auto experts = expert_bank::load(*m->ckpt, m->config, dev, expert_keys, [&](size_t done, size_t) {
    if (progress) progress(layers + done, total);
  });
  if (!experts) return experts.err();
  m->experts = std::move(experts.value());
  m->forward = std::make_unique<transformer>(m->config, dev, *m->dense);
  return m;
}

}  // namespace brigade::model
