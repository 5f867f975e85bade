// The SSD tier: round trips through files, LRU under a byte budget, damaged and torn files never
// served, a restart that keeps the blocks, retention across the restart, and bad directories.
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch.hpp>
#include <fstream>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "kvcache/disk_faults.hpp"
#include "kvcache/ssd_block_file.hpp"
#include "kvcache/ssd_tier.hpp"
#include "tier_helpers.hpp"

using namespace brigade::kvcache;
using namespace brigade::kvcache::testing;
using brigade::errc;
using brigade::testing::temp_dir;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t file_alloc_bytes = 4096;  // A small model's block file, rounded up.

std::unique_ptr<ssd_tier> open_tier(const std::string& dir, std::uint64_t budget_bytes,
                                    const brigade::kvcache::clock& clk, const retention& policy,
                                    std::uint64_t key_id = 0x5eed) {
  ssd_tier_config config;
  config.dir = dir;
  config.budget_bytes = budget_bytes;
  config.key_id = key_id;
  auto tier = ssd_tier::open(config, clk, policy);
  INFO((tier.ok() ? std::string() : tier.err().describe()));
  REQUIRE(tier.ok());
  return std::move(*tier);
}

tier_block block_at(const model_fingerprint& model, block_hash hash, time_ns last_use_ns,
                    scenario_id scenario = retention::chat) {
  return {block_of(model, hash), scenario, last_use_ns};
}

/// Every file under `dir` whose name ends with `suffix`.
std::vector<std::string> files_ending(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string p = e.path().string();
    if (p.size() >= suffix.size() &&
        p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(p);
  }
  return out;
}

}  // namespace

TEST_CASE("SSD tier stores a block as a checksummed file and reads it back", "[ssd_tier]") {
  temp_dir dir("ssd-roundtrip");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  auto tier = open_tier(dir.path(), 64 * file_alloc_bytes, clk, policy);
  REQUIRE(tier->put(block_at(model, 0x1234abcd, clk.now(), retention::agent)).ok());
  const std::string path = tier->path_of({model.digest(), 0x1234abcd});
  CHECK(path.find("/cd/") != std::string::npos);
  CHECK(path.find("-0000000000000000000000001234abcd.agent.kvb") != std::string::npos);
  CHECK(fs::file_size(path) ==
        ssd_block_file::header_bytes + model.text().size() + model.block_bytes());
  CHECK(tier->contains({model.digest(), 0x1234abcd}));
  clk.advance(std::chrono::seconds(5));
  tier_block read = tier->get(model, 0x1234abcd, retention::chat);
  CHECK(intact(read.payload, model, 0x1234abcd));
  // The chat use lengthens the retention: the file is renamed, not rewritten.
  CHECK(read.scenario == retention::chat);
  CHECK(read.last_use_ns == clk.now());
  CHECK_FALSE(file_exists(path));
  CHECK(tier->path_of({model.digest(), 0x1234abcd}).find(".chat.kvb") != std::string::npos);
  CHECK(tier->get(model, 99, retention::chat).payload == nullptr);
  const tier_stats s = tier->stats();
  CHECK(s.hits == 1);
  CHECK(s.misses == 1);
  CHECK(s.bytes == file_alloc_bytes);
  REQUIRE(tier->check_invariants().ok());
}

TEST_CASE("SSD tier evicts least recently used files to stay within its byte budget",
          "[ssd_tier]") {
  temp_dir dir("ssd-lru");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  auto tier = open_tier(dir.path(), 3 * file_alloc_bytes, clk, policy);
  for (block_hash h : {1, 2, 3}) {
    REQUIRE(tier->put(block_at(model, h, clk.now())).ok());
    clk.advance(std::chrono::seconds(1));
  }
  const std::string path_2 = tier->path_of({model.digest(), 2});
  REQUIRE(tier->get(model, 1, retention::chat).payload != nullptr);
  REQUIRE(tier->put(block_at(model, 4, clk.now())).ok());
  CHECK_FALSE(tier->contains({model.digest(), 2}));
  CHECK_FALSE(file_exists(path_2));
  for (block_hash h : {1, 3, 4})
    CHECK(tier->contains({model.digest(), h}));
  CHECK(tier->stats().evictions == 1);
  CHECK(tier->stats().bytes == 3 * file_alloc_bytes);
  CHECK(files_ending(dir.path(), ".kvb").size() == 3);
  // Storing a block again only refreshes it.
  clk.advance(std::chrono::seconds(1));
  REQUIRE(tier->put(block_at(model, 3, clk.now())).ok());
  CHECK(tier->stats().insertions == 4);
  REQUIRE(tier->check_invariants().ok());
  auto too_big = *model_fingerprint::make("big", {64, 64, 8, 64, kv_dtype::f32});
  auto refused = tier->put({block_of(too_big, 1), retention::chat, clk.now()});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.err().code == errc::invalid_argument);
}

