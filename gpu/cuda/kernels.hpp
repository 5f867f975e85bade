// Launchers of the CUDA kernels behind the backend operations (see gpu/backend.hpp for their
// contracts). Pointers are device memory; every launcher queues work on `stream` and returns.
// Included only by files in gpu/cuda/.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/cuda/device_batch.hpp"
#include "gpu/cuda/device_memory.hpp"
#include "gpu/cuda/sigmoid_router.hpp"
#include "gpu/tensor.hpp"

namespace brigade::gpu::cuda {

/// Runs an empty kernel and waits for it: fails when this binary has no image for the device.
cudaError_t run_probe_kernel(cudaStream_t stream);

/// y = x * W^T (+ bias) in the canonical reduction order (see matmul.cu).
void launch_matmul(cudaStream_t stream, const tensor& x, const device_matrix& w, const float* bias,
                   const tensor& y);

class staging_ring;
/// One product of launch_grouped_matmul: y = x * W^T.
struct grouped_product {
  tensor x;
  const device_matrix* w = nullptr;
  tensor y;
};
/// Every product in one launch (their job table goes up through `staging`), each y the bits
/// launch_matmul gives it; products of differing weight types launch one by one.
void launch_grouped_matmul(cudaStream_t stream, staging_ring& staging,
                           const grouped_product* products, size_t count);

void launch_rms_norm(cudaStream_t stream, const tensor& x, const float* weight, int group,
                     float eps, const tensor& y);
void launch_rope(cudaStream_t stream, const tensor& x, const int32_t* positions, int heads,
                 int head_dim, const float* cos_table, const float* sin_table);
void launch_silu_mul(cudaStream_t stream, const tensor& gate_up, const tensor& out);
void launch_add(cudaStream_t stream, const tensor& x, const tensor& y);
void launch_clamp(cudaStream_t stream, const tensor& x, float limit);
void launch_gather_rows(cudaStream_t stream, const tensor& src, const int32_t* rows,
                        const tensor& dst);
void launch_scatter_rows(cudaStream_t stream, const tensor& src, const int32_t* rows,
                         const tensor& dst);
void launch_embed(cudaStream_t stream, const device_matrix& table, const int32_t* ids,
                  const tensor& out);

/// Writes [rows * top_k] expert ids and weights to device memory.
void launch_router_topk(cudaStream_t stream, const tensor& logits, int top_k, bool normalize,
                        int32_t* experts, float* weights);
/// DeepSeek-V3's router (routing_kernels.cuh): [rows * top_k] ids and weights in device memory.
void launch_router_sigmoid_topk(cudaStream_t stream, const tensor& logits,
                                const sigmoid_router& spec, int32_t* experts, float* weights);
/// `shared_gate` is null without `shared`; with it, null for a shared expert without a gate.
void launch_combine(cudaStream_t stream, const tensor& x, const tensor& y, const float* weights,
                    int k, const tensor* shared, const tensor* shared_gate);

void launch_kv_write(cudaStream_t stream, device_kv& kv, int layer, const tensor& k,
                     const tensor& v, const device_batch& batch);
void launch_attention(cudaStream_t stream, const tensor& q, const device_kv& kv, int layer,
                      const device_batch& batch, int heads, float scale, int window,
                      const tensor& out);

}  // namespace brigade::gpu::cuda
