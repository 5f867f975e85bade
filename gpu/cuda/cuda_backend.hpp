// The CUDA backend: device memory, one stream, and the kernels of gpu/cuda/*.cu.
//
// Every operation is queued on the backend's stream and returns at once, except those whose
// results land in host memory (download, router_topk, read_kv_block), which wait for the stream.
// Host metadata (positions, block tables, row ids, weights) goes through a pinned staging ring. One
// caller at a time: the worker that owns a backend drives it, since the staging ring and the result
// scratch are per backend (the CPU backend keeps no such state). Included only by files in
// gpu/cuda/; other code uses make_cuda_backend().
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "gpu/backend.hpp"
#include "gpu/cuda/kernels.hpp"
#include "gpu/cuda/staging_ring.hpp"

namespace brigade::gpu::cuda {

class cuda_backend final : public backend {
 public:
  /// Takes ownership of `stream`, created on `device`.
  cuda_backend(int device, std::string device_name, cudaStream_t stream);
  ~cuda_backend() override;
  cuda_backend(const cuda_backend&) = delete;
  cuda_backend& operator=(const cuda_backend&) = delete;

  std::string name() const override {
    return "cuda:" + std::to_string(device_) + " (" + device_name_ + ")";
  }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  activation alloc(int rows, int cols) override;
  void upload(const float* host, const tensor& dst) override;
  void download(const tensor& src, float* host) override;
  std::unique_ptr<matrix> make_matrix(const host_matrix& w) override;
  std::unique_ptr<matrix> make_stacked_matrix(const std::vector<host_matrix>& parts) override;
  void read_matrix(const matrix& m, void* host) override;
  std::unique_ptr<buffer> make_vector(const float* host, size_t count) override;
  std::unique_ptr<kv_storage> make_kv(const kv_layout& layout) override;

  void embed(const matrix& table, const int32_t* host_ids, const tensor& out) override;
  void matmul(const tensor& x, const matrix& w, const float* bias, const tensor& y) override;
  /// Every job in one launch (a layer's experts: one launch where there were one per expert).
  void grouped_matmul(const matmul_job* jobs, size_t count) override;
  void rms_norm(const tensor& x, const float* weight, int group, float eps,
                const tensor& y) override;
  void rope(const tensor& x, const int32_t* host_positions, int heads, int head_dim,
            const float* cos_table, const float* sin_table) override;
  void kv_write(kv_storage& kv, int layer, const tensor& k, const tensor& v,
                const attention_batch& batch) override;
  void read_kv_block(const kv_storage& kv, int layer, int block, float* host_keys,
                     float* host_values) override;
  void write_kv_block(kv_storage& kv, int layer, int block, const float* host_keys,
                      const float* host_values) override;
  void attention(const tensor& q, const kv_storage& kv, int layer, const attention_batch& batch,
                 int heads, float scale, int window, const tensor& out) override;
  void silu_mul(const tensor& gate_up, const tensor& out) override;
  void add(const tensor& x, const tensor& y) override;
  void clamp(const tensor& x, float limit) override;
  void gather_rows(const tensor& src, const int32_t* host_rows, const tensor& dst) override;
  void scatter_rows(const tensor& src, const int32_t* host_rows, const tensor& dst) override;
  void router_topk(const tensor& logits, const router_spec& spec, int32_t* host_experts,
                   float* host_weights) override;
  void combine(const tensor& x, const tensor& y, const float* host_weights, int k,
               const tensor* shared, const tensor* shared_gate) override;
  void synchronize() override;

 private:
  /// The batch's four host arrays, packed into one staging upload.
  device_batch upload_batch(const attention_batch& batch);
  /// Device scratch of at least `bytes` for results that are copied back to the host.
  void* result_scratch(size_t bytes);

  int device_;
  std::string device_name_;
  cudaStream_t stream_;
  std::unique_ptr<staging_ring> staging_;
  std::unique_ptr<buffer> results_;
  std::vector<int32_t> packed_batch_;
  std::vector<grouped_product> grouped_;  // grouped_matmul's products, kept to reuse the space
};

}  // namespace brigade::gpu::cuda