TEST_CASE("SSD corruption: a flipped byte is a miss, the file is deleted and counted",
          "[ssd_tier]") {
  temp_dir dir("ssd-corrupt");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  auto tier = open_tier(dir.path(), 64 * file_alloc_bytes, clk, policy);
  // A byte in the payload, in the header, and in the fingerprint text each break a block.
  const std::vector<long> offsets = {
      static_cast<long>(ssd_block_file::header_bytes + model.text().size() + 100), 40,
      static_cast<long>(ssd_block_file::header_bytes + 3)};
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    const block_hash h = 500 + i;
    INFO("flipped offset " << offsets[i]);
    REQUIRE(tier->put(block_at(model, h, clk.now())).ok());
    const std::string path = tier->path_of({model.digest(), h});
    flip_byte(path, offsets[i]);
    CHECK(tier->get(model, h, retention::chat).payload == nullptr);
    CHECK_FALSE(file_exists(path));
    CHECK_FALSE(tier->contains({model.digest(), h}));
    CHECK(tier->stats().corrupt_blocks == i + 1);
    // The recomputed block can be stored and served again.
    REQUIRE(tier->put(block_at(model, h, clk.now())).ok());
    CHECK(intact(tier->get(model, h, retention::chat).payload, model, h));
  }
  REQUIRE(tier->check_invariants().ok());
}

TEST_CASE("SSD tier never serves a file holding another model's block", "[ssd_tier]") {
  temp_dir dir("ssd-fingerprint");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto a = small_model("model-a");
  const auto b = small_model("model-b");
  auto tier = open_tier(dir.path(), 64 * file_alloc_bytes, clk, policy);
  REQUIRE(tier->put(block_at(a, 7, clk.now())).ok());
  CHECK_FALSE(tier->contains({b.digest(), 7}));
  CHECK(tier->get(b, 7, retention::chat).payload == nullptr);
  // Model b's file copied over model a's name: its header names model b, so it is dropped.
  REQUIRE(tier->put(block_at(b, 7, clk.now())).ok());
  const std::string a_path = tier->path_of({a.digest(), 7});
  fs::copy_file(tier->path_of({b.digest(), 7}), a_path, fs::copy_options::overwrite_existing);
  CHECK(tier->get(a, 7, retention::chat).payload == nullptr);
  CHECK(tier->stats().corrupt_blocks == 1);
  CHECK(intact(tier->get(b, 7, retention::chat).payload, b, 7));
  REQUIRE(tier->check_invariants().ok());
}

TEST_CASE("SSD tier never serves keys-and-values blocks to a model whose rows are stored once",
          "[ssd_tier][mla]") {
  temp_dir dir("ssd-rows-once");
  manual_clock clk(test_epoch_ns);
  retention policy;
  kv_block_shape shape{2, 4, 1, 8, kv_dtype::f32};
  const auto twice = *model_fingerprint::make("model-a", shape);
  shape.values_alias_keys = true;
  const auto once = *model_fingerprint::make("model-a", shape);
  CHECK(once.block_bytes() * 2 == twice.block_bytes());
  CHECK(once.values_offset(1) == once.keys_offset(1));
  CHECK(once.digest() != twice.digest());
  CHECK_THAT(once.text(), Catch::EndsWith(" rows=once"));
  auto tier = open_tier(dir.path(), 64 * file_alloc_bytes, clk, policy);
  REQUIRE(tier->put(block_at(twice, 7, clk.now())).ok());
  REQUIRE(tier->put(block_at(once, 8, clk.now())).ok());
  CHECK(tier->get(once, 7, retention::chat).payload == nullptr);
  CHECK(intact(tier->get(once, 8, retention::chat).payload, once, 8));
  // A two-plane file copied under the once-stored block's name is caught by its header.
  fs::copy_file(tier->path_of({twice.digest(), 7}), tier->path_of({once.digest(), 8}),
                fs::copy_options::overwrite_existing);
  CHECK(tier->get(once, 8, retention::chat).payload == nullptr);
  REQUIRE(tier->check_invariants().ok());
}

