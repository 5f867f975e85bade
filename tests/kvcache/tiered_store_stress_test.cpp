// Worker threads look up, fetch and store overlapping prefixes while the background thread
// demotes and promotes under small budgets, a full queue, damaged files and a moving clock.
// Invariant: every block fetched is exactly the block asked for. A failure prints its seed;
// rerun just that seed with BRIGADE_TEST_SEED=<seed>.
#include <fcntl.h>
#include <sys/stat.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>

#include "kvcache/tiered_store.hpp"
#include "tier_helpers.hpp"

using namespace brigade::kvcache;
using namespace brigade::kvcache::testing;
using brigade::testing::temp_dir;
using std::chrono::milliseconds;

namespace {

constexpr int worker_threads = 4;
constexpr int ops_per_worker = 2500;
constexpr int conversations = 8;
constexpr int max_chain_blocks = 10;

std::uint64_t test_seed() {
  if (const char* env = std::getenv("BRIGADE_TEST_SEED")) return std::strtoull(env, nullptr, 10);
  return std::random_device{}();
}

std::vector<block_hash> conversation(int id, int blocks) {
  std::vector<block_hash> chain;
  for (int i = 0; i < blocks; ++i)
    chain.push_back(static_cast<std::uint64_t>(id) * 1000 + static_cast<std::uint64_t>(i));
  return chain;
}

/// What the workers saw; checked on the main thread, since Catch2 assertions are not
/// thread-safe.
struct observations {
  std::atomic<std::uint64_t> fetched{0};
  std::atomic<std::uint64_t> wrong_blocks{0};
  std::atomic<std::uint64_t> bad_lookups{0};
  std::atomic<std::uint64_t> waits_timed_out{0};
};

void run_worker(tiered_store& store, const model_fingerprint& model, std::uint64_t seed,
                observations& seen) {
  std::mt19937_64 rng(seed);
  for (int op = 0; op < ops_per_worker; ++op) {
    const int id = static_cast<int>(rng() % conversations);
    const auto chain = conversation(id, 1 + static_cast<int>(rng() % max_chain_blocks));
    const scenario_id scenario = rng() % 4 == 0 ? retention::agent : retention::chat;
    const prefix_lookup found = store.lookup_prefix(model, chain, scenario);
    if (found.available() > chain.size() ||
        found.host_blocks + found.ssd_blocks != found.available()) {
      ++seen.bad_lookups;
    }
    if (found.ticket != 0 && rng() % 2 == 0 && !store.wait_for(found.ticket, milliseconds(20000))) {
      ++seen.waits_timed_out;
    }
    std::vector<payload_ptr> out;
    const std::size_t n = store.fetch(model, chain, scenario, out);
    seen.fetched += n;
    for (std::size_t i = 0; i < n; ++i) {
      if (!intact(out[i], model, chain[i])) ++seen.wrong_blocks;
    }
    // The worker computes what it did not fetch and caches it.
    for (std::size_t i = n; i < chain.size(); ++i)
      store.put(block_of(model, chain[i]), scenario);
    // Computing a prompt takes a while: without a pause, the workers would evict blocks far
    // faster than one disk thread writes them, and nearly every demotion would be dropped.
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 400));
  }
}

/// Damages one byte of a random block file, keeping its modification time: bit rot. Runs in the
/// job hook on the background thread, between jobs, so that no write of the tier is in flight.
void damage_random_block(tiered_store& store, const model_fingerprint& model,
                         std::mt19937_64& rng) {
  const auto chain = conversation(static_cast<int>(rng() % conversations), max_chain_blocks);
  const std::string path = store.ssd()->path_of({model.digest(), chain[rng() % chain.size()]});
  struct stat before {};
  if (path.empty() || ::stat(path.c_str(), &before) != 0) return;
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  if (f == nullptr) return;
  std::fseek(f, 300, SEEK_SET);
  std::fputc(0xff, f);
  std::fputc(0x00, f);
  std::fclose(f);
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ::utimensat(AT_FDCWD, path.c_str(), times, 0);
}

