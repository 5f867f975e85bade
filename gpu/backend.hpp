// The device layer's one interface: every operation the model's forward pass needs.
//
// The CPU backend (gpu/cpu/) is the reference that every test runs on; the CUDA backend
// (gpu/cuda/) implements the same operations on a GPU. All kernels are batch invariant: a row's
// result never depends on which other rows share the call, so any topology that splits or merges
// batches reproduces the single-process output bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/dtype.hpp"
#include "gpu/tensor.hpp"

namespace brigade {
class thread_pool;
}

namespace brigade::gpu {

/// A weight matrix [rows = out features, cols = in features] as it lies in host memory (a mapped
/// checkpoint file): row-major, any alignment.
struct host_matrix {
  const void* data = nullptr;
  dtype type = dtype::f32;
  int rows = 0;
  int cols = 0;
};

/// A weight matrix in the backend's own layout, ready for matmul. y = x * W^T.
class matrix {
 public:
  virtual ~matrix() = default;
  virtual int rows() const = 0;
  virtual int cols() const = 0;
  virtual dtype type() const = 0;
  virtual size_t bytes() const = 0;
};

/// Shape of a paged KV cache: per layer, `blocks` blocks of `block_tokens` token slots, each slot
/// holding the keys and values of every KV head.
struct kv_layout {
  int layers = 0;
  int blocks = 0;
  int block_tokens = 16;
  int kv_heads = 0;
  int head_dim = 0;
  /// The values are the keys (multi-head latent attention caches one row that serves as both):
  /// the storage holds each row once, and attention reads values from the key rows.
  bool values_alias_keys = false;
  /// The element type of the stored keys and values: f32 (exact) or bf16 (half the memory and
  /// reads; written rounded to nearest even, widened exactly to float32 where attention reads
  /// them). f16 is not a KV type.
  dtype element = dtype::f32;

  /// Stored rows per token and layer: 1 when values alias keys, else 2 (keys and values).
  int planes() const { return values_alias_keys ? 1 : 2; }
};

/// The KV cache memory of one worker.
class kv_storage {
 public:
  virtual ~kv_storage() = default;
  virtual const kv_layout& layout() const = 0;
  virtual size_t bytes() const = 0;
};

/// Where each token of a step sits: its position and its sequence's block table (host memory).
struct attention_batch {
  const int32_t* positions = nullptr;      ///< [tokens] position of each token in its sequence.
  const int32_t* token_seq = nullptr;      ///< [tokens] index of each token's sequence.
  const int32_t* block_offsets = nullptr;  ///< [seqs + 1] each sequence's range in block_ids.
  const int32_t* block_ids = nullptr;      ///< Concatenated block tables.
  int tokens = 0;
  int seqs = 0;
};

/// How router probabilities become expert weights.
struct router_spec {
  int top_k = 1;
  /// Renormalise the selected probabilities to sum to one (Qwen's norm_topk_prob; Mixtral always).
  bool normalize = true;
  /// DeepSeek-V3's router: sigmoid scores instead of a softmax; the choice ranks score + bias
  /// (host memory, one per expert; null for none) within the best groups, while the weights are
  /// the unbiased scores (normalised when `normalize`), times `scale`.
  bool sigmoid = false;
  const float* host_bias = nullptr;
  /// Experts in `groups` equal groups; the choice keeps the `top_groups` groups whose two best
  /// biased scores sum highest (ties to the lower group).
  int groups = 1;
  int top_groups = 1;
  float scale = 1.0f;
};

/// One product of backend::grouped_matmul: y = x * W^T.
struct matmul_job {
  tensor x;
  const matrix* w = nullptr;
  tensor y;
};

class backend {
 public:
  virtual ~backend() = default;
  virtual std::string name() const = 0;
  /// The host thread pool a CPU backend's kernels run on; null for a device.
  virtual thread_pool* host_pool() { return nullptr; }

  // Memory.
  virtual activation alloc(int rows, int cols) = 0;
  virtual void upload(const float* host, const tensor& dst) = 0;
  virtual void download(const tensor& src, float* host) = 0;
  virtual std::unique_ptr<matrix> make_matrix(const host_matrix& w) = 0;
  /// One matrix whose rows are those of `parts` stacked in order (e.g. gate and up projections).
  virtual std::unique_ptr<matrix> make_stacked_matrix(const std::vector<host_matrix>& parts) = 0;
  /// Copies `m` back to host memory as make_matrix took it: rows() x cols() elements of type(),
  /// row-major, unpadded. Expert weights leave a shard this way to move to another one.
  virtual void read_matrix(const matrix& m, void* host) = 0;
  virtual std::unique_ptr<buffer> make_vector(const float* host, size_t count) = 0;
  virtual std::unique_ptr<kv_storage> make_kv(const kv_layout& layout) = 0;

