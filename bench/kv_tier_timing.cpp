#include "bench/kv_tier_timing.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>

#include "bench/sample_statistics.hpp"
#include "kvcache/ssd_tier.hpp"
#include "kvcache/tiered_store.hpp"

namespace brigade::bench {

namespace {

using steady = std::chrono::steady_clock;
using kvcache::block_hash;
using kvcache::payload_ptr;

double us_since(steady::time_point t0) {
  return std::chrono::duration<double, std::micro>(steady::now() - t0).count();
}

std::string file_system_of(const std::string& dir) {
  struct statfs fs {};
  if (::statfs(dir.c_str(), &fs) != 0) return "unknown";
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0x01021994UL:
      return "tmpfs";
    case 0xEF53UL:
      return "ext4";
    case 0x58465342UL:
      return "xfs";
    case 0x9123683EUL:
      return "btrfs";
    case 0x794C7630UL:
      return "overlayfs";
    default:
      return "other";
  }
}

/// Drops a file's pages from the page cache; returns the fraction still resident afterwards.
double drop_cached_pages(const std::string& path, std::size_t& resident, std::size_t& pages) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 1;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  struct stat st {};
  ::fstat(fd, &st);
  const auto bytes = static_cast<std::size_t>(st.st_size);
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return 1;
  std::vector<unsigned char> in_core((bytes + page - 1) / page);
  if (::mincore(map, bytes, in_core.data()) == 0) {
    for (unsigned char c : in_core)
      resident += c & 1;
    pages += in_core.size();
  }
  ::munmap(map, bytes);
  return 0;
}

std::vector<payload_ptr> make_blocks(const kvcache::model_fingerprint& model, int count) {
  std::vector<payload_ptr> blocks;
  std::mt19937_64 rng(7);
  for (int i = 0; i < count; ++i) {
    std::vector<std::uint8_t> bytes(model.block_bytes());
    for (std::size_t j = 0; j + 8 <= bytes.size(); j += 8) {
      const std::uint64_t r = rng();
      std::memcpy(bytes.data() + j, &r, 8);
    }
    blocks.push_back(
        *kvcache::block_payload::make(model, block_hash{rng(), rng()}, std::move(bytes)));
  }
  return blocks;
}

/// Host memory: a lookup and a fetch, then the copy a worker makes before uploading the block.
void time_host(const kvcache::model_fingerprint& model, const std::vector<payload_ptr>& blocks,
               const kvcache::clock& clk, const kvcache::retention& policy, tier_timing& out) {
  kvcache::tiered_store_config config;
  config.host_budget_bytes = (blocks.size() + 1) * model.block_bytes();
  auto opened = kvcache::tiered_store::open(config, clk, policy);
  auto store = std::move(*opened);
  for (const auto& b : blocks)
    store->put(b, kvcache::retention::chat);
  std::vector<std::uint8_t> dst(model.block_bytes());
  path_timing fetch{"host: lookup + fetch (shared pointer)", {}, false};
  path_timing copy{"host: lookup + fetch + copy out", {}};
  for (const auto& b : blocks) {
    std::vector<payload_ptr> got;
    const auto t0 = steady::now();
    store->lookup_prefix(model, {b->hash()}, kvcache::retention::chat);
    store->fetch(model, {b->hash()}, kvcache::retention::chat, got);
    fetch.us.push_back(us_since(t0));
    std::memcpy(dst.data(), got.at(0)->bytes().data(), dst.size());
    copy.us.push_back(us_since(t0));
  }
  out.paths.push_back(std::move(fetch));
  out.paths.push_back(std::move(copy));
  // A promoted block stays in host memory, so its bytes land in memory never touched before.
  path_timing fresh{"host: first touch of a new block's memory", {}};
  std::vector<std::vector<std::uint8_t>> kept;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const auto t0 = steady::now();
    kept.emplace_back(model.block_bytes());
    fresh.us.push_back(us_since(t0));
  }
  out.paths.push_back(std::move(fresh));
}

