// Launchers of the paged KV write and attention kernels (attention_kernels.cuh).
#include <stdexcept>
#include <string>

#include "gpu/cuda/attention_kernels.cuh"
#include "gpu/cuda/check.hpp"
#include "gpu/cuda/kernels.hpp"
#include "gpu/cuda/launcher.hpp"

namespace brigade::gpu::cuda {
namespace {

kv_shape shape_of(const device_kv& kv, int layer) {
  const kv_layout& l = kv.layout();
  return {layer, l.blocks, l.block_tokens, l.kv_heads, l.head_dim, l.element};
}

}  // namespace

void launch_kv_write(cudaStream_t stream, device_kv& kv, int layer, const tensor& k,
                     const tensor& v, const device_batch& batch) {
  const kv_layout& l = kv.layout();
  if (layer < 0 || layer >= l.layers || k.cols != l.kv_heads * l.head_dim || v.cols != k.cols) {
    throw std::invalid_argument("cuda kv_write: layer " + std::to_string(layer) + " or width " +
                                std::to_string(k.cols) + " does not match the KV layout");
  }
  dispatch_kv_write(kv.keys(), kv.values(), shape_of(kv, layer), k, v, batch,
                    cuda_launcher(stream));
  check_launch("kv_write_kernel");
}

void launch_attention(cudaStream_t stream, const tensor& q, const device_kv& kv, int layer,
                      const device_batch& batch, int heads, float scale, int window,
                      const tensor& out) {
  const kv_layout& l = kv.layout();
  if (layer < 0 || layer >= l.layers || l.head_dim > max_attention_head_dim || heads <= 0 ||
      l.kv_heads <= 0 || heads % l.kv_heads != 0 || q.cols < heads * l.head_dim ||
      out.cols < heads * l.head_dim) {
    throw std::invalid_argument(
        "cuda attention: " + std::to_string(heads) + " heads of " + std::to_string(l.head_dim) +
        " over " + std::to_string(l.kv_heads) + " KV heads at layer " + std::to_string(layer) +
        " is not supported (head_dim at most " + std::to_string(max_attention_head_dim) + ")");
  }
  const attention_args a{kv.keys(), kv.values(), shape_of(kv, layer), q, out, batch, heads,
                         scale,     window};
  dispatch_attention(a, cuda_launcher(stream));
  check_launch("attention_kernel");
}

}  // namespace brigade::gpu::cuda
