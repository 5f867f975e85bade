// A real full file system under the SSD tier: a 1 MiB tmpfs mounted for the test (root only; the
// test says why it skipped otherwise). Demotion must stop with one warning, host memory must keep
// serving, nothing damaged may be read back, and demotion must resume once there is room.
#include <sys/mount.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "kvcache/tiered_store.hpp"
#include "tier_helpers.hpp"

using namespace brigade::kvcache;
using namespace brigade::kvcache::testing;
using brigade::testing::temp_dir;
using std::chrono::milliseconds;
namespace fs = std::filesystem;

namespace {

constexpr milliseconds patience{20000};

/// A small tmpfs mounted on a fresh directory while it lives; mounted() is false (with the
/// reason) when this process may not mount.
class small_tmpfs {
 public:
  small_tmpfs(const std::string& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir_);
    const std::string options = "size=" + size;
    if (::geteuid() != 0) {
      reason_ = "not running as root (mounting a tmpfs needs CAP_SYS_ADMIN)";
    } else if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      reason_ = std::string("mount -t tmpfs -o ") + options + " tmpfs " + dir_ +
                " failed: " + std::strerror(errno);
    } else {
      mounted_ = true;
    }
  }
  ~small_tmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  small_tmpfs(const small_tmpfs&) = delete;
  small_tmpfs& operator=(const small_tmpfs&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string dir_;
  std::string reason_;
  bool mounted_ = false;
};

std::size_t files_ending(const std::string& dir, const std::string& suffix) {
  std::size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string p = e.path().string();
    if (p.size() >= suffix.size() &&
        p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0)
      ++n;
  }
  return n;
}

/// Puts each block and waits for the background thread, so that demotions run in order.
void put_blocks(tiered_store& store, const model_fingerprint& model,
                const std::vector<block_hash>& chain) {
  for (block_hash h : chain) {
    store.put(block_of(model, h), retention::chat);
    REQUIRE(store.wait_idle(patience));
  }
}

}  // namespace

TEST_CASE("disk full: demotion stops with one warning, host blocks stay, nothing bad is read",
          "[disk_full]") {
  temp_dir dir("disk-full");
  const std::string mount_point = dir.file("mnt");
  small_tmpfs tmpfs(mount_point, "1m");
  if (!tmpfs.mounted()) {
    std::printf("SKIPPED disk-full test: %s\n", tmpfs.reason().c_str());
    WARN("disk-full test skipped: " << tmpfs.reason());
    return;
  }
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = large_model();  // 32 KiB blocks: about 28 fit in 1 MiB.
  tiered_store_config config;
  config.host_budget_bytes = 8 * model.block_bytes();
  config.ssd_dir = mount_point;
  config.ssd_budget_bytes = 64 << 20;  // Far more than the disk holds: the disk fills first.
  config.disk_full_retry_ms = milliseconds(60000);
  auto opened = tiered_store::open(config, clk, policy);
  REQUIRE(opened.ok());
  auto store = std::move(*opened);

  const std::vector<block_hash> chain = hashes(80);
  stderr_capture captured(dir.file("stderr.txt"));
  for (block_hash h : chain) {
    store->put(block_of(model, h), retention::chat);
    REQUIRE(store->wait_idle(patience));
  }
  const std::string log = captured.text();
  INFO("log:\n" << log);
  store_stats s = store->stats();
  CHECK(s.demotion_paused);
  CHECK(s.disk_full_pauses == 1);
  CHECK(s.ssd.disk_full_events == 1);  // Demotion stopped after the first refusal.
  CHECK(count_of(log, "SSD tier is full, demotion to SSD paused") == 1);
  CHECK(s.demotions > 10);
  CHECK(s.demotions + s.demotions_dropped == chain.size() - 8);

  // Host memory keeps serving its newest eight blocks.
  const std::vector<block_hash> newest(chain.end() - 8, chain.end());
  std::vector<payload_ptr> out;
  REQUIRE(store->fetch(model, newest, retention::chat, out) == 8);
  for (std::size_t i = 0; i < 8; ++i)
    CHECK(intact(out[i], model, newest[i]));

  // Every block the SSD tier indexes reads back intact, and no partial file was left.
  std::size_t on_ssd = 0;
  for (block_hash h : chain) {
    if (!store->ssd()->contains({model.digest(), h})) continue;
    ++on_ssd;
    CHECK(intact(store->ssd()->get(model, h, retention::chat).payload, model, h));
  }
  CHECK(on_ssd == s.demotions);
  CHECK(files_ending(mount_point, ".tmp") == 0);
  CHECK(files_ending(mount_point, ".kvb") == on_ssd);
  CHECK(store->stats().ssd.corrupt_blocks == 0);
  REQUIRE(store->ssd()->check_invariants().ok());

  // Room again (the operator freed space) and the back-off over: demotion resumes.
  for (std::size_t i = 0; i < 6; ++i)
    store->ssd()->erase({model.digest(), chain[i]});
  clk.advance(std::chrono::seconds(61));
  stderr_capture resumed(dir.file("stderr2.txt"));
  for (block_hash h : hashes(2, 5000)) {
    store->put(block_of(model, h), retention::chat);
    REQUIRE(store->wait_idle(patience));
  }
  CHECK(count_of(resumed.text(), "demotion resumed") == 1);
  s = store->stats();
  CHECK_FALSE(s.demotion_paused);
  CHECK(s.ssd.blocks == on_ssd - 6 + 2);

  // A new store on the full disk serves every block that was written, and nothing else.
  store.reset();
  auto reopened = tiered_store::open(config, clk, policy);
  REQUIRE(reopened.ok());
  auto second = std::move(*reopened);
  CHECK(second->ssd()->open_report().torn_writes == 0);
  for (block_hash h : chain) {
    if (second->ssd()->contains({model.digest(), h})) {
      CHECK(intact(second->ssd()->get(model, h, retention::chat).payload, model, h));
    }
  }
  CHECK(second->stats().ssd.corrupt_blocks == 0);
}

