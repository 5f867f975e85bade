// The CPU reference backend: host memory, kernels on the chosen instruction set, a thread pool.
#include "gpu/cpu/cpu_backend.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

#include "common/thread_pool.hpp"
#include "gpu/cpu/gemm.hpp"
#include "gpu/cpu/gemm_kernels.hpp"
#include "gpu/cpu/kernels.hpp"
#include "gpu/cpu/packed_matrix.hpp"

namespace brigade::gpu {
namespace {

class host_buffer final : public buffer {
 public:
  explicit host_buffer(size_t bytes) : bytes_(bytes) {
    // 64-byte alignment: whole cache lines, and aligned vector loads where the kernels want them.
    const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    data_ = std::aligned_alloc(64, rounded);
    if (!data_) throw std::bad_alloc();
    std::memset(data_, 0, rounded);
  }
  ~host_buffer() override { std::free(data_); }
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

const cpu::packed_matrix& packed(const matrix& m) {
  return static_cast<const cpu::packed_matrix&>(m);
}

class cpu_backend final : public backend {
 public:
  cpu_backend(thread_pool& pool, cpu::kernel_path path, bool int8_weights = false)
      : pool_(pool), path_(path), int8_weights_(int8_weights) {}
  std::string name() const override { return int8_weights_ ? "cpu-int8" : "cpu"; }
  thread_pool* host_pool() override { return &pool_; }

  activation alloc(int rows, int cols) override {
    return activation(std::make_unique<host_buffer>(sizeof(float) * static_cast<size_t>(rows) *
                                                    static_cast<size_t>(cols)),
                      rows, cols);
  }
  void upload(const float* host, const tensor& dst) override {
    for (int r = 0; r < dst.rows; ++r) {
      std::memcpy(dst.row(r), host + static_cast<ptrdiff_t>(r) * dst.cols,
                  sizeof(float) * static_cast<size_t>(dst.cols));
    }
  }
  void download(const tensor& src, float* host) override {
    for (int r = 0; r < src.rows; ++r) {
      std::memcpy(host + static_cast<ptrdiff_t>(r) * src.cols, src.row(r),
                  sizeof(float) * static_cast<size_t>(src.cols));
    }
  }
  std::unique_ptr<matrix> make_matrix(const host_matrix& w) override {
    return make_stacked_matrix({w});
  }
  std::unique_ptr<matrix> make_stacked_matrix(const std::vector<host_matrix>& parts) override {
    return int8_weights_ ? cpu::packed_matrix::pack_int8(parts) : cpu::packed_matrix::pack(parts);
  }
  void read_matrix(const matrix& m, void* host) override { packed(m).unpack(host); }
  std::unique_ptr<buffer> make_vector(const float* host, size_t count) override {
    auto b = std::make_unique<host_buffer>(sizeof(float) * count);
    std::memcpy(b->data(), host, sizeof(float) * count);
    return b;
  }
  std::unique_ptr<kv_storage> make_kv(const kv_layout& layout) override {
    return std::make_unique<cpu::cpu_kv_storage>(layout);
  }

  void embed(const matrix& table, const int32_t* ids, const tensor& out) override {
    for (int r = 0; r < out.rows; ++r)
      packed(table).read_row(ids[r], out.row(r));
  }
  void matmul(const tensor& x, const matrix& w, const float* bias, const tensor& y) override {
    cpu::gemm(x.data, x.stride, x.rows, packed(w), bias, y.data, y.stride, pool_, path_);
  }
  void grouped_matmul(const matmul_job* jobs, size_t count) override {
    std::vector<cpu::gemm_product> products(count);
    for (size_t j = 0; j < count; ++j) {
      const matmul_job& job = jobs[j];
      products[j] = cpu::gemm_product{job.x.data, job.x.stride, job.x.rows,  &packed(*job.w),
                                      nullptr,    job.y.data,   job.y.stride};
    }
    cpu::gemm_grouped(products.data(), count, pool_, path_);
  }
  void rms_norm(const tensor& x, const float* weight, int group, float eps,
                const tensor& y) override {
    cpu::rms_norm(x, weight, group, eps, y, pool_);
  }
  void rope(const tensor& x, const int32_t* positions, int heads, int head_dim,
            const float* cos_table, const float* sin_table) override {
    cpu::rope(x, positions, heads, head_dim, cos_table, sin_table, pool_);
  }
  void kv_write(kv_storage& kv, int layer, const tensor& k, const tensor& v,
                const attention_batch& batch) override {
    cpu::kv_write(static_cast<cpu::cpu_kv_storage&>(kv), layer, k, v, batch);
  }
  void read_kv_block(const kv_storage& kv, int layer, int block, float* keys,
                     float* values) override {
    cpu::read_kv_block(static_cast<const cpu::cpu_kv_storage&>(kv), layer, block, keys, values);
  }
  void write_kv_block(kv_storage& kv, int layer, int block, const float* keys,
                      const float* values) override {
    cpu::write_kv_block(static_cast<cpu::cpu_kv_storage&>(kv), layer, block, keys, values);
  }
  void attention(const tensor& q, const kv_storage& kv, int layer, const attention_batch& batch,
                 int heads, float scale, int window, const tensor& out) override {
    cpu::attention(q, static_cast<const cpu::cpu_kv_storage&>(kv), layer, batch, heads, scale,
                   window, out, pool_);
  }
  void silu_mul(const tensor& gate_up, const tensor& out) override {
    cpu::silu_mul(gate_up, out, pool_);
  }
  void add(const tensor& x, const tensor& y) override { cpu::add(x, y); }
  void clamp(const tensor& x, float limit) override { cpu::clamp(x, limit); }
  void gather_rows(const tensor& src, const int32_t* rows, const tensor& dst) override {
    cpu::gather_rows(src, rows, dst);
  }
  void scatter_rows(const tensor& src, const int32_t* rows, const tensor& dst) override {
    cpu::scatter_rows(src, rows, dst);
  }
  void router_topk(const tensor& logits, const router_spec& spec, int32_t* experts,
                   float* weights) override {
    cpu::router_topk(logits, spec, experts, weights);
  }
  void combine(const tensor& x, const tensor& y, const float* weights, int k, const tensor* shared,
               const tensor* shared_gate) override {
    cpu::combine(x, y, weights, k, shared, shared_gate);
  }
  void synchronize() override {}

 private:
  thread_pool& pool_;
  cpu::kernel_path path_;
  bool int8_weights_;
};

}  // namespace

std::unique_ptr<backend> cpu::make_backend(thread_pool* pool, kernel_path path) {
  const result<kernel_path> usable = choose_kernel_path(kernel_path_name(path));
  if (!usable) throw std::runtime_error(usable.err().message);
  return std::make_unique<cpu_backend>(pool ? *pool : thread_pool::shared(), path);
}

std::unique_ptr<backend> make_cpu_backend(thread_pool* pool) {
  return cpu::make_backend(pool, cpu::process_kernel_path());
}

std::unique_ptr<backend> make_int8_cpu_backend(thread_pool* pool) {
  if (!cpu::int8_vnni_available()) return nullptr;
  return std::make_unique<cpu_backend>(pool ? *pool : thread_pool::shared(),
                                       cpu::process_kernel_path(), true);
}

}  // namespace brigade::gpu
