#include "actors/prefill_routing.hpp"

#include <algorithm>

#include "kvcache/block_hash.hpp"

namespace brigade::actors {

prefill_routing::prefill_routing(int workers, int block_tokens,
                                 std::shared_ptr<const kvcache::block_hasher> hasher,
                                 double balance_slack)
    : block_tokens_(block_tokens),
      hasher_(std::move(hasher)),
      index_(static_cast<size_t>(workers)),
      policy_(kvcache::choice_policy::cache_aware, balance_slack),
      computed_(static_cast<size_t>(workers), 0) {}

prefill_routing::choice prefill_routing::choose(const std::vector<int32_t>& prompt,
                                                std::string_view salt,
                                                const std::vector<bool>& alive,
                                                const std::vector<int64_t>& queued_tokens,
                                                int preferred) {
  const auto bt = static_cast<size_t>(block_tokens_);
  const auto chain = hasher_->chain(prompt.data(), prompt.size(), bt, salt);
  index_.match(chain, leading_);
  // A worker reuses at most the blocks before the last prompt token (see prefix_cache.hpp).
  const size_t reusable = prompt.empty() ? 0 : (prompt.size() - 1) / bt;
  std::vector<kvcache::worker_load> loads;
  std::vector<int> ids;
  for (size_t w = 0; w < alive.size() && w < computed_.size(); ++w) {
    if (!alive[w]) continue;
    kvcache::worker_load l;
    l.cached_tokens = static_cast<int64_t>(std::min(leading_[w], reusable) * bt);
    l.queued_tokens = static_cast<double>(queued_tokens[w]);
    l.computed_tokens = computed_[w];
    loads.push_back(l);
    ids.push_back(static_cast<int>(w));
  }
  if (loads.empty()) return {};
  const auto mine = std::find(ids.begin(), ids.end(), preferred);
  const size_t picked = mine != ids.end()
                            ? static_cast<size_t>(mine - ids.begin())
                            : policy_.choose(static_cast<int64_t>(prompt.size()), loads);
  choice c;
  c.worker = ids[picked];
  c.uncached_tokens = static_cast<int64_t>(prompt.size()) - loads[picked].cached_tokens;
  computed_[static_cast<size_t>(c.worker)] += c.uncached_tokens;
  return c;
}

size_t prefill_routing::apply(const prefill_cache_report& report) {
  const auto w = static_cast<kvcache::worker_id>(report.worker);
  if (report.stored.size() != report.hashes.size()) return report.hashes.size();
  size_t inconsistent = 0;
  // Runs of one kind go to the index together; the order between runs is kept.
  size_t i = 0;
  while (i < report.hashes.size()) {
    size_t j = i;
    while (j < report.hashes.size() && report.stored[j] == report.stored[i])
      ++j;
    std::vector<kvcache::block_hash> run(report.hashes.begin() + static_cast<std::ptrdiff_t>(i),
                                         report.hashes.begin() + static_cast<std::ptrdiff_t>(j));
    const status s = report.stored[i] ? index_.apply(kvcache::blocks_stored{w, std::move(run)})
                                      : index_.apply(kvcache::blocks_removed{w, std::move(run)});
    if (!s) ++inconsistent;
    i = j;
  }
  return inconsistent;
}

void prefill_routing::correct(int worker, int64_t estimated_tokens, int64_t actual_tokens) {
  if (worker < 0 || static_cast<size_t>(worker) >= computed_.size()) return;
  computed_[static_cast<size_t>(worker)] += actual_tokens - estimated_tokens;
}

void prefill_routing::cleared(int worker) {
  if (worker < 0 || static_cast<size_t>(worker) >= computed_.size()) return;
  (void)index_.apply(kvcache::cache_cleared{static_cast<kvcache::worker_id>(worker)});
}

size_t prefill_routing::cached_blocks(int worker) const {
  return index_.blocks_on(static_cast<kvcache::worker_id>(worker));
}

}  // namespace brigade::actors