TEST_CASE("SSD tier drops, at open, a cache written under another block-hash key or scheme",
          "[ssd_tier]") {
  temp_dir dir("ssd-identity");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  std::string moved_in;
  {
    auto tier = open_tier(dir.path(), 64 * file_alloc_bytes, clk, policy, 0xaaaa);
    for (std::uint64_t h = 1; h <= 4; ++h)
      REQUIRE(tier->put(block_at(model, h, clk.now())).ok());
    moved_in = dir.file("moved-in.kvb");
    fs::copy_file(tier->path_of({model.digest(), 4}), moved_in);
  }
  {
    // The same key: everything is kept and served.
    auto tier = open_tier(dir.path(), 64 * file_alloc_bytes, clk, policy, 0xaaaa);
    CHECK(tier->open_report().blocks == 4);
    CHECK(tier->open_report().foreign == 0);
    CHECK(intact(tier->get(model, 1, retention::chat).payload, model, 1));
  }
  {
    // Another deployment's key: every block file goes, with a log line saying why.
    stderr_capture captured(dir.file("stderr.txt"));
    auto tier = open_tier(dir.path(), 64 * file_alloc_bytes, clk, policy, 0xbbbb);
    const std::string log = captured.text();
    INFO("log:\n" << log);
    CHECK(tier->open_report().foreign == 4);
    CHECK(tier->open_report().blocks == 0);
    CHECK(files_ending(dir.path(), ".kvb").size() == 1);  // only the copy outside the tier
    CHECK(log.find("dropped 4 blocks written under 'brigade-kv-cache format=2 "
                   "scheme=siphash-2-4-128 key_id=000000000000aaaa'") != std::string::npos);
    CHECK(tier->get(model, 1, retention::chat).payload == nullptr);
    // A file of the old key put back under a name of the new: its header says whose it is.
    REQUIRE(tier->put(block_at(model, 4, clk.now())).ok());
    fs::copy_file(moved_in, tier->path_of({model.digest(), 4}),
                  fs::copy_options::overwrite_existing);
    CHECK(tier->get(model, 4, retention::chat).payload == nullptr);
    CHECK(tier->stats().corrupt_blocks == 1);
    REQUIRE(tier->check_invariants().ok());
  }
  {
    // A directory from before keyed hashes: block files and no IDENTITY.
    auto tier = open_tier(dir.path(), 64 * file_alloc_bytes, clk, policy, 0xbbbb);
    REQUIRE(tier->put(block_at(model, 9, clk.now())).ok());
  }
  fs::remove(dir.file(ssd_tier::identity_file));
  fs::create_directories(dir.file("07"));
  { std::ofstream(dir.file("07/12ccb82df2223bc1-0000000000000007.chat.kvb")) << "old format"; }
  stderr_capture captured(dir.file("stderr2.txt"));
  auto tier = open_tier(dir.path(), 64 * file_alloc_bytes, clk, policy, 0xbbbb);
  const std::string log = captured.text();
  INFO("log:\n" << log);
  CHECK(tier->open_report().foreign == 2);
  CHECK(log.find("written before block hashes were keyed") != std::string::npos);
  CHECK(files_ending(dir.path(), ".kvb").size() == 1);
}

TEST_CASE("SSD restart: a new tier on the same directory finds the blocks in LRU order",
          "[ssd_tier]") {
  temp_dir dir("ssd-restart");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  {
    auto tier = open_tier(dir.path(), 64 * file_alloc_bytes, clk, policy);
    for (std::uint64_t h = 1; h <= 5; ++h) {
      REQUIRE(tier->put(block_at(model, h, clk.now(), h == 5 ? retention::agent : retention::chat))
                  .ok());
      clk.advance(std::chrono::seconds(1));
    }
    REQUIRE(tier->get(model, 1, retention::chat).payload != nullptr);  // 1 is now the newest.
  }
  auto tier = open_tier(dir.path(), 4 * file_alloc_bytes, clk, policy);
  // The smaller budget evicted the least recently used block, 2.
  CHECK(tier->open_report().blocks == 4);
  CHECK(tier->open_report().removed == 1);
  CHECK_FALSE(tier->contains({model.digest(), 2}));
  for (block_hash h : {1, 3, 4, 5})
    CHECK(intact(tier->get(model, h, retention::chat).payload, model, h));
  REQUIRE(tier->check_invariants().ok());
}

