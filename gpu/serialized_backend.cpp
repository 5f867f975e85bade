#include "gpu/serialized_backend.hpp"

#include <string>
#include <utility>
#include <vector>

namespace brigade::gpu {
namespace {

class serialized_backend final : public backend {
 public:
  serialized_backend(std::shared_ptr<backend> inner, std::shared_ptr<std::mutex> lock)
      : inner_(std::move(inner)), lock_(std::move(lock)) {}

  std::string name() const override { return inner_->name(); }

  activation alloc(int rows, int cols) override {
    std::lock_guard<std::mutex> hold(*lock_);
    return inner_->alloc(rows, cols);
  }
  void upload(const float* host, const tensor& dst) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->upload(host, dst);
  }
  void download(const tensor& src, float* host) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->download(src, host);
  }
  std::unique_ptr<matrix> make_matrix(const host_matrix& w) override {
    std::lock_guard<std::mutex> hold(*lock_);
    return inner_->make_matrix(w);
  }
  std::unique_ptr<matrix> make_stacked_matrix(const std::vector<host_matrix>& parts) override {
    std::lock_guard<std::mutex> hold(*lock_);
    return inner_->make_stacked_matrix(parts);
  }
  void read_matrix(const matrix& m, void* host) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->read_matrix(m, host);
  }
  std::unique_ptr<buffer> make_vector(const float* host, size_t count) override {
    std::lock_guard<std::mutex> hold(*lock_);
    return inner_->make_vector(host, count);
  }
  std::unique_ptr<kv_storage> make_kv(const kv_layout& layout) override {
    std::lock_guard<std::mutex> hold(*lock_);
    return inner_->make_kv(layout);
  }
  void embed(const matrix& table, const int32_t* host_ids, const tensor& out) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->embed(table, host_ids, out);
  }
  void matmul(const tensor& x, const matrix& w, const float* bias, const tensor& y) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->matmul(x, w, bias, y);
  }
  void grouped_matmul(const matmul_job* jobs, size_t count) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->grouped_matmul(jobs, count);
  }
  void rms_norm(const tensor& x, const float* weight, int group, float eps,
                const tensor& y) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->rms_norm(x, weight, group, eps, y);
  }
  void rope(const tensor& x, const int32_t* host_positions, int heads, int head_dim,
            const float* cos_table, const float* sin_table) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->rope(x, host_positions, heads, head_dim, cos_table, sin_table);
  }
  void kv_write(kv_storage& kv, int layer, const tensor& k, const tensor& v,
                const attention_batch& batch) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->kv_write(kv, layer, k, v, batch);
  }
  void read_kv_block(const kv_storage& kv, int layer, int block, float* host_keys,
                     float* host_values) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->read_kv_block(kv, layer, block, host_keys, host_values);
  }
  void write_kv_block(kv_storage& kv, int layer, int block, const float* host_keys,
                      const float* host_values) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->write_kv_block(kv, layer, block, host_keys, host_values);
  }
  void attention(const tensor& q, const kv_storage& kv, int layer, const attention_batch& batch,
                 int heads, float scale, int window, const tensor& out) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->attention(q, kv, layer, batch, heads, scale, window, out);
  }
  void silu_mul(const tensor& gate_up, const tensor& out) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->silu_mul(gate_up, out);
  }
  void add(const tensor& x, const tensor& y) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->add(x, y);
  }
  void clamp(const tensor& x, float limit) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->clamp(x, limit);
  }
  void gather_rows(const tensor& src, const int32_t* host_rows, const tensor& dst) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->gather_rows(src, host_rows, dst);
  }
  void scatter_rows(const tensor& src, const int32_t* host_rows, const tensor& dst) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->scatter_rows(src, host_rows, dst);
  }
  void router_topk(const tensor& logits, const router_spec& spec, int32_t* host_experts,
                   float* host_weights) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->router_topk(logits, spec, host_experts, host_weights);
  }
  void combine(const tensor& x, const tensor& y, const float* host_weights, int k,
               const tensor* shared, const tensor* shared_gate) override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->combine(x, y, host_weights, k, shared, shared_gate);
  }
  void synchronize() override {
    std::lock_guard<std::mutex> hold(*lock_);
    inner_->synchronize();
  }

 private:
  std::shared_ptr<backend> inner_;
  std::shared_ptr<std::mutex> lock_;
};

}  // namespace

std::unique_ptr<backend> make_serialized_backend(std::shared_ptr<backend> shared,
                                                 std::shared_ptr<std::mutex> lock) {
  return std::make_unique<serialized_backend>(std::move(shared), std::move(lock));
}

}  // namespace brigade::gpu