  // Operations. Pointers typed int32_t* or named host_* are host memory; float* weights and
  // tensors are backend memory.
  /// out[i] = table row ids[i].
  virtual void embed(const matrix& table, const int32_t* host_ids, const tensor& out) = 0;
  /// y = x * W^T (+ bias), each y element a fixed-order sum over x's columns.
  virtual void matmul(const tensor& x, const matrix& w, const float* bias, const tensor& y) = 0;
  /// matmul() of every job, each y the bits matmul() gives it; the jobs write disjoint outputs
  /// and read none of them. A layer's experts go through here: the CPU backend hands all their
  /// work to its threads at once, where one matmul each paid a hand-off and a join per expert.
  virtual void grouped_matmul(const matmul_job* jobs, size_t count) {
    for (size_t j = 0; j < count; ++j)
      matmul(jobs[j].x, *jobs[j].w, nullptr, jobs[j].y);
  }
  /// RMS norm of each run of `group` columns (group == cols for a whole-row norm).
  virtual void rms_norm(const tensor& x, const float* weight, int group, float eps,
                        const tensor& y) = 0;
  /// Rotary embedding, rotate-half form, in place on `heads` heads of `head_dim` per row.
  /// cos/sin tables are [max_positions, head_dim / 2].
  virtual void rope(const tensor& x, const int32_t* host_positions, int heads, int head_dim,
                    const float* cos_table, const float* sin_table) = 0;
  /// Stores each token's keys and values at its position in its sequence's blocks (only `k`
  /// when the layout's values alias its keys).
  virtual void kv_write(kv_storage& kv, int layer, const tensor& k, const tensor& v,
                        const attention_batch& batch) = 0;
  /// Copies one block of one layer to the host: keys, then values, each
  /// [block_tokens, kv_heads * head_dim]. Used to hand KV blocks from worker to worker. When the
  /// layout's values alias its keys, only the keys are copied and `host_values` is unused. The
  /// host copies are float32 whatever the layout's element type: a bf16 block widens exactly, so
  /// writing it back (to a bf16 storage) restores the same bits.
  virtual void read_kv_block(const kv_storage& kv, int layer, int block, float* host_keys,
                             float* host_values) = 0;
  virtual void write_kv_block(kv_storage& kv, int layer, int block, const float* host_keys,
                              const float* host_values) = 0;
  /// Causal attention of each token over positions [0, its position] of its sequence, or only
  /// the last `window` of them when window > 0 (sliding-window attention).
  virtual void attention(const tensor& q, const kv_storage& kv, int layer,
                         const attention_batch& batch, int heads, float scale, int window,
                         const tensor& out) = 0;
  /// out = silu(gate) * up where gate_up holds [gate | up] in its two column halves.
  virtual void silu_mul(const tensor& gate_up, const tensor& out) = 0;
  /// x += y.
  virtual void add(const tensor& x, const tensor& y) = 0;
  /// x = min(max(x, -limit), limit) (OLMoE's clip_qkv).
  virtual void clamp(const tensor& x, float limit) = 0;
  /// dst row i = src row host_rows[i].
  virtual void gather_rows(const tensor& src, const int32_t* host_rows, const tensor& dst) = 0;
  /// dst row host_rows[i] = src row i.
  virtual void scatter_rows(const tensor& src, const int32_t* host_rows, const tensor& dst) = 0;
  /// Router: top-k experts of each row of `logits` by softmax probability (ties to the lower
  /// index), in descending order, and their weights. Outputs are host arrays [rows * top_k].
  virtual void router_topk(const tensor& logits, const router_spec& spec, int32_t* host_experts,
                           float* host_weights) = 0;
  /// x[t] += sum_j weights[t*k+j] * y[t*k+j] (j in order), plus sigmoid(shared_gate[t]) *
  /// shared[t] when `shared` is non-null (plus shared[t] alone when `shared_gate` is null: a
  /// shared expert without a gate, as DeepSeek-V3's).
  virtual void combine(const tensor& x, const tensor& y, const float* host_weights, int k,
                       const tensor* shared, const tensor* shared_gate) = 0;
  /// Waits for queued work (no-op on the CPU).
  virtual void synchronize() = 0;
};

/// The CPU reference backend, on `pool` (the process-wide thread pool when null).
std::unique_ptr<backend> make_cpu_backend(thread_pool* pool = nullptr);

/// A CPU backend, on `pool`, that stores weight matrices quantized to int8 (a scale per output
/// row) and multiplies them with int8 dot products (gpu/cpu/gemm_int8_vnni.cpp): about 3x the
/// speed of bf16 weights for a few rows, and not exact. It is for a draft model only, whose
/// every token the target verifies (model/draft_model.hpp). Null where the CPU lacks
/// AVX512-VNNI.
std::unique_ptr<backend> make_int8_cpu_backend(thread_pool* pool);

}  // namespace brigade::gpu