TEST_CASE("SSD restart ignores a torn last write: a temporary file and a truncated block",
          "[ssd_tier]") {
  temp_dir dir("ssd-torn");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  std::string torn_temp;
  std::string truncated;
  {
    auto tier = open_tier(dir.path(), 64 * file_alloc_bytes, clk, policy);
    for (std::uint64_t h = 1; h <= 3; ++h)
      REQUIRE(tier->put(block_at(model, h, clk.now())).ok());
    // A crash mid-write leaves the temporary file; one without fsync can leave a short block.
    const std::string path_3 = tier->path_of({model.digest(), 3});
    torn_temp = path_3 + ".tmp";
    fs::copy_file(path_3, torn_temp);
    fs::resize_file(torn_temp, 700);
    truncated = tier->path_of({model.digest(), 2});
    fs::resize_file(truncated, fs::file_size(truncated) - 10);
    const std::string short_file = tier->path_of({model.digest(), 1});
    fs::resize_file(short_file, 20);
  }
  auto tier = open_tier(dir.path(), 64 * file_alloc_bytes, clk, policy);
  CHECK(tier->open_report().torn_writes == 1);
  CHECK(tier->open_report().corrupt_files == 1);  // Shorter than a header.
  CHECK_FALSE(file_exists(torn_temp));
  CHECK_FALSE(tier->contains({model.digest(), 1}));
  CHECK(tier->get(model, 2, retention::chat).payload == nullptr);
  CHECK(tier->stats().corrupt_blocks == 1);
  CHECK_FALSE(file_exists(truncated));
  CHECK(intact(tier->get(model, 3, retention::chat).payload, model, 3));
  REQUIRE(tier->check_invariants().ok());
}

TEST_CASE("SSD retention per scenario survives a restart under a manual clock", "[ssd_tier]") {
  temp_dir dir("ssd-expiry");
  manual_clock clk(test_epoch_ns);
  retention policy;
  REQUIRE(policy.set("batch", std::chrono::hours(1)).ok());
  const auto model = small_model();
  {
    auto tier = open_tier(dir.path(), 64 * file_alloc_bytes, clk, policy);
    REQUIRE(tier->put(block_at(model, 1, clk.now(), *policy.find("batch"))).ok());
    REQUIRE(tier->put(block_at(model, 2, clk.now(), retention::agent)).ok());
    REQUIRE(tier->put(block_at(model, 3, clk.now(), retention::chat)).ok());
  }
  clk.advance(std::chrono::hours(2));
  {
    auto tier = open_tier(dir.path(), 64 * file_alloc_bytes, clk, policy);
    CHECK(tier->open_report().removed == 1);  // The batch block expired while it was closed.
    CHECK(tier->contains({model.digest(), 2}));
    const std::vector<std::uint64_t> by_scenario = tier->stats().blocks_by_scenario;
    REQUIRE(by_scenario.size() >= 2);
    CHECK(by_scenario[retention::chat] == 1);
    CHECK(by_scenario[retention::agent] == 1);
  }
  clk.advance(std::chrono::hours(3 * 24));
  auto tier = open_tier(dir.path(), 64 * file_alloc_bytes, clk, policy);
  CHECK_FALSE(tier->contains({model.digest(), 2}));
  CHECK(tier->contains({model.digest(), 3}));
  clk.advance(std::chrono::hours(4 * 24));
  CHECK(tier->expire() == 1);
  CHECK(tier->stats().blocks == 0);
  CHECK(files_ending(dir.path(), ".kvb").empty());
}

