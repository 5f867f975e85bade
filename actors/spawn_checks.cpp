#include "actors/spawn_checks.hpp"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "model/checkpoint.hpp"
#include "model/kv_layout.hpp"

namespace brigade::actors {
namespace {

// The first failure of a chain of checks, each naming the field it is about.
class checker {
 public:
  explicit checker(std::string role) : role_(std::move(role)) {}

  checker& in_range(const char* field, int64_t value, int64_t lo, int64_t hi) {
    if (failed() || (value >= lo && value <= hi)) return *this;
    return fail(std::string(field) + " is " + std::to_string(value) + ", not in [" +
                std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  checker& ok(const status& s) {
    if (failed() || s.ok()) return *this;
    return fail(s.err().message);
  }
  status result() const {
    if (!failed()) return ok_status();
    return error(errc::invalid_argument, "cannot spawn " + role_ + ": " + why_);
  }

 private:
  bool failed() const { return !why_.empty(); }
  checker& fail(std::string why) {
    why_ = std::move(why);
    return *this;
  }
  std::string role_;
  std::string why_;
};

checker& common(checker& c, int block_tokens, int kv_tokens, int64_t stall_timeout_ms) {
  return c.in_range("block_tokens", block_tokens, 1, 4096)
      .in_range("kv_tokens", kv_tokens, 1, 1 << 28)
      .in_range("stall_timeout_ms", stall_timeout_ms, 0, int64_t{24} * 3600 * 1000);
}

status check_kv_dtype(const std::string& name) {
  auto parsed = model::parse_kv_dtype(name, "kv_dtype");
  return parsed.ok() ? ok_status() : status(parsed.err());
}

}  // namespace

uint64_t kv_storage_bytes(const model::model_config& model, int kv_tokens, int block_tokens,
                          gpu::dtype element) {
  if (kv_tokens <= 0 || block_tokens <= 0) return 0;
  const auto blocks = static_cast<uint64_t>((kv_tokens + block_tokens - 1) / block_tokens);
  const uint64_t per_token = model.kv_bytes_per_token(gpu::dtype_size(element));
  return blocks * static_cast<uint64_t>(block_tokens) * per_token;
}

size_t checkpoint_element_bytes(const std::string& dir) {
  auto opened = model::checkpoint::open(dir);
  if (!opened) return 4;
  const std::string type = opened.value()->main_dtype();
  return type == "BF16" || type == "F16" ? 2 : 4;
}

uint64_t expert_weight_bytes(const model::model_config& model, size_t element_bytes) {
  return uint64_t{3} * static_cast<uint64_t>(model.hidden_size) *
         static_cast<uint64_t>(model.expert_intermediate) * element_bytes;
}

uint64_t dense_weight_bytes(const model::model_config& model, size_t element_bytes) {
  const double all = model.total_params() * static_cast<double>(element_bytes);
  const double experts = static_cast<double>(model.moe_layers().size()) * model.num_experts *
                         static_cast<double>(expert_weight_bytes(model, element_bytes));
  return all > experts ? static_cast<uint64_t>(all - experts) : 0;
}

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

status check_kv_fits(uint64_t bytes, const std::string& what) {
  const uint64_t memory = physical_memory_bytes();
  if (memory == 0 || bytes <= memory) return ok_status();
  auto gib = [](uint64_t b) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", static_cast<double>(b) / double(uint64_t{1} << 30));
    return std::string(text);
  };
  return error(errc::resource_exhausted, what + " needs " + gib(bytes) +
                                             " GiB, more than this machine's " + gib(memory) +
                                             " GiB of memory: lower kv_tokens");
}

status check_spawn(const model::model_config& model, const expert_shard_config& config) {
  checker c(config.name);
  c.in_range("sample_interval_steps", config.sample_interval_steps, 1, int64_t{1} << 40)
      .in_range("copy_interval_ms", config.copy_interval_ms, 0, 60 * 1000);
  for (const auto& a : config.plan.slots) {
    const bool exists = a.layer >= 0 && a.layer < model.num_layers && model.is_moe_layer(a.layer) &&
                        a.expert >= 0 && a.expert < model.num_experts;
    if (!exists) {
      c.ok(error(errc::invalid_argument, "its plan places expert " + std::to_string(a.expert) +
                                             " of layer " + std::to_string(a.layer) +
                                             ", which the model does not have"));
      break;
    }
  }
  return c.result();
}

status check_spawn(const model::model_config& model, const decode_worker_config& config,
                   const shard_set& shards) {
  checker c(config.name);
  common(c, config.block_tokens, config.kv_tokens, config.stall_timeout_ms)
      .in_range("max_running", config.max_running, 1, 4096)
      .in_range("speculation.max_draft", config.speculation.max_draft, 0, 64)
      .in_range("speculation.draft", static_cast<int64_t>(config.speculation.draft), 0, 2)
      .ok(check_shards(shards, model))
      .ok(check_kv_dtype(config.kv_dtype))
      .ok(check_kv_fits(kv_storage_bytes(model, config.kv_tokens, config.block_tokens,
                                         model::kv_element(config.kv_dtype)),
                        "KV storage for kv_tokens " + std::to_string(config.kv_tokens)));
  return c.result();
}

status check_spawn(const model::model_config& model, const prefill_worker_config& config,
                   const shard_set& shards) {
  checker c(config.name);
  common(c, config.block_tokens, config.kv_tokens, config.stall_timeout_ms)
      .in_range("max_step_tokens", config.max_step_tokens, 1, 1 << 20)
      .in_range("max_queue", config.max_queue, 0, 1 << 20)
      .ok(check_shards(shards, model))
      .ok(check_kv_dtype(config.kv_dtype))
      .ok(check_kv_fits(kv_storage_bytes(model, config.kv_tokens, config.block_tokens,
                                         model::kv_element(config.kv_dtype)),
                        "KV storage for kv_tokens " + std::to_string(config.kv_tokens)));
  return c.result();
}

status check_draft(const model_context& ctx, const decode_worker_config& config) {
  const model::speculation_options& o = config.speculation;
  if (!o.enabled() || o.draft != model::draft_kind::model) return ok_status();
  checker c(config.name);
  if (o.draft_model.empty()) {
    return c
        .ok(error(errc::invalid_argument,
                  "speculation.draft_model is empty: a draft model "
                  "source needs the draft's directory"))
        .result();
  }
  auto loaded = ctx.draft(o.draft_model);
  if (!loaded) {
    c.ok(error(loaded.err().code, "speculation.draft_model: " + loaded.err().message));
  }
  return c.result();
}

}  // namespace brigade::actors
