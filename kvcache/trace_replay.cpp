#include "kvcache/trace_replay.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <string>

#include "kvcache/cache_events.hpp"
#include "kvcache/clock.hpp"
#include "kvcache/global_prefix_index.hpp"
#include "kvcache/hash_key.hpp"
#include "kvcache/legacy_hash.hpp"
#include "kvcache/prefix_index.hpp"
#include "kvcache/retention.hpp"

namespace brigade::kvcache {

namespace {

constexpr std::size_t progress_every = 500;
constexpr std::size_t max_replicas = 4096;

/// One request's pass through one prefix index: look up, pin, insert, unpin.
struct cache_pass {
  std::size_t hit_blocks = 0;
  std::vector<block_hash> stored;
  std::vector<removed_block> removed;
};

/// Runs one request through `index` as a worker would; `next_block_id` numbers the physical
/// blocks the replay pretends to allocate.
status serve(prefix_index& index, const std::vector<block_hash>& chain, std::int64_t& next_block_id,
             cache_pass& pass) {
  pass.stored.clear();
  pass.removed.clear();
  pass.hit_blocks = index.match(chain);
  std::vector<std::int64_t> block_ids;
  if (status s = index.acquire(chain, pass.hit_blocks, retention::chat, block_ids); !s) return s;
  std::size_t held = pass.hit_blocks;
  for (std::size_t i = pass.hit_blocks; i < chain.size(); ++i) {
    auto outcome = index.insert(chain, i, next_block_id++, retention::chat, pass.removed);
    if (!outcome) {
      // Every cached block is pinned: the rest of this prompt stays uncached.
      if (outcome.err().code == errc::resource_exhausted) break;
      return outcome.err();
    }
    ++held;
    if (outcome->inserted) pass.stored.push_back(chain[i]);
  }
  return index.release(chain, held);
}

status check_options(const replay_options& o) {
  if (o.replicas == 0 || o.replicas > max_replicas) {
    return error(errc::invalid_argument, "replicas must be 1 to " + std::to_string(max_replicas) +
                                             ", got " + std::to_string(o.replicas));
  }
  if (o.block_size == 0) return error(errc::invalid_argument, "block size must be positive");
  if (o.cache_tokens_per_replica < 0) {
    return error(errc::invalid_argument, "cache tokens per replica must not be negative");
  }
  if (!(o.prefill_tokens_per_s > 0)) {
    return error(errc::invalid_argument, "prefill tokens per second must be positive");
  }
  if (!(o.balance_slack >= 0)) {
    return error(errc::invalid_argument, "balance slack must not be negative");
  }
  return ok_status();
}

class simulation {
 public:
  explicit simulation(const replay_options& options)
      : options_(options),
        chooser_(options.policy, options.balance_slack),
        global_(options.replicas),
        replicas_(options.replicas),
        loads_(options.replicas) {
    const auto blocks_per_replica =
        static_cast<std::size_t>(options.cache_tokens_per_replica) / options.block_size;
    if (options.policy == choice_policy::pooled) {
      pooled_ =
          std::make_unique<prefix_index>(blocks_per_replica * options.replicas, clock_, retention_);
    } else {
      for (auto& r : replicas_) {
        r.index = std::make_unique<prefix_index>(blocks_per_replica, clock_, retention_);
      }
    }
  }

  status step(const replay_request& request);
  replay_report finish(double ideal) const;

 private:
  struct replica {
    std::unique_ptr<prefix_index> index;
    double busy_until_ms = 0;
    double total_wait_ms = 0;
    replica_report report;
  };

  status expire();
  status publish(worker_id w, const cache_pass& pass);
  void account(std::size_t w, const replay_request& request, std::size_t hit_blocks);