TEST_CASE("a read-only remount pauses demotion with one warning and resumes when writable",
          "[disk_full]") {
  temp_dir dir("disk-readonly");
  const std::string mount_point = dir.file("mnt");
  small_tmpfs tmpfs(mount_point, "4m");
  if (!tmpfs.mounted()) {
    std::printf("SKIPPED read-only remount test: %s\n", tmpfs.reason().c_str());
    WARN("read-only remount test skipped: " << tmpfs.reason());
    return;
  }
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  tiered_store_config config;
  config.host_budget_bytes = 2 * model.block_bytes();
  config.ssd_dir = mount_point;
  config.ssd_budget_bytes = 1 << 20;
  config.disk_full_retry_ms = milliseconds(1000);
  auto opened = tiered_store::open(config, clk, policy);
  REQUIRE(opened.ok());
  auto store = std::move(*opened);
  put_blocks(*store, model, hashes(4));  // 1000 and 1001 reach the disk.
  REQUIRE(store->stats().demotions == 2);

  REQUIRE(::mount("tmpfs", mount_point.c_str(), "tmpfs", MS_REMOUNT | MS_RDONLY, "size=4m") == 0);
  stderr_capture captured(dir.file("stderr.txt"));
  put_blocks(*store, model, hashes(4, 2000));
  const std::string log = captured.text();
  INFO("log:\n" << log);
  store_stats s = store->stats();
  CHECK(s.demotion_paused);
  CHECK(s.write_error_pauses == 1);
  CHECK(s.disk_full_pauses == 0);
  CHECK(count_of(log, "SSD tier cannot write, demotion to SSD paused") == 1);
  CHECK(s.demotions == 2);
  std::vector<payload_ptr> out;
  CHECK(store->fetch(model, hashes(2, 2002), retention::chat, out) == 2);
  // Reads still work on a read-only disk.
  CHECK(intact(store->ssd()->get(model, 1000, retention::chat).payload, model, 1000));

  REQUIRE(::mount("tmpfs", mount_point.c_str(), "tmpfs", MS_REMOUNT, "size=4m") == 0);
  clk.advance(std::chrono::seconds(2));
  put_blocks(*store, model, hashes(2, 3000));
  s = store->stats();
  CHECK_FALSE(s.demotion_paused);
  CHECK(s.demotions == 4);
  REQUIRE(store->ssd()->check_invariants().ok());
}
