// The tiered store: demotion on host eviction, promotion on an SSD hit off the caller's thread,
// damaged blocks recomputed, a restart that keeps the SSD tier, models kept apart, retention per
// scenario across tiers, and the bounded queue.
#include <unistd.h>
#include <catch2/catch.hpp>

#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include "kvcache/tiered_store.hpp"
#include "tier_helpers.hpp"

using namespace brigade::kvcache;
using namespace brigade::kvcache::testing;
using brigade::testing::temp_dir;
using std::chrono::hours;
using std::chrono::milliseconds;
namespace fs = std::filesystem;

namespace {

constexpr milliseconds patience{20000};

/// Holds the store's background thread between jobs, in the store's on_job_done callback (the
/// seam the KV store actor uses to hear of finished jobs): once armed, the thread stops after
/// each job until a pass is released or the gate opens. Declare it before the store it holds.
class gate {
 public:
  /// The callback for tiered_store_config::on_job_done.
  std::function<void(std::uint64_t)> callback() {
    return [this](std::uint64_t) { pass(); };
  }
  void arm() {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = true;
  }
  void wait_entered(int count) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return entered_ >= count; });
  }
  /// Lets the thread run one more job (it stops again after it).
  void release_one() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++released_;
    changed_.notify_all();
  }
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  void pass() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!armed_) return;
    const int me = ++entered_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_ || released_ >= me; });
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  bool armed_ = false;
  int entered_ = 0;
  int released_ = 0;
  bool open_ = false;
};

/// Holds the background thread of `store` (whose on_job_done is `held`'s callback) before any
/// job queued after this returns: it runs a sweep of the SSD tier and stops after it.
void hold(tiered_store& store, gate& held) {
  held.arm();
  store.expire();
  held.wait_entered(1);
}

tiered_store_config config_for(const std::string& dir, std::size_t host_blocks,
                               const model_fingerprint& model) {
  tiered_store_config config;
  config.host_budget_bytes = host_blocks * model.block_bytes();
  config.ssd_dir = dir;
  config.ssd_budget_bytes = 1 << 20;
  return config;
}

std::unique_ptr<tiered_store> open_store(const tiered_store_config& config,
                                         const brigade::kvcache::clock& clk,
                                         const retention& policy) {
  auto store = tiered_store::open(config, clk, policy);
  INFO((store.ok() ? std::string() : store.err().describe()));
  REQUIRE(store.ok());
  return std::move(*store);
}

void put_all(tiered_store& store, const model_fingerprint& model,
             const std::vector<block_hash>& chain, scenario_id scenario = retention::chat) {
  for (block_hash h : chain)
    store.put(block_of(model, h), scenario);
}

/// Fetches `chain` and checks that every block fetched is intact; returns how many.
std::size_t fetch_checked(tiered_store& store, const model_fingerprint& model,
                          const std::vector<block_hash>& chain) {
  std::vector<payload_ptr> out;
  const std::size_t n = store.fetch(model, chain, retention::chat, out);
  REQUIRE(out.size() == n);
  for (std::size_t i = 0; i < n; ++i)
    REQUIRE(intact(out[i], model, chain[i]));
  return n;
}

using where_list = std::vector<tier_location>;
constexpr tier_location H = tier_location::host;
constexpr tier_location S = tier_location::ssd;

}  // namespace

TEST_CASE("store demotes host evictions to SSD and promotes SSD hits back", "[tiered_store]") {
  temp_dir dir("store-tiers");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  auto store = open_store(config_for(dir.path(), 4, model), clk, policy);
  put_all(*store, model, hashes(6));  // 1000..1005: the first two do not fit in host memory.
  REQUIRE(store->wait_idle(patience));
  store_stats s = store->stats();
  CHECK(s.demotions == 2);
  CHECK(s.host.blocks == 4);
  CHECK(s.ssd.blocks == 2);
  CHECK(fetch_checked(*store, model, hashes(6)) == 0);  // Block 1000 is not in host memory.

  prefix_lookup found = store->lookup_prefix(model, hashes(2), retention::chat);
  CHECK(found.where == where_list{S, S});
  CHECK(found.ticket > 0);
  REQUIRE(store->wait_for(found.ticket, patience));
  CHECK(fetch_checked(*store, model, hashes(2)) == 2);
  REQUIRE(store->wait_idle(patience));
  s = store->stats();
  CHECK(s.promotions == 2);
  CHECK(s.demotions == 4);   // Promoting 1000 and 1001 pushed 1002 and 1003 down.
  CHECK(s.ssd.blocks == 4);  // The SSD copies of promoted blocks stay.
  found = store->lookup_prefix(model, hashes(6), retention::chat);
  CHECK(found.where == where_list{H, H, S, S, H, H});
  CHECK(found.host_blocks == 4);
  CHECK(found.ssd_blocks == 2);
  REQUIRE(store->wait_idle(patience));
  CHECK(store->lookup_prefix(model, hashes(8), retention::chat).available() == 6);
  s = store->stats();
  CHECK(s.lookup_misses == 1);
  REQUIRE(s.lookups_by_scenario.size() >= 1);
  CHECK(s.lookups_by_scenario[retention::chat].ssd_hits == s.lookup_ssd_hits);
  REQUIRE(store->host().check_invariants().ok());
  REQUIRE(store->ssd()->check_invariants().ok());
}

