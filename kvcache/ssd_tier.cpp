#include "kvcache/ssd_tier.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "common/log.hpp"
#include "kvcache/ssd_block_file.hpp"

namespace brigade::kvcache {

namespace {

constexpr std::uint64_t allocation_bytes = 4096;
constexpr const char* block_suffix = ".kvb";
constexpr const char* temp_suffix = ".tmp";

std::uint64_t round_up(std::uint64_t bytes) {
  return (bytes + allocation_bytes - 1) / allocation_bytes * allocation_bytes;
}

bool ends_with(const std::string& s, const char* suffix) {
  const std::size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

std::string hex16(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string subdir_name(const block_hash& hash) {
  char buf[3];
  std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned>(hash.lo & 0xff));
  return buf;
}

bool parse_hex16(const std::string& s, std::size_t at, std::uint64_t& out) {
  if (s.size() < at + 16) return false;
  out = 0;
  for (std::size_t i = at; i < at + 16; ++i) {
    const char c = s[i];
    int digit = 0;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return false;
    }
    out = out << 4 | static_cast<std::uint64_t>(digit);
  }
  return true;
}

/// Parses "<model>-<hash>.<scenario>.kvb": 16 and 32 hex digits.
bool parse_block_name(const std::string& name, block_key& key, std::string& scenario) {
  const std::size_t suffix = std::strlen(block_suffix);
  if (name.size() < 50 + 1 + suffix || name[16] != '-' || name[49] != '.') return false;
  if (!parse_hex16(name, 0, key.model) || !parse_hex16(name, 17, key.hash.hi) ||
      !parse_hex16(name, 33, key.hash.lo)) {
    return false;
  }
  scenario = name.substr(50, name.size() - 50 - suffix);
  return !scenario.empty() && scenario.find('.') == std::string::npos;
}

time_ns mtime_ns(const struct stat& st) {
  return static_cast<time_ns>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

/// The names in directory `path`, or an empty list when it cannot be read.
std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> names;
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  return names;
}

bool is_subdir_name(const std::string& name) {
  auto lower_hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  return name.size() == 2 && lower_hex(name[0]) && lower_hex(name[1]);
}

/// The flock'ed LOCK file of `dir`, or an error saying what is wrong with the directory.
result<int> lock_directory(const std::string& dir) {
  struct stat st {};
  if (dir.empty()) {
    return error(errc::invalid_argument,
                 "the SSD tier has no directory: set the KV cache's ssd directory in the manifest");
  }
  if (::stat(dir.c_str(), &st) != 0) {
    return error(errc::not_found, "SSD tier directory " + dir + " cannot be used: " +
                                      std::strerror(errno) + "; create it (mkdir -p " + dir +
                                      ") or point the manifest at an existing directory");
  }
  if (!S_ISDIR(st.st_mode)) {
    return error(errc::invalid_argument,
                 "SSD tier directory " + dir + " is not a directory: point the manifest at one");
  }
  const std::string lock_path = dir + "/LOCK";
  // Read-only: flock needs no write access, and an open writer would keep the file system from
  // being remounted read-only.
  const int fd = ::open(lock_path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || ::access(dir.c_str(), W_OK | X_OK) != 0) {
    const int err_no = errno;
    if (fd >= 0) ::close(fd);
    return error(errc::io_error, "SSD tier directory " + dir +
                                     " is not writable by this process (" + std::strerror(err_no) +
                                     "): give uid " + std::to_string(::getuid()) +
                                     " write access, or choose another directory");
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err_no = errno;
    ::close(fd);
    return error(errc::unavailable, "SSD tier directory " + dir +
                                        " is in use by another KV store (" + std::strerror(err_no) +
                                        "): give each store its own directory");
  }
  return fd;
}

}  // namespace

bool ssd_tier::key_less::operator()(const std::pair<time_ns, block_key>& a,
                                    const std::pair<time_ns, block_key>& b) const {
  if (a.first != b.first) return a.first < b.first;
  if (a.second.model != b.second.model) return a.second.model < b.second.model;
  return a.second.hash < b.second.hash;
}

ssd_tier::ssd_tier(ssd_tier_config config, const clock& clk, const retention& policy, int lock_fd)
    : config_(std::move(config)), clock_(clk), retention_(policy), lock_fd_(lock_fd) {
  stats_.budget_bytes = config_.budget_bytes;
}

ssd_tier::~ssd_tier() {
  ::close(lock_fd_);
}

result<std::unique_ptr<ssd_tier>> ssd_tier::open(const ssd_tier_config& config, const clock& clk,
                                                 const retention& policy) {
  ssd_tier_config c = config;
  while (c.dir.size() > 1 && c.dir.back() == '/')
    c.dir.pop_back();
  if (c.budget_bytes < allocation_bytes) {
    return error(errc::invalid_argument,
                 "the SSD tier's budget of " + std::to_string(c.budget_bytes) + " bytes at " +
                     c.dir +
                     " holds no block: give it at least a few blocks' worth, or no directory");
  }
  result<int> lock_fd = lock_directory(c.dir);
  if (!lock_fd.ok()) return lock_fd.err();
  std::unique_ptr<ssd_tier> tier(new ssd_tier(std::move(c), clk, policy, *lock_fd));
  status identified = tier->check_identity();
  if (!identified.ok()) return identified.err();
  status scanned = tier->scan();
  if (!scanned.ok()) return scanned.err();
  return tier;
}

std::string ssd_tier::identity_text() const {
  return std::string("brigade-kv-cache format=") + std::to_string(ssd_block_file::format_version) +
         " scheme=" + block_hasher::scheme + " key_id=" + hex16(config_.key_id) + "\n";
}

status ssd_tier::check_identity() {
  const std::string path = config_.dir + "/" + identity_file;
  std::string found;
  {
    std::ifstream in(path);
    if (in) std::getline(in, found, '\0');
  }
  const std::string wanted = identity_text();
  if (found == wanted) return ok_status();
  // Blocks named by another scheme or key can never be hits here, and one read by mistake would
  // be KV of someone else's text: drop them all, before the scan indexes any.
  std::uint64_t dropped = 0;
  for (const std::string& sub : list_dir(config_.dir)) {
    if (!is_subdir_name(sub)) continue;
    for (const std::string& name : list_dir(config_.dir + "/" + sub)) {
      if (!ends_with(name, block_suffix) && !ends_with(name, temp_suffix)) continue;
      if (::unlink((config_.dir + "/" + sub + "/" + name).c_str()) == 0) ++dropped;
    }
  }
  open_report_.foreign = dropped;
  if (dropped > 0 || !found.empty()) {
    std::string why = found.empty() ? "written before block hashes were keyed (no identity file)"
                                    : "written under '" + found.substr(0, found.find('\n')) + "'";
    log::warn("kvcache", "SSD tier " + config_.dir + ": dropped " + std::to_string(dropped) +
                             " blocks " + why + "; this deployment's cache is '" +
                             wanted.substr(0, wanted.size() - 1) +
                             "' (another key means another deployment, or a new join secret)");
  }
  const std::string temp = path + temp_suffix;
  {
    std::ofstream out(temp, std::ios::trunc);
    out << wanted;
    if (!out.flush()) {
      return error(errc::io_error, "SSD tier directory " + config_.dir +
                                       ": cannot write its identity file " + path);
    }
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    return error(errc::io_error, "SSD tier directory " + config_.dir +
                                     ": cannot write its identity file " + path + ": " +
                                     std::strerror(errno));
  }
  return ok_status();
}

status ssd_tier::scan() {
  for (const std::string& sub : list_dir(config_.dir)) {
    if (!is_subdir_name(sub)) continue;
    for (const std::string& name : list_dir(config_.dir + "/" + sub))
      index_scanned(sub, name);
  }
  const std::uint64_t before = stats_.blocks;
  expire();
  std::vector<std::string> victims;
  {
    std::lock_guard<std::mutex> lock(index_mutex_);
    while (stats_.bytes > config_.budget_bytes) {
      auto it = entries_.find(lru_.begin()->second);
      victims.push_back(path_for(it->first, it->second.scenario_name));
      erase_locked(it);
      ++stats_.evictions;
    }
  }
  unlink_files(victims);
  open_report_.removed = before - stats_.blocks;
  open_report_.blocks = stats_.blocks;
  open_report_.bytes = stats_.bytes;
  log::info("kvcache", "SSD tier " + config_.dir + ": " + std::to_string(open_report_.blocks) +
                           " blocks (" + std::to_string(open_report_.bytes) + " bytes) kept; " +
                           std::to_string(open_report_.torn_writes) + " torn writes, " +
                           std::to_string(open_report_.corrupt_files) + " short files, " +
                           std::to_string(open_report_.duplicates) + " duplicates and " +
                           std::to_string(open_report_.removed) +
                           " expired or over-budget blocks removed");
  return ok_status();
}

void ssd_tier::index_scanned(const std::string& subdir, const std::string& name) {
  const std::string path = config_.dir + "/" + subdir + "/" + name;
  if (ends_with(name, temp_suffix)) {
    ::unlink(path.c_str());
    ++open_report_.torn_writes;
    return;
  }
  block_key key;
  std::string scenario_name;
  struct stat st {};
  if (!parse_block_name(name, key, scenario_name) || subdir != subdir_name(key.hash) ||
      ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return;  // Not a file of this tier: leave it alone.
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < ssd_block_file::header_bytes) {
    ::unlink(path.c_str());
    ++open_report_.corrupt_files;
    return;
  }
  std::lock_guard<std::mutex> lock(index_mutex_);
  entry e;
  e.scenario_name = scenario_name;
  result<scenario_id> known = retention_.find(scenario_name);
  e.scenario = known.ok() ? *known : retention::chat;
  e.last_use_ns = mtime_ns(st);
  e.alloc_bytes = round_up(size);
  auto existing = entries_.find(key);
  if (existing != entries_.end()) {
    // A crash between renaming a block under a new scenario and deleting the old name: keep the
    // more recently used copy.
    ++open_report_.duplicates;
    if (existing->second.last_use_ns >= e.last_use_ns) {
      ::unlink(path.c_str());
      return;
    }
    ::unlink(path_for(key, existing->second.scenario_name).c_str());
    erase_locked(existing);
  }
  insert_locked(key, std::move(e));
}

status ssd_tier::put(const tier_block& block) {
  const block_key key = block.payload->key();
  const std::uint64_t alloc_bytes = round_up(ssd_block_file::file_bytes(*block.payload));
  if (alloc_bytes > config_.budget_bytes) {
    return error(errc::invalid_argument,
                 "a KV block file of " + std::to_string(alloc_bytes) +
                     " bytes is larger than the SSD tier's whole budget of " +
                     std::to_string(config_.budget_bytes) + " bytes: raise the budget");
  }
  std::lock_guard<std::mutex> io(io_mutex_);
  bool stored = false;
  {
    std::lock_guard<std::mutex> lock(index_mutex_);
    auto it = entries_.find(key);
    stored = it != entries_.end() && !expired_locked(it->second, clock_.now());
  }
  if (stored) {
    status refreshed = refresh(key, block.scenario, block.last_use_ns);
    if (refreshed.ok() || refreshed.err().code != errc::not_found) return refreshed;
  }
  return write_new(block, alloc_bytes);
}

status ssd_tier::refresh(const block_key& key, scenario_id scenario, time_ns last_use_ns) {
  std::string old_path;
  std::string new_path;
  entry updated;
  {
    std::lock_guard<std::mutex> lock(index_mutex_);
    auto found = entries_.find(key);
    // Another thread may have evicted or dropped it since the caller looked.
    if (found == entries_.end()) return error(errc::not_found, "the block left the SSD tier");
    const entry& e = found->second;
    updated = e;
    updated.scenario = longer_retention(retention_, e.scenario, scenario);
    if (updated.scenario != e.scenario) updated.scenario_name = retention_.name(updated.scenario);
    updated.last_use_ns = std::max(e.last_use_ns, last_use_ns);
    old_path = path_for(key, e.scenario_name);
    new_path = path_for(key, updated.scenario_name);
  }
  status done = ok_status();
  bool moved = new_path == old_path;
  if (!moved && ::rename(old_path.c_str(), new_path.c_str()) != 0) {
    const int err_no = errno;
    done = error(err_no == ENOENT ? errc::not_found : errc::io_error,
                 "cannot rename " + old_path + ": " + std::strerror(err_no));
  } else {
    moved = true;
  }
  if (done.ok()) done = ssd_block_file::set_last_use(new_path, updated.last_use_ns);
  std::lock_guard<std::mutex> lock(index_mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return done;  // Dropped meanwhile: nothing to keep.
  if (!done.ok() && done.err().code == errc::not_found) {
    erase_locked(it);  // The file is gone.
    return done;
  }
  if (!done.ok()) ++stats_.io_errors;
  // The index keeps describing the file where it is: the old entry when the rename failed, the
  // updated one otherwise (its mtime may lag when only that failed). Dropping the entry would
  // leave a file no budget counts and nothing evicts.
  if (moved) {
    erase_locked(it);
    insert_locked(key, std::move(updated));
  }
  return done;
}

status ssd_tier::write_new(const tier_block& block, std::uint64_t alloc_bytes) {
  const block_key key = block.payload->key();
  std::vector<std::string> victims;
  {
    std::lock_guard<std::mutex> lock(index_mutex_);
    auto old = entries_.find(key);
    if (old != entries_.end()) {
      victims.push_back(path_for(key, old->second.scenario_name));
      erase_locked(old);
    }
    while (stats_.bytes + alloc_bytes > config_.budget_bytes) {
      auto it = entries_.find(lru_.begin()->second);
      victims.push_back(path_for(it->first, it->second.scenario_name));
      erase_locked(it);
      ++stats_.evictions;
    }
  }
  unlink_files(victims);
  const std::string scenario_name = retention_.name(block.scenario);
  const std::string path = path_for(key, scenario_name);
  const std::string subdir = config_.dir + "/" + subdir_name(key.hash);
  if (::mkdir(subdir.c_str(), 0755) != 0 && errno != EEXIST) {
    const int err_no = errno;
    std::lock_guard<std::mutex> lock(index_mutex_);
    const bool full = ssd_block_file::is_disk_full(err_no);
    ++(full ? stats_.disk_full_events : stats_.io_errors);
    return error(full ? errc::resource_exhausted : errc::io_error,
                 "cannot create " + subdir + ": " + std::strerror(err_no));
  }
  status written = ssd_block_file::write(path + temp_suffix, path, *block.payload, config_.key_id,
                                         block.last_use_ns, config_.drop_page_cache);
  std::lock_guard<std::mutex> lock(index_mutex_);
  if (!written.ok()) {
    ++(written.err().code == errc::resource_exhausted ? stats_.disk_full_events : stats_.io_errors);
    return written;
  }
  entry e;
  e.scenario_name = scenario_name;
  e.scenario = block.scenario;
  e.last_use_ns = block.last_use_ns;
  e.alloc_bytes = alloc_bytes;
  insert_locked(key, std::move(e));
  ++stats_.insertions;
  return ok_status();
}

tier_block ssd_tier::get(const model_fingerprint& model, const block_hash& hash,
                         scenario_id scenario) {
  const block_key key{model.digest(), hash};
  std::lock_guard<std::mutex> io(io_mutex_);
  std::string path;
  bool expired = false;
  {
    std::lock_guard<std::mutex> lock(index_mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      ++stats_.misses;
      return {};
    }
    path = path_for(key, it->second.scenario_name);
    expired = expired_locked(it->second, clock_.now());
    if (expired) {
      erase_locked(it);
      ++stats_.expirations;
      ++stats_.misses;
    }
  }
  if (expired) {
    unlink_files({path});
    return {};
  }
  result<payload_ptr> read =
      ssd_block_file::read(path, model, hash, config_.key_id, config_.drop_page_cache);
  if (!read.ok()) {
    drop_bad(key, read.err());
    return {};
  }
  const time_ns now = clock_.now();
  refresh(key, scenario, now);
  std::lock_guard<std::mutex> lock(index_mutex_);
  ++stats_.hits;
  auto it = entries_.find(key);
  const scenario_id label = it != entries_.end() ? it->second.scenario : scenario;
  return {std::move(*read), label, now};
}

void ssd_tier::drop_bad(const block_key& key, const error& why) {
  std::string path;
  {
    std::lock_guard<std::mutex> lock(index_mutex_);
    ++stats_.misses;
    if (why.code == errc::bad_format) {
      ++stats_.corrupt_blocks;
    } else {
      ++stats_.io_errors;
    }
    auto it = entries_.find(key);
    if (it == entries_.end()) return;
    path = path_for(key, it->second.scenario_name);
    erase_locked(it);
  }
  unlink_files({path});
  log::warn("kvcache", "SSD tier dropped a KV block that will be recomputed: " + why.message);
}

bool ssd_tier::contains(const block_key& key) const {
  std::lock_guard<std::mutex> lock(index_mutex_);
  auto it = entries_.find(key);
  return it != entries_.end() && !expired_locked(it->second, clock_.now());
}

bool ssd_tier::erase(const block_key& key) {
  std::lock_guard<std::mutex> io(io_mutex_);
  std::string path;
  {
    std::lock_guard<std::mutex> lock(index_mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return false;
    path = path_for(key, it->second.scenario_name);
    erase_locked(it);
  }
  unlink_files({path});
  return true;
}

std::size_t ssd_tier::expire() {
  std::lock_guard<std::mutex> io(io_mutex_);
  std::vector<std::string> paths;
  {
    std::lock_guard<std::mutex> lock(index_mutex_);
    const time_ns now = clock_.now();
    for (auto it = entries_.begin(); it != entries_.end();) {
      auto next = std::next(it);
      if (expired_locked(it->second, now)) {
        paths.push_back(path_for(it->first, it->second.scenario_name));
        erase_locked(it);
        ++stats_.expirations;
      }
      it = next;
    }
  }
  unlink_files(paths);
  return paths.size();
}

tier_stats ssd_tier::stats() const {
  std::lock_guard<std::mutex> lock(index_mutex_);
  return stats_;
}

std::string ssd_tier::path_of(const block_key& key) const {
  std::lock_guard<std::mutex> lock(index_mutex_);
  auto it = entries_.find(key);
  return it == entries_.end() ? std::string() : path_for(key, it->second.scenario_name);
}

std::string ssd_tier::path_for(const block_key& key, const std::string& scenario_name) const {
  return config_.dir + "/" + subdir_name(key.hash) + "/" + hex16(key.model) + "-" +
         to_hex(key.hash) + "." + scenario_name + block_suffix;
}

bool ssd_tier::expired_locked(const entry& e, time_ns now) const {
  return expiry_of(retention_, e.scenario, e.last_use_ns) <= now;
}

void ssd_tier::insert_locked(const block_key& key, entry e) {
  lru_.insert({e.last_use_ns, key});
  stats_.bytes += e.alloc_bytes;
  ++stats_.blocks;
  if (stats_.blocks_by_scenario.size() <= e.scenario) {
    stats_.blocks_by_scenario.resize(static_cast<std::size_t>(e.scenario) + 1, 0);
  }
  ++stats_.blocks_by_scenario[e.scenario];
  entries_.emplace(key, std::move(e));
}

void ssd_tier::erase_locked(entry_map::iterator it) {
  lru_.erase({it->second.last_use_ns, it->first});
  stats_.bytes -= it->second.alloc_bytes;
  --stats_.blocks;
  --stats_.blocks_by_scenario[it->second.scenario];
  entries_.erase(it);
}

void ssd_tier::unlink_files(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      log::warn("kvcache", "cannot delete SSD block file " + path + ": " + std::strerror(errno));
    }
  }
}

status ssd_tier::check_invariants() const {
  std::lock_guard<std::mutex> io(io_mutex_);
  std::lock_guard<std::mutex> lock(index_mutex_);
  if (lru_.size() != entries_.size() || entries_.size() != stats_.blocks) {
    return error(errc::internal, "SSD tier: " + std::to_string(lru_.size()) + " LRU entries, " +
                                     std::to_string(entries_.size()) + " map entries, " +
                                     std::to_string(stats_.blocks) + " counted blocks");
  }
  std::uint64_t bytes = 0;
  for (const auto& [key, e] : entries_) {
    if (lru_.count({e.last_use_ns, key}) != 1) {
      return error(errc::internal, "SSD tier: a block is missing from the LRU order");
    }
    const std::string path = path_for(key, e.scenario_name);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 ||
        round_up(static_cast<std::uint64_t>(st.st_size)) != e.alloc_bytes) {
      return error(errc::internal, "SSD tier: indexed file " + path + " is missing or resized");
    }
    if (mtime_ns(st) != e.last_use_ns) {
      return error(errc::internal, "SSD tier: " + path +
                                       " has a modification time other than "
                                       "its last use");
    }
    bytes += e.alloc_bytes;
  }
  if (bytes != stats_.bytes || bytes > config_.budget_bytes) {
    return error(errc::internal, "SSD tier: counted " + std::to_string(stats_.bytes) +
                                     " bytes, holds " + std::to_string(bytes) + " of a budget of " +
                                     std::to_string(config_.budget_bytes));
  }
  return ok_status();
}

}  // namespace brigade::kvcache