/// The SSD tier alone: writing each block, then reading it back warm and with its pages dropped.
status time_ssd(const kvcache::model_fingerprint& model, const std::vector<payload_ptr>& blocks,
                const kvcache::ssd_tier_config& config, const kvcache::clock& clk,
                const kvcache::retention& policy, tier_timing& out) {
  auto opened = kvcache::ssd_tier::open(config, clk, policy);
  if (!opened.ok()) return opened.err();
  kvcache::ssd_tier& ssd = **opened;
  path_timing write{"ssd: write block (demotion: write, fsync, rename)", {}};
  for (const auto& b : blocks) {
    const auto t0 = steady::now();
    status stored = ssd.put({b, kvcache::retention::chat, clk.now()});
    if (!stored.ok()) return stored;
    write.us.push_back(us_since(t0));
  }
  out.paths.push_back(std::move(write));
  for (const bool cold : {false, true}) {
    std::size_t resident = 0;
    std::size_t pages = 0;
    for (const auto& b : blocks) {
      if (cold) drop_cached_pages(ssd.path_of(b->key()), resident, pages);
    }
    if (cold && pages > 0) {
      out.cold_resident_fraction = static_cast<double>(resident) / static_cast<double>(pages);
    }
    path_timing read{
        cold ? "ssd: read + verify, page cache dropped" : "ssd: read + verify, page cache warm",
        {}};
    // Each block read is dropped at once, so the next read reuses its memory: these rows are the
    // disk, the copy and the checksum. The page faults of fresh memory have their own row.
    for (const auto& b : blocks) {
      const auto t0 = steady::now();
      const kvcache::tier_block got = ssd.get(model, b->hash(), kvcache::retention::chat);
      read.us.push_back(us_since(t0));
      if (got.payload == nullptr) {
        return error(errc::internal, "a block written for the benchmark did not read back");
      }
    }
    out.paths.push_back(std::move(read));
  }
  return ok_status();
}

/// The store end to end on SSD hits with cold pages: the lookup (which only starts the
/// promotion), then waiting for it, fetching and copying the block out.
status time_store_ssd_hits(const kvcache::model_fingerprint& model,
                           const std::vector<payload_ptr>& blocks,
                           const kvcache::ssd_tier_config& ssd_config, const kvcache::clock& clk,
                           const kvcache::retention& policy, tier_timing& out) {
  kvcache::tiered_store_config config;
  config.host_budget_bytes = (blocks.size() + 1) * model.block_bytes();
  config.ssd_dir = ssd_config.dir;
  config.ssd_budget_bytes = ssd_config.budget_bytes;
  auto opened = kvcache::tiered_store::open(config, clk, policy);
  if (!opened.ok()) return opened.err();
  kvcache::tiered_store& store = **opened;
  std::size_t resident = 0;
  std::size_t pages = 0;
  for (const auto& b : blocks)
    drop_cached_pages(store.ssd()->path_of(b->key()), resident, pages);
  std::vector<std::uint8_t> dst(model.block_bytes());
  path_timing lookup{"store: lookup of an SSD block (promotion started)", {}, false};
  path_timing hit{"store: SSD hit promoted, fetched, copied out", {}};
  for (const auto& b : blocks) {
    const auto t0 = steady::now();
    const kvcache::prefix_lookup found =
        store.lookup_prefix(model, {b->hash()}, kvcache::retention::chat);
    lookup.us.push_back(us_since(t0));
    store.wait_for(found.ticket, std::chrono::milliseconds(60000));
    std::vector<payload_ptr> got;
    if (store.fetch(model, {b->hash()}, kvcache::retention::chat, got) != 1) {
      return error(errc::internal, "a promoted block was not in host memory");
    }
    std::memcpy(dst.data(), got[0]->bytes().data(), dst.size());
    hit.us.push_back(us_since(t0));
  }
  out.paths.push_back(std::move(lookup));
  out.paths.push_back(std::move(hit));
  return ok_status();
}

}  // namespace

double path_timing::median_us() const {
  return quantile(us, 0.5);
}
double path_timing::p90_us() const {
  return quantile(us, 0.9);
}

result<tier_timing> measure_tier_timing(const tier_timing_options& options) {
  auto model = kvcache::model_fingerprint::make("bench-kv-tiers", options.shape);
  if (!model.ok()) return model.err();
  const std::string dir = options.dir + "/brigade-kvtiers-" + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return error(errc::io_error, "cannot create " + dir + ": " + ec.message());
  struct remove_dir {
    std::string path;
    ~remove_dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } cleanup{dir};

  tier_timing out;
  out.block_bytes = model->block_bytes();
  out.file_system = file_system_of(dir);
  kvcache::system_clock clk;
  kvcache::retention policy;
  const std::vector<payload_ptr> blocks = make_blocks(*model, options.blocks);
  time_host(*model, blocks, clk, policy, out);

  const kvcache::ssd_tier_config ssd_config{
      dir, (blocks.size() + 4) * (model->block_bytes() + 65536), false};
  status measured = time_ssd(*model, blocks, ssd_config, clk, policy, out);
  if (measured.ok()) measured = time_store_ssd_hits(*model, blocks, ssd_config, clk, policy, out);
  if (!measured.ok()) return measured.err();
  return out;
}

}  // namespace brigade::bench