TEST_CASE("a lookup returns before the SSD read: promotion runs on the background thread",
          "[tiered_store]") {
  temp_dir dir("store-async");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  gate held;
  tiered_store_config config = config_for(dir.path(), 4, model);
  config.on_job_done = held.callback();
  auto store = open_store(config, clk, policy);
  put_all(*store, model, hashes(6));
  REQUIRE(store->wait_idle(patience));
  hold(*store, held);
  const std::vector<block_hash> chain = {1000, 1001, 1004};
  // The background thread is held, so this returns only because the lookup does not wait for
  // the read.
  prefix_lookup found = store->lookup_prefix(model, chain, retention::chat);
  CHECK(found.where == where_list{S, S, H});
  CHECK(fetch_checked(*store, model, chain) == 0);
  CHECK_FALSE(store->wait_for(found.ticket, milliseconds(50)));
  // A second lookup joins the promotions in flight instead of starting new ones.
  const auto queued = store->stats().queue_depth;
  CHECK(queued >= 2);  // the two SSD blocks' promotions
  const prefix_lookup again = store->lookup_prefix(model, chain, retention::chat);
  CHECK(again.ticket == found.ticket);
  CHECK(store->stats().queue_depth == queued);
  held.open();
  REQUIRE(store->wait_for(found.ticket, patience));
  CHECK(fetch_checked(*store, model, chain) == 3);
}

TEST_CASE("a block waiting for demotion is served from memory and taken back into host",
          "[tiered_store]") {
  temp_dir dir("store-pending");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  gate held;
  tiered_store_config config = config_for(dir.path(), 2, model);
  config.on_job_done = held.callback();
  auto store = open_store(config, clk, policy);
  hold(*store, held);
  put_all(*store, model, {1, 2, 3});  // 1 leaves host memory; its demotion is held.
  CHECK(store->stats().pending_demotions == 1);
  CHECK(store->lookup_prefix(model, {1}, retention::chat).where == where_list{H});
  CHECK(fetch_checked(*store, model, {1, 3}) == 2);
  held.open();
  REQUIRE(store->wait_idle(patience));
  // Block 1 went back to host memory before its file was written; block 2 took its place.
  CHECK_FALSE(store->ssd()->contains({model.digest(), 1}));
  CHECK(store->ssd()->contains({model.digest(), 2}));
  CHECK(store->stats().demotions == 1);
  CHECK(store->stats().pending_demotions == 0);
}

TEST_CASE("SSD corruption through the store: the promotion fails and the block is recomputed",
          "[tiered_store]") {
  temp_dir dir("store-corrupt");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  auto store = open_store(config_for(dir.path(), 4, model), clk, policy);
  put_all(*store, model, hashes(6));
  REQUIRE(store->wait_idle(patience));
  const std::string path = store->ssd()->path_of({model.digest(), 1000});
  REQUIRE_FALSE(path.empty());
  flip_byte(path, 1000);  // In the payload.
  const prefix_lookup found = store->lookup_prefix(model, hashes(2), retention::chat);
  CHECK(found.where == where_list{S, S});  // The index cannot know before reading.
  REQUIRE(store->wait_for(found.ticket, patience));
  CHECK(fetch_checked(*store, model, hashes(2)) == 0);
  store_stats s = store->stats();
  CHECK(s.ssd.corrupt_blocks == 1);
  CHECK(s.promotions_failed == 1);
  CHECK(s.promotions == 1);
  CHECK_FALSE(file_exists(path));
  CHECK(store->lookup_prefix(model, hashes(2), retention::chat).available() == 0);
  // The worker recomputes block 1000 and stores it; pushed down again, it is a valid file.
  store->put(block_of(model, 1000), retention::chat);
  CHECK(fetch_checked(*store, model, hashes(2)) == 2);
  put_all(*store, model, hashes(4, 2000));
  REQUIRE(store->wait_idle(patience));
  REQUIRE(store->ssd()->contains({model.digest(), 1000}));
  CHECK(intact(store->ssd()->get(model, 1000, retention::chat).payload, model, 1000));
  CHECK(store->stats().ssd.corrupt_blocks == 1);
  REQUIRE(store->ssd()->check_invariants().ok());
}

