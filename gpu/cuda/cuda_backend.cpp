#include "gpu/cuda/cuda_backend.hpp"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/cuda/check.hpp"
#include "gpu/cuda/device_memory.hpp"

namespace brigade::gpu::cuda {
namespace {

// Enough for the metadata of several steps of a few thousand tokens before the ring wraps.
constexpr size_t staging_bytes = 4u << 20;

const device_matrix& device_of(const matrix& m) {
  return static_cast<const device_matrix&>(m);
}

// Copies between a strided device tensor and a dense host array [rows, cols].
void upload_rows(const float* host, const tensor& t, cudaStream_t stream) {
  const size_t width = sizeof(float) * static_cast<size_t>(t.cols);
  if (t.rows == 0 || width == 0) return;
  check(cudaMemcpy2DAsync(t.data, sizeof(float) * static_cast<size_t>(t.stride), host, width, width,
                          static_cast<size_t>(t.rows), cudaMemcpyHostToDevice, stream),
        "cudaMemcpy2DAsync (upload)");
}

void download_rows(const tensor& t, float* host, cudaStream_t stream) {
  const size_t width = sizeof(float) * static_cast<size_t>(t.cols);
  if (t.rows == 0 || width == 0) return;
  check(cudaMemcpy2DAsync(host, width, t.data, sizeof(float) * static_cast<size_t>(t.stride), width,
                          static_cast<size_t>(t.rows), cudaMemcpyDeviceToHost, stream),
        "cudaMemcpy2DAsync (download)");
}

}  // namespace

cuda_backend::cuda_backend(int device, std::string device_name, cudaStream_t stream)
    : device_(device), device_name_(std::move(device_name)), stream_(stream) {
  device_guard guard(device_);
  staging_ = std::make_unique<staging_ring>(stream_, staging_bytes);
}

cuda_backend::~cuda_backend() {
  device_guard guard(device_, false);
  cudaStreamSynchronize(stream_);
  staging_.reset();
  results_.reset();
  cudaStreamDestroy(stream_);
}

activation cuda_backend::alloc(int rows, int cols) {
  const size_t bytes = sizeof(float) * static_cast<size_t>(rows) * static_cast<size_t>(cols);
  return activation(std::make_unique<device_buffer>(device_, stream_, bytes), rows, cols);
}

// Both wait for the stream: the host array may be reused or read as soon as they return.
void cuda_backend::upload(const float* host, const tensor& dst) {
  device_guard guard(device_);
  upload_rows(host, dst, stream_);
  synchronize();
}

void cuda_backend::download(const tensor& src, float* host) {
  device_guard guard(device_);
  download_rows(src, host, stream_);
  synchronize();
}

std::unique_ptr<matrix> cuda_backend::make_matrix(const host_matrix& w) {
  return std::make_unique<device_matrix>(device_, stream_, std::vector<host_matrix>{w});
}

std::unique_ptr<matrix> cuda_backend::make_stacked_matrix(const std::vector<host_matrix>& parts) {
  return std::make_unique<device_matrix>(device_, stream_, parts);
}

void cuda_backend::read_matrix(const matrix& m, void* host) {
  const auto& d = static_cast<const device_matrix&>(m);
  device_guard guard(device_);
  const size_t elem = dtype_size(d.type());
  const size_t row_bytes = static_cast<size_t>(d.cols()) * elem;
  if (d.rows() > 0) {
    check(cudaMemcpy2DAsync(host, row_bytes, d.data(), static_cast<size_t>(d.pitch()) * elem,
                            row_bytes, static_cast<size_t>(d.rows()), cudaMemcpyDeviceToHost,
                            stream_),
          "cudaMemcpy2DAsync (read weights)");
  }
  synchronize();
}

std::unique_ptr<buffer> cuda_backend::make_vector(const float* host, size_t count) {
  device_guard guard(device_);
  auto b = std::make_unique<device_buffer>(device_, stream_, sizeof(float) * count);
  if (count > 0) {
    check(cudaMemcpyAsync(b->data(), host, sizeof(float) * count, cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync (vector)");
  }
  synchronize();
  return b;
}

std::unique_ptr<kv_storage> cuda_backend::make_kv(const kv_layout& layout) {
  if (layout.element != dtype::f32 && layout.element != dtype::bf16) {
    throw std::invalid_argument("the cuda backend keeps its KV cache in float32 or bfloat16, not " +
                                std::string(dtype_name(layout.element)));
  }
  return std::make_unique<device_kv>(device_, stream_, layout);
}

void cuda_backend::embed(const matrix& table, const int32_t* host_ids, const tensor& out) {
  device_guard guard(device_);
  const int32_t* ids = staging_->upload_array(host_ids, static_cast<size_t>(out.rows));
  launch_embed(stream_, device_of(table), ids, out);
}

void cuda_backend::matmul(const tensor& x, const matrix& w, const float* bias, const tensor& y) {
  device_guard guard(device_);
  launch_matmul(stream_, x, device_of(w), bias, y);
}

void cuda_backend::grouped_matmul(const matmul_job* jobs, size_t count) {
  device_guard guard(device_);
  grouped_.clear();
  for (size_t j = 0; j < count; ++j)
    grouped_.push_back({jobs[j].x, &device_of(*jobs[j].w), jobs[j].y});
  launch_grouped_matmul(stream_, *staging_, grouped_.data(), grouped_.size());
}

void cuda_backend::rms_norm(const tensor& x, const float* weight, int group, float eps,
                            const tensor& y) {
  device_guard guard(device_);
  launch_rms_norm(stream_, x, weight, group, eps, y);
}

void cuda_backend::rope(const tensor& x, const int32_t* host_positions, int heads, int head_dim,
                        const float* cos_table, const float* sin_table) {
  device_guard guard(device_);
  const int32_t* positions = staging_->upload_array(host_positions, static_cast<size_t>(x.rows));
  launch_rope(stream_, x, positions, heads, head_dim, cos_table, sin_table);
}

device_batch cuda_backend::upload_batch(const attention_batch& batch) {
  const auto tokens = static_cast<size_t>(batch.tokens);
  const auto offsets = static_cast<size_t>(batch.seqs) + 1;
  const auto ids = static_cast<size_t>(batch.block_offsets[batch.seqs]);
  packed_batch_.resize(2 * tokens + offsets + ids);
  int32_t* p = packed_batch_.data();
  std::memcpy(p, batch.positions, sizeof(int32_t) * tokens);
  std::memcpy(p + tokens, batch.token_seq, sizeof(int32_t) * tokens);
  std::memcpy(p + 2 * tokens, batch.block_offsets, sizeof(int32_t) * offsets);
  std::memcpy(p + 2 * tokens + offsets, batch.block_ids, sizeof(int32_t) * ids);
  const int32_t* d = staging_->upload_array(p, packed_batch_.size());
  return {d, d + tokens, d + 2 * tokens, d + 2 * tokens + offsets, batch.tokens, batch.seqs};
}

void cuda_backend::kv_write(kv_storage& kv, int layer, const tensor& k, const tensor& v,
                            const attention_batch& batch) {
  device_guard guard(device_);
  launch_kv_write(stream_, static_cast<device_kv&>(kv), layer, k, v, upload_batch(batch));
}

namespace {

// Where block `block` of `layer` starts in either KV allocation, in elements and in bytes.
struct block_span {
  size_t elements;  ///< in the block, per plane (keys or values)
  size_t offset_bytes;
  size_t bytes;
};

block_span span_of(const kv_layout& l, int layer, int block) {
  if (layer < 0 || layer >= l.layers || block < 0 || block >= l.blocks) {
    throw std::invalid_argument("cuda KV block copy: block " + std::to_string(block) +
                                " of layer " + std::to_string(layer) + " does not exist");
  }
  const size_t elements = static_cast<size_t>(l.block_tokens) * static_cast<size_t>(l.kv_heads) *
                          static_cast<size_t>(l.head_dim);
  const size_t index =
      static_cast<size_t>(layer) * static_cast<size_t>(l.blocks) + static_cast<size_t>(block);
  const size_t size = dtype_size(l.element);
  return {elements, index * elements * size, elements * size};
}

const unsigned char* at(const void* base, size_t offset) {
  return static_cast<const unsigned char*>(base) + offset;
}
unsigned char* at(void* base, size_t offset) {
  return static_cast<unsigned char*>(base) + offset;
}

}  // namespace

// Host copies are float32 whatever the cache's element type (backend.hpp): a bf16 block comes
// to the host as its bits and widens there exactly; a host block narrows there, rounded to
// nearest even as the kernels round, before it goes to the device.
void cuda_backend::read_kv_block(const kv_storage& kv, int layer, int block, float* host_keys,
                                 float* host_values) {
  device_guard guard(device_);
  const auto& d = static_cast<const device_kv&>(kv);
  const block_span s = span_of(kv.layout(), layer, block);
  const bool narrow = kv.layout().element == dtype::bf16;
  const bool both = !kv.layout().values_alias_keys;
  std::vector<uint16_t> bits(narrow ? s.elements * (both ? 2 : 1) : 0);
  void* key_dst = narrow ? static_cast<void*>(bits.data()) : host_keys;
  void* value_dst = narrow ? static_cast<void*>(bits.data() + s.elements) : host_values;
  check(cudaMemcpyAsync(key_dst, at(d.keys(), s.offset_bytes), s.bytes, cudaMemcpyDeviceToHost,
                        stream_),
        "cudaMemcpyAsync (KV block keys)");
  if (both) {
    check(cudaMemcpyAsync(value_dst, at(d.values(), s.offset_bytes), s.bytes,
                          cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync (KV block values)");
  }
  synchronize();
  for (size_t i = 0; narrow && i < s.elements; ++i) {
    host_keys[i] = bf16_to_f32(bits[i]);
    if (both) host_values[i] = bf16_to_f32(bits[s.elements + i]);
  }
}

void cuda_backend::write_kv_block(kv_storage& kv, int layer, int block, const float* host_keys,
                                  const float* host_values) {
  device_guard guard(device_);
  auto& d = static_cast<device_kv&>(kv);
  const block_span s = span_of(kv.layout(), layer, block);
  const bool narrow = kv.layout().element == dtype::bf16;
  const bool both = !kv.layout().values_alias_keys;
  std::vector<uint16_t> bits(narrow ? s.elements * (both ? 2 : 1) : 0);
  if (narrow) {
    for (size_t i = 0; i < s.elements; ++i)
      bits[i] = f32_to_bf16(host_keys[i]);
    for (size_t i = 0; both && i < s.elements; ++i)
      bits[s.elements + i] = f32_to_bf16(host_values[i]);
  }
  const void* key_src = narrow ? static_cast<const void*>(bits.data()) : host_keys;
  const void* value_src = narrow ? static_cast<const void*>(bits.data() + s.elements) : host_values;
  check(cudaMemcpyAsync(at(d.keys(), s.offset_bytes), key_src, s.bytes, cudaMemcpyHostToDevice,
                        stream_),
        "cudaMemcpyAsync (KV block keys)");
  if (both) {
    check(cudaMemcpyAsync(at(d.values(), s.offset_bytes), value_src, s.bytes,
                          cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync (KV block values)");
  }
  // The host arrays (and `bits`) may be reused as soon as this returns.
  synchronize();
}

void cuda_backend::attention(const tensor& q, const kv_storage& kv, int layer,
                             const attention_batch& batch, int heads, float scale, int window,
                             const tensor& out) {
  device_guard guard(device_);
  launch_attention(stream_, q, static_cast<const device_kv&>(kv), layer, upload_batch(batch), heads,
                   scale, window, out);
}

void cuda_backend::silu_mul(const tensor& gate_up, const tensor& out) {
  device_guard guard(device_);
  launch_silu_mul(stream_, gate_up, out);
}

void cuda_backend::add(const tensor& x, const tensor& y) {
  device_guard guard(device_);
  launch_add(stream_, x, y);
}

void cuda_backend::clamp(const tensor& x, float limit) {
  device_guard guard(device_);
  launch_clamp(stream_, x, limit);
}

void cuda_backend::gather_rows(const tensor& src, const int32_t* host_rows, const tensor& dst) {
  device_guard guard(device_);
  const int32_t* rows = staging_->upload_array(host_rows, static_cast<size_t>(dst.rows));
  launch_gather_rows(stream_, src, rows, dst);
}

void cuda_backend::scatter_rows(const tensor& src, const int32_t* host_rows, const tensor& dst) {
  device_guard guard(device_);
  const int32_t* rows = staging_->upload_array(host_rows, static_cast<size_t>(src.rows));
  launch_scatter_rows(stream_, src, rows, dst);
}

void* cuda_backend::result_scratch(size_t bytes) {
  if (!results_ || results_->bytes() < bytes) {
    results_ = std::make_unique<device_buffer>(device_, stream_, bytes);
  }
  return results_->data();
}

void cuda_backend::router_topk(const tensor& logits, const router_spec& spec, int32_t* host_experts,
                               float* host_weights) {
  device_guard guard(device_);
  const size_t slots = static_cast<size_t>(logits.rows) * static_cast<size_t>(spec.top_k);
  if (slots == 0) return;
  auto* experts = static_cast<int32_t*>(result_scratch(slots * (sizeof(int32_t) + sizeof(float))));
  auto* weights = reinterpret_cast<float*>(experts + slots);
  if (spec.sigmoid) {
    sigmoid_router device_spec;
    device_spec.top_k = spec.top_k;
    device_spec.normalize = spec.normalize;
    device_spec.bias =
        spec.host_bias ? staging_->upload_array(spec.host_bias, static_cast<size_t>(logits.cols))
                       : nullptr;
    device_spec.groups = spec.groups;
    device_spec.top_groups = spec.top_groups;
    device_spec.scale = spec.scale;
    launch_router_sigmoid_topk(stream_, logits, device_spec, experts, weights);
  } else {
    launch_router_topk(stream_, logits, spec.top_k, spec.normalize, experts, weights);
  }
  check(cudaMemcpyAsync(host_experts, experts, sizeof(int32_t) * slots, cudaMemcpyDeviceToHost,
                        stream_),
        "cudaMemcpyAsync (router experts)");
  check(cudaMemcpyAsync(host_weights, weights, sizeof(float) * slots, cudaMemcpyDeviceToHost,
                        stream_),
        "cudaMemcpyAsync (router weights)");
  synchronize();
}

void cuda_backend::combine(const tensor& x, const tensor& y, const float* host_weights, int k,
                           const tensor* shared, const tensor* shared_gate) {
  device_guard guard(device_);
  const size_t slots = static_cast<size_t>(x.rows) * static_cast<size_t>(k);
  const float* weights = staging_->upload_array(host_weights, slots);
  launch_combine(stream_, x, y, weights, k, shared, shared_gate);
}

void cuda_backend::synchronize() {
  device_guard guard(device_);
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

}  // namespace brigade::gpu::cuda