TEST_CASE("SSD tier refuses a missing, plain-file, busy or read-only directory by name",
          "[ssd_tier]") {
  temp_dir dir("ssd-baddir");
  manual_clock clk(test_epoch_ns);
  retention policy;
  ssd_tier_config config;
  config.budget_bytes = 1 << 20;
  config.dir = dir.file("missing");
  auto missing = ssd_tier::open(config, clk, policy);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.err().code == errc::not_found);
  CHECK(missing.err().message.find(config.dir) != std::string::npos);
  CHECK(missing.err().message.find("mkdir -p") != std::string::npos);

  config.dir = dir.file("plain");
  { std::ofstream(config.dir) << "x"; }
  auto plain = ssd_tier::open(config, clk, policy);
  REQUIRE_FALSE(plain.ok());
  CHECK(plain.err().message.find("is not a directory") != std::string::npos);

  config.dir = dir.path();
  auto first = ssd_tier::open(config, clk, policy);
  REQUIRE(first.ok());
  auto second = ssd_tier::open(config, clk, policy);
  REQUIRE_FALSE(second.ok());
  CHECK(second.err().message.find("in use by another KV store") != std::string::npos);

  const std::string ro = dir.file("readonly");
  fs::create_directories(ro);
  if (::mount("tmpfs", ro.c_str(), "tmpfs", MS_RDONLY, "size=64k") != 0) {
    WARN("read-only directory case skipped: mounting a read-only tmpfs needs root ("
         << std::strerror(errno) << ")");
    return;
  }
  config.dir = ro;
  auto readonly = ssd_tier::open(config, clk, policy);
  ::umount2(ro.c_str(), MNT_DETACH);
  REQUIRE_FALSE(readonly.ok());
  CHECK(readonly.err().message.find("is not writable") != std::string::npos);
  CHECK(readonly.err().message.find(ro) != std::string::npos);
}

TEST_CASE("SSD write to a device that reports ENOSPC leaves no file behind", "[ssd_tier]") {
  temp_dir dir("ssd-devfull");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  if (::access("/dev/full", W_OK) != 0) {
    WARN("ENOSPC-device case skipped: /dev/full is not writable here");
    return;
  }
  auto tier = open_tier(dir.path(), 64 * file_alloc_bytes, clk, policy);
  REQUIRE(tier->put(block_at(model, 0x100, clk.now())).ok());
  // The tier writes block 0x200 through <name>.tmp: a link there sends the write to /dev/full,
  // which fails every write with ENOSPC. unlink() removes the link, never the device.
  std::string name_200 = tier->path_of({model.digest(), 0x100});
  name_200.replace(name_200.find("0000000000000100"), 16, "0000000000000200");
  REQUIRE(::symlink("/dev/full", (name_200 + ".tmp").c_str()) == 0);
  auto refused = tier->put(block_at(model, 0x200, clk.now()));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.err().code == errc::resource_exhausted);
  CHECK(refused.err().message.find("full") != std::string::npos);
  CHECK(tier->stats().disk_full_events == 1);
  CHECK_FALSE(tier->contains({model.digest(), 0x200}));
  CHECK_FALSE(file_exists(name_200));
  CHECK_FALSE(fs::is_symlink(name_200 + ".tmp"));
  CHECK(file_exists("/dev/full"));
  CHECK(intact(tier->get(model, 0x100, retention::chat).payload, model, 0x100));
  REQUIRE(tier->check_invariants().ok());
}

TEST_CASE("SSD disk fault points: a full disk refuses writes, a slow one waits, both clear",
          "[ssd_tier][faults]") {
  temp_dir dir("ssd-faults");
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  disk_faults::clear_all();
  auto tier = open_tier(dir.path(), 64 * file_alloc_bytes, clk, policy);
  REQUIRE(tier->put(block_at(model, 0x100, clk.now())).ok());
  REQUIRE(disk_faults::set("full", "full").ok());
  auto refused = tier->put(block_at(model, 0x200, clk.now()));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.err().code == errc::resource_exhausted);
  CHECK_FALSE(tier->contains({model.digest(), 0x200}));
  CHECK(intact(tier->get(model, 0x100, retention::chat).payload, model, 0x100));
  disk_faults::clear("full");
  REQUIRE(disk_faults::set("slow", "slow ms=40").ok());
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(tier->put(block_at(model, 0x300, clk.now())).ok());
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(40));
  disk_faults::clear_all();
  CHECK_FALSE(disk_faults::armed());
  REQUIRE(tier->check_invariants().ok());
  for (const char* spec : {"", "full soon", "slow", "slow ms=x", "melt"}) {
    INFO("spec '" << spec << "'");
    CHECK_FALSE(disk_faults::set("bad", spec).ok());
  }
  CHECK_FALSE(disk_faults::armed());
}

TEST_CASE("an SSD disk fault set for a while ends by itself", "[ssd_tier][faults]") {
  disk_faults::clear_all();
  REQUIRE(disk_faults::set("brief", "full for_ms=40").ok());
  CHECK(disk_faults::current().full);
  std::this_thread::sleep_for(std::chrono::milliseconds(70));
  CHECK_FALSE(disk_faults::current().full);
  CHECK_FALSE(disk_faults::armed());
}