TEST_CASE("KV store restart keeps the SSD tier and ignores a torn last write", "[tiered_store]") {
  temp_dir dir("store-restart");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  std::string torn;
  {
    auto store = open_store(config_for(dir.path(), 2, model), clk, policy);
    put_all(*store, model, hashes(5));  // 1000..1002 go to SSD, 1003 and 1004 stay in host.
    // Shutting down finishes the queued demotions.
  }
  {
    // A write the crash interrupted: a temporary file beside the blocks.
    fs::create_directories(dir.file("ff"));
    torn = dir.file("ff/0000000000000001-00000000000003ff.chat.kvb.tmp");
    std::ofstream(torn) << "half a block";
  }
  auto store = open_store(config_for(dir.path(), 8, model), clk, policy);
  CHECK(store->ssd()->open_report().blocks == 3);
  CHECK(store->ssd()->open_report().torn_writes == 1);
  CHECK_FALSE(file_exists(torn));
  const prefix_lookup found = store->lookup_prefix(model, hashes(5), retention::chat);
  CHECK(found.where == where_list{S, S, S});  // Host memory did not survive; SSD did.
  REQUIRE(store->wait_for(found.ticket, patience));
  CHECK(fetch_checked(*store, model, hashes(5)) == 3);
  CHECK(store->stats().ssd.corrupt_blocks == 0);
}

TEST_CASE("store never serves a block to another model or layout", "[tiered_store]") {
  temp_dir dir("store-models");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto a = small_model("model-a");
  const auto b = small_model("model-b");
  const auto a_f16 = *model_fingerprint::make("model-a", {2, 4, 2, 8, kv_dtype::f16});
  auto store = open_store(config_for(dir.path(), 2, a), clk, policy);
  put_all(*store, a, hashes(4));  // Two in host memory, two on SSD.
  REQUIRE(store->wait_idle(patience));
  CHECK(store->lookup_prefix(b, hashes(4), retention::chat).available() == 0);
  CHECK(store->lookup_prefix(a_f16, hashes(4), retention::chat).available() == 0);
  std::vector<payload_ptr> out;
  CHECK(store->fetch(b, {1002, 1003}, retention::chat, out) == 0);
  CHECK(store->lookup_prefix(a, hashes(4), retention::chat).available() == 4);
}

TEST_CASE("store expires blocks per scenario in both tiers under a manual clock",
          "[tiered_store]") {
  temp_dir dir("store-expiry");
  manual_clock clk(test_epoch_ns);
  retention policy;  // chat 7 days, agent 3 days
  const auto model = small_model();
  auto store = open_store(config_for(dir.path(), 2, model), clk, policy);
  store->put(block_of(model, 1), retention::agent);
  store->put(block_of(model, 2), retention::agent);
  store->put(block_of(model, 3), retention::chat);
  store->put(block_of(model, 4), retention::chat);
  REQUIRE(store->wait_idle(patience));
  REQUIRE(store->stats().ssd.blocks == 2);  // The agent blocks went to SSD.
  clk.advance(hours(3 * 24));
  CHECK(store->lookup_prefix(model, {1}, retention::agent).available() == 0);
  CHECK(store->lookup_prefix(model, {3, 4}, retention::chat).available() == 2);
  store->expire();
  REQUIRE(store->wait_idle(patience));
  store_stats s = store->stats();
  CHECK(s.ssd.blocks == 0);
  CHECK(s.ssd.expirations == 2);
  clk.advance(hours(7 * 24));
  CHECK(store->lookup_prefix(model, {3}, retention::chat).available() == 0);
  store->expire();
  REQUIRE(store->wait_idle(patience));
  s = store->stats();
  CHECK(s.host.blocks == 0);
  CHECK(s.lookups_by_scenario[retention::agent].misses == 1);
  CHECK(s.lookups_by_scenario[retention::chat].host_hits == 2);
}