/// Moves the clock by up to two hours now and then, and sweeps expired blocks.
void run_clock(tiered_store& store, manual_clock& clk, std::uint64_t seed,
               const std::atomic<int>& running) {
  std::mt19937_64 rng(seed);
  while (running.load() > 0) {
    if (rng() % 8 == 0) clk.advance(std::chrono::minutes(static_cast<int>(rng() % 120)));
    if (rng() % 16 == 0) store.expire();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace

TEST_CASE("stress: concurrent lookups, fetches and puts against demotion and promotion",
          "[tiered_store][stress]") {
  const std::uint64_t seed = test_seed();
  INFO("seed " << seed << " (rerun with BRIGADE_TEST_SEED=" << seed << ")");
  temp_dir dir("store-stress");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  tiered_store_config config;
  config.host_budget_bytes = 12 * model.block_bytes();
  config.ssd_dir = dir.path();
  config.ssd_budget_bytes = 40 * 4096;
  config.queue_capacity = 16;
  // Between the background thread's jobs (in on_job_done, on that thread), now and then a block
  // file is damaged: reads race with damage as they would with a failing disk.
  std::mt19937_64 damage_rng(seed);
  std::atomic<bool> damaging{true};
  std::atomic<tiered_store*> damaged{nullptr};
  config.on_job_done = [&](std::uint64_t) {
    tiered_store* s = damaged.load();
    if (damaging && s && damage_rng() % 16 == 0) damage_random_block(*s, model, damage_rng);
  };
  auto opened = tiered_store::open(config, clk, policy);
  REQUIRE(opened.ok());
  auto store = std::move(*opened);
  damaged = store.get();
  observations seen;
  std::atomic<int> running{worker_threads};
  std::vector<std::thread> threads;
  for (int t = 0; t < worker_threads; ++t) {
    threads.emplace_back([&, t] {
      run_worker(*store, model, seed + 1 + static_cast<std::uint64_t>(t), seen);
      --running;
    });
  }
  std::thread clock_mover([&] { run_clock(*store, clk, seed, running); });
  for (auto& t : threads)
    t.join();
  clock_mover.join();
  REQUIRE(store->wait_idle(milliseconds(60000)));
  damaging = false;

  const store_stats s = store->stats();
  INFO("fetched " << seen.fetched << ", promotions " << s.promotions << ", demotions "
                  << s.demotions << ", dropped " << s.demotions_dropped << ", corrupt "
                  << s.ssd.corrupt_blocks << ", expired " << s.host.expirations << "+"
                  << s.ssd.expirations);
  CHECK(seen.wrong_blocks == 0);
  CHECK(seen.bad_lookups == 0);
  CHECK(seen.waits_timed_out == 0);
  CHECK(s.pending_demotions == 0);
  CHECK(s.queue_depth == 0);
  CHECK(s.host.bytes <= config.host_budget_bytes);
  CHECK(s.ssd.bytes <= config.ssd_budget_bytes);
  REQUIRE(store->host().check_invariants().ok());
  const auto ssd_ok = store->ssd()->check_invariants();
  INFO((ssd_ok.ok() ? std::string() : ssd_ok.err().message));
  REQUIRE(ssd_ok.ok());
  // The run reached the paths it exists for.
  CHECK(s.promotions > 0);
  CHECK(s.demotions > 0);
  CHECK(s.ssd.evictions > 0);

  // Whatever survived is served intact from either tier.
  for (int id = 0; id < conversations; ++id) {
    const auto chain = conversation(id, max_chain_blocks);
    const prefix_lookup found = store->lookup_prefix(model, chain, retention::chat);
    REQUIRE(store->wait_for(found.ticket, milliseconds(20000)));
    std::vector<payload_ptr> out;
    store->fetch(model, chain, retention::chat, out);
    for (std::size_t i = 0; i < out.size(); ++i)
      CHECK(intact(out[i], model, chain[i]));
  }
}