  replay_options options_;
  manual_clock clock_;
  retention retention_;
  worker_chooser chooser_;
  global_prefix_index global_;
  std::unique_ptr<prefix_index> pooled_;
  std::vector<replica> replicas_;
  std::vector<worker_load> loads_;
  std::vector<std::size_t> leading_;
  std::int64_t next_block_id_ = 0;
  std::int64_t expired_blocks_ = 0;
  cache_pass pass_;
};

status simulation::expire() {
  if (pooled_) {
    pass_.removed.clear();
    pooled_->expire(pass_.removed);
    expired_blocks_ += static_cast<std::int64_t>(pass_.removed.size());
    return ok_status();
  }
  for (std::size_t w = 0; w < replicas_.size(); ++w) {
    pass_.stored.clear();
    pass_.removed.clear();
    if (replicas_[w].index->expire(pass_.removed) == 0) continue;
    expired_blocks_ += static_cast<std::int64_t>(pass_.removed.size());
    if (status s = publish(static_cast<worker_id>(w), pass_); !s) return s;
  }
  return ok_status();
}

status simulation::publish(worker_id w, const cache_pass& pass) {
  if (!pass.removed.empty()) {
    blocks_removed event{w, {}};
    for (const auto& r : pass.removed)
      event.hashes.push_back(r.hash);
    if (status s = global_.apply(event); !s) return s;
  }
  if (pass.stored.empty()) return ok_status();
  return global_.apply(blocks_stored{w, pass.stored});
}

status simulation::step(const replay_request& request) {
  const double now_ms = static_cast<double>(request.timestamp_ms);
  clock_.set(request.timestamp_ms * 1'000'000);
  if (status s = expire(); !s) return s;

  const auto block = static_cast<std::int64_t>(options_.block_size);
  const std::size_t pooled_hit = pooled_ ? pooled_->match(request.chain) : 0;
  if (!pooled_) global_.match(request.chain, leading_);
  for (std::size_t w = 0; w < replicas_.size(); ++w) {
    const std::size_t cached = pooled_ ? pooled_hit : leading_[w];
    loads_[w].cached_tokens = static_cast<std::int64_t>(cached) * block;
    loads_[w].queued_tokens =
        std::max(0.0, replicas_[w].busy_until_ms - now_ms) * options_.prefill_tokens_per_s / 1e3;
    loads_[w].computed_tokens = replicas_[w].report.computed_tokens;
  }
  const std::size_t w = chooser_.choose(request.prompt_tokens, loads_);

  prefix_index& index = pooled_ ? *pooled_ : *replicas_[w].index;
  if (status s = serve(index, request.chain, next_block_id_, pass_); !s) return s;
  if (!pooled_) {
    // The router's view and the worker's own index must agree on what the worker holds.
    if (pass_.hit_blocks != leading_[w]) {
      return error(errc::internal, "global prefix index says worker " + std::to_string(w) +
                                       " holds " + std::to_string(leading_[w]) +
                                       " leading blocks, its own index " +
                                       std::to_string(pass_.hit_blocks));
    }
    if (status s = publish(static_cast<worker_id>(w), pass_); !s) return s;
  }
  // Under pooled, the pool's evictions are charged to the replica whose request caused them.
  replicas_[w].report.evicted_blocks += static_cast<std::int64_t>(pass_.removed.size());
  account(w, request, pass_.hit_blocks);
  return ok_status();
}

void simulation::account(std::size_t w, const replay_request& request, std::size_t hit_blocks) {
  replica& r = replicas_[w];
  const std::int64_t hit_tokens =
      static_cast<std::int64_t>(hit_blocks) * static_cast<std::int64_t>(options_.block_size);
  const std::int64_t computed = request.prompt_tokens - hit_tokens;
  const double now_ms = static_cast<double>(request.timestamp_ms);
  const double start_ms = std::max(now_ms, r.busy_until_ms);
  r.busy_until_ms = start_ms + static_cast<double>(computed) * 1e3 / options_.prefill_tokens_per_s;
  r.total_wait_ms += start_ms - now_ms;
  r.report.max_queue_wait_s = std::max(r.report.max_queue_wait_s, (start_ms - now_ms) / 1e3);
  r.report.requests += 1;
  r.report.prompt_tokens += request.prompt_tokens;
  r.report.hit_tokens += hit_tokens;
  r.report.computed_tokens += computed;
}

replay_report simulation::finish(double ideal) const {
  replay_report out;
  out.policy = options_.policy;
  out.ideal_hit_rate = ideal;
  out.expired_blocks = expired_blocks_;
  std::int64_t max_load = 0;
  std::int64_t total_load = 0;
  for (const auto& r : replicas_) {
    replica_report rr = r.report;
    if (rr.requests > 0) rr.mean_queue_wait_s = r.total_wait_ms / 1e3 / rr.requests;
    out.replicas.push_back(rr);
    out.requests += rr.requests;
    out.prompt_tokens += rr.prompt_tokens;
    out.hit_tokens += rr.hit_tokens;
    max_load = std::max(max_load, rr.computed_tokens);
    total_load += rr.computed_tokens;
  }
  if (out.prompt_tokens > 0) {
    out.hit_rate = static_cast<double>(out.hit_tokens) / static_cast<double>(out.prompt_tokens);
  }
  const double mean_load = static_cast<double>(total_load) / static_cast<double>(replicas_.size());
  out.max_over_mean_load = mean_load > 0 ? static_cast<double>(max_load) / mean_load : 1.0;
  return out;
}

}  // namespace

std::vector<replay_request> prepare_replay(const std::vector<trace_request>& trace,
                                           std::size_t block_size, replay_hashing hashing) {
  const block_hasher hasher(random_hash_key());
  std::vector<replay_request> out;
  out.reserve(trace.size());
  for (const auto& t : trace) {
    const std::vector<std::int32_t> tokens = synthesize_prompt(t);
    out.push_back(replay_request{t.timestamp_ms, t.input_tokens,
                                 hashing == replay_hashing::keyed
                                     ? hasher.chain(tokens.data(), tokens.size(), block_size)
                                     : legacy::chain(tokens.data(), tokens.size(), block_size)});
  }
  return out;
}

double ideal_hit_rate(const std::vector<replay_request>& requests, std::size_t block_size) {
  manual_clock clk;
  retention policy;
  prefix_index unbounded(std::numeric_limits<std::size_t>::max(), clk, policy);
  std::int64_t next_block_id = 0;
  std::int64_t hit_tokens = 0;
  std::int64_t prompt_tokens = 0;
  cache_pass pass;
  for (const auto& r : requests) {
    clk.set(r.timestamp_ms * 1'000'000);
    // An unbounded index with no evictions cannot fail: every insert has a pinned parent.
    serve(unbounded, r.chain, next_block_id, pass);
    hit_tokens += static_cast<std::int64_t>(pass.hit_blocks * block_size);
    prompt_tokens += r.prompt_tokens;
  }
  return prompt_tokens > 0 ? static_cast<double>(hit_tokens) / static_cast<double>(prompt_tokens)
                           : 0.0;
}

result<replay_report> replay(const std::vector<replay_request>& requests,
                             const replay_options& options, const replay_progress& progress) {
  if (status s = check_options(options); !s) return s.err();
  simulation sim(options);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (status s = sim.step(requests[i]); !s) return s.err();
    if (progress && (i + 1) % progress_every == 0) progress(i + 1, requests.size());
  }
  if (progress) progress(requests.size(), requests.size());
  return sim.finish(ideal_hit_rate(requests, options.block_size));
}

}  // namespace brigade::kvcache