TEST_CASE("store queue is bounded: demotions beyond it are dropped, promotions refused",
          "[tiered_store]") {
  temp_dir dir("store-queue");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  tiered_store_config config = config_for(dir.path(), 1, model);
  config.queue_capacity = 1;
  std::vector<std::uint64_t> done;
  std::mutex done_mutex;
  gate held;
  const auto hold_after = held.callback();
  config.on_job_done = [&](std::uint64_t ticket) {
    {
      std::lock_guard<std::mutex> lock(done_mutex);
      done.push_back(ticket);
    }
    hold_after(ticket);
  };
  auto store = open_store(config, clk, policy);
  for (block_hash h : {9, 10, 11, 12}) {
    store->put(block_of(model, h), retention::chat);
    REQUIRE(store->wait_idle(patience));
  }
  REQUIRE(store->stats().ssd.blocks == 3);
  hold(*store, held);
  // The promotion of 9 fills the queue of one.
  CHECK(store->lookup_prefix(model, {9}, retention::chat).where == where_list{S});
  CHECK(store->lookup_prefix(model, {10}, retention::chat).available() == 0);
  store->put(block_of(model, 13), retention::chat);  // Evicts 12: no room to demote it.
  store_stats s = store->stats();
  CHECK(s.promotions_refused == 1);
  CHECK(s.demotions_dropped == 1);
  CHECK(s.queue_depth == 1);
  held.open();
  REQUIRE(store->wait_idle(patience));
  CHECK(store->stats().promotions == 1);
  // With the queue free again, 10 is promoted when asked.
  const prefix_lookup again = store->lookup_prefix(model, {10}, retention::chat);
  CHECK(again.where == where_list{S});
  REQUIRE(store->wait_for(again.ticket, patience));
  CHECK(store->stats().promotions == 2);
  std::lock_guard<std::mutex> lock(done_mutex);
  REQUIRE_FALSE(done.empty());
  for (std::size_t i = 1; i < done.size(); ++i)
    CHECK(done[i] == done[i - 1] + 1);
}

TEST_CASE("a host-only store drops what host memory evicts", "[tiered_store]") {
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  tiered_store_config config;
  config.host_budget_bytes = 2 * model.block_bytes();
  auto store = open_store(config, clk, policy);
  CHECK(store->ssd() == nullptr);
  put_all(*store, model, hashes(3));
  CHECK(store->lookup_prefix(model, hashes(3), retention::chat).available() == 0);
  CHECK(store->lookup_prefix(model, {1001, 1002}, retention::chat).where == where_list{H, H});
  CHECK(store->stats().demotions_dropped == 0);
  CHECK_FALSE(store->stats().has_ssd);
}

TEST_CASE("disk full without root: a device that reports ENOSPC pauses demotion once",
          "[tiered_store]") {
  if (::access("/dev/full", W_OK) != 0) {
    std::printf("SKIPPED ENOSPC-device test: /dev/full is not writable here\n");
    WARN("ENOSPC-device test skipped: /dev/full is not writable here");
    return;
  }
  temp_dir dir("store-devfull");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  tiered_store_config config = config_for(dir.path(), 1, model);
  config.disk_full_retry_ms = milliseconds(1000);
  auto store = open_store(config, clk, policy);
  // Block 0x101's temporary file is a link to /dev/full, which fails every write with ENOSPC;
  // the tier's cleanup unlinks the link, never the device.
  char name[64];
  std::snprintf(name, sizeof name, "%016llx-00000000000000000000000000000101.chat.kvb.tmp",
                static_cast<unsigned long long>(model.digest()));
  fs::create_directories(dir.file("01"));
  REQUIRE(::symlink("/dev/full", dir.file(std::string("01/") + name).c_str()) == 0);

  stderr_capture captured(dir.file("stderr.txt"));
  for (block_hash h : {0x101, 0x102, 0x103}) {
    store->put(block_of(model, h), retention::chat);
    REQUIRE(store->wait_idle(patience));
  }
  const std::string log = captured.text();
  INFO("log:\n" << log);
  store_stats s = store->stats();
  CHECK(s.demotion_paused);
  CHECK(s.disk_full_pauses == 1);
  CHECK(s.demotions_dropped == 2);  // 0x101 failed; 0x102 was dropped while paused.
  CHECK(s.ssd.disk_full_events == 1);
  CHECK(count_of(log, "SSD tier is full, demotion to SSD paused") == 1);
  CHECK(fetch_checked(*store, model, {0x103}) == 1);
  CHECK(file_exists("/dev/full"));
  CHECK_FALSE(fs::is_symlink(dir.file(std::string("01/") + name)));

  clk.advance(std::chrono::seconds(2));
  store->put(block_of(model, 0x104), retention::chat);
  REQUIRE(store->wait_idle(patience));
  s = store->stats();
  CHECK_FALSE(s.demotion_paused);
  CHECK(s.demotions == 1);
  CHECK(store->ssd()->contains({model.digest(), 0x103}));
  REQUIRE(store->ssd()->check_invariants().ok());
}
