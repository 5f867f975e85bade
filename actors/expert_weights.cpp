#include "actors/expert_weights.hpp"

#include <string>

namespace brigade::actors {

size_t expert_weights::expected_size() const {
  const size_t h = static_cast<size_t>(hidden);
  const size_t i = static_cast<size_t>(inter);
  return (2 * i * h + h * i) * gpu::dtype_size(type);
}

expert_weights export_expert(gpu::backend& dev, const model::ffn_weights& w, int layer,
                             int expert) {
  expert_weights out;
  out.layer = layer;
  out.expert = expert;
  out.hidden = w.gate_up->cols();
  out.inter = w.inter;
  out.type = w.gate_up->type();
  out.size = out.expected_size();
  std::shared_ptr<std::byte> bytes(new std::byte[out.size], std::default_delete<std::byte[]>());
  const size_t gate_up_bytes = static_cast<size_t>(w.gate_up->rows()) *
                               static_cast<size_t>(w.gate_up->cols()) * gpu::dtype_size(out.type);
  dev.read_matrix(*w.gate_up, bytes.get());
  dev.read_matrix(*w.down, bytes.get() + gate_up_bytes);
  out.bytes = std::move(bytes);
  return out;
}

result<model::ffn_weights> import_expert(gpu::backend& dev, const model::model_config& config,
                                         const expert_weights& in, int layer, int expert) {
  const std::string what =
      "expert " + std::to_string(expert) + " of layer " + std::to_string(layer) + ": ";
  if (in.layer != layer || in.expert != expert) {
    return error(errc::invalid_argument, what + "the peer sent expert " +
                                             std::to_string(in.expert) + " of layer " +
                                             std::to_string(in.layer));
  }
  if (in.hidden != config.hidden_size || in.inter != config.expert_intermediate) {
    return error(errc::invalid_argument, what + "the peer's weights are " +
                                             std::to_string(in.hidden) + " x " +
                                             std::to_string(in.inter) + ", the model's " +
                                             std::to_string(config.hidden_size) + " x " +
                                             std::to_string(config.expert_intermediate) +
                                             " (do both nodes serve the same checkpoint?)");
  }
  if (in.type != gpu::dtype::f32 && in.type != gpu::dtype::bf16 && in.type != gpu::dtype::f16) {
    return error(errc::invalid_argument, what + "unknown element type from the peer");
  }
  if (!in.bytes || in.size != in.expected_size()) {
    return error(errc::invalid_argument, what + "the peer sent " + std::to_string(in.size) +
                                             " bytes, the shape needs " +
                                             std::to_string(in.expected_size()));
  }
  const int h = in.hidden;
  const int i = in.inter;
  const std::byte* base = in.bytes.get();
  const gpu::host_matrix gate_up{base, in.type, 2 * i, h};
  const gpu::host_matrix down{
      base + static_cast<size_t>(2 * i) * static_cast<size_t>(h) * gpu::dtype_size(in.type),
      in.type, h, i};
  model::ffn_weights w;
  w.gate_up = dev.make_matrix(gate_up);
  w.down = dev.make_matrix(down);
  w.inter = i;
  return w;
}

}  // namespace brigade::actors
