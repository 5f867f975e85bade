#include "model/step_driver.hpp"

#include <cstring>
#include <stdexcept>

namespace brigade::model {

step_driver::step_driver(const transformer& t, gpu::kv_storage& kv, workspace& ws)
    : t_(t), kv_(kv), ws_(ws) {
  const model_config& c = t.config();
  if (c.is_moe()) staging_ = t.device().alloc(ws.max_tokens() * c.top_k, c.hidden_size);
}

void step_driver::start(const step_batch& b) {
  batch_ = &b;
  layer_ = 0;
  t_.embed(b, ws_);
  state_ = state::idle;
}

step_driver::state step_driver::advance() {
  if (!batch_) throw std::logic_error("step_driver::advance before start");
  const model_config& c = t_.config();
  if (state_ == state::need_experts) {
    t_.combine(layer_, *batch_, ws_, routing_);
    ++layer_;
  }
  while (layer_ < c.num_layers) {
    t_.attention(layer_, *batch_, kv_, ws_);
    if (!c.is_moe_layer(layer_)) {
      t_.dense_mlp(layer_, *batch_, ws_);
      ++layer_;
      continue;
    }
    t_.route(layer_, *batch_, ws_, routing_);
    h_host_current_ = false;
    return state_ = state::need_experts;
  }
  t_.logits(*batch_, ws_, logits_);
  return state_ = state::done;
}

void step_driver::input_rows(const std::vector<int32_t>& slots, std::vector<float>& out) const {
  const size_t hidden = static_cast<size_t>(t_.config().hidden_size);
  if (!h_host_current_) {
    h_host_.resize(static_cast<size_t>(batch_->tokens()) * hidden);
    t_.device().download(ws_.h.first(batch_->tokens()), h_host_.data());
    h_host_current_ = true;
  }
  out.resize(slots.size() * hidden);
  for (size_t i = 0; i < slots.size(); ++i) {
    const size_t token = static_cast<size_t>(slots[i] / routing_.top_k);
    std::memcpy(&out[i * hidden], &h_host_[token * hidden], hidden * sizeof(float));
  }
}

void step_driver::deliver(const std::vector<int32_t>& slots, const float* rows) {
  if (slots.empty()) return;
  const gpu::tensor stage = staging_.first(static_cast<int>(slots.size()));
  t_.device().upload(rows, stage);
  t_.device().scatter_rows(stage, slots.data(),
                           ws_.expert_out.first(routing_.tokens * routing_.top_k));
}

void step_driver::run_experts(const std::vector<expert_rows>& experts) {
  run_expert_rows(t_.device(), routing_, experts, ws_);
}

}  // namespace brigade::model
