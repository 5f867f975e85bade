#include "model/checkpoint_identity.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/hex.hpp"
#include "common/log.hpp"
#include "common/progress.hpp"
#include "model/weights_digest_cache.hpp"

namespace brigade::model {
namespace {

using json = nlohmann::json;

// Read in chunks: a checkpoint may be far larger than memory.
constexpr std::size_t chunk_bytes = std::size_t{4} << 20;
// Config and tokenizer files, in the order they enter the id; a missing one enters as absent.
constexpr const char* config_files[] = {"config.json", "tokenizer.json", "tokenizer_config.json"};
constexpr const char* index_name = "model.safetensors.index.json";
constexpr const char* single_name = "model.safetensors";
// Changing how the id is made changes this tag, so that no old id is ever reproduced.
constexpr const char* id_format = "brigade checkpoint content v1";
// A weights file modified this shortly before it was hashed is hashed again at the next start.
constexpr std::int64_t racy_window_ns = 2'000'000'000;

struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

std::string digest_hex(const XXH128_hash_t& h) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  return to_hex(c.digest, sizeof c.digest);
}

std::int64_t unix_nanoseconds() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The XXH3-128 of the file's bytes, as hex. `on_bytes` hears of every chunk; a set `stop` ends
// the read with `cancelled`.
result<std::string> hash_file(const std::string& path, const std::atomic<bool>* stop,
                              const std::function<void(std::size_t)>& on_bytes) {
  fd_guard f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) return error(errc::io_error, path + ": cannot open: " + std::strerror(errno));
  ::posix_fadvise(f.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                 &XXH3_freeState);
  if (!state || XXH3_128bits_reset(state.get()) != XXH_OK) {
    return error(errc::resource_exhausted, "no memory for a hash state");
  }
  std::vector<unsigned char> buffer(chunk_bytes);
  for (;;) {
    if (stop && stop->load()) return error(errc::cancelled, path + ": hashing stopped");
    const ssize_t n = ::read(f.fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return error(errc::io_error, path + ": read failed: " + std::strerror(errno));
    if (n == 0) break;
    XXH3_128bits_update(state.get(), buffer.data(), static_cast<std::size_t>(n));
    if (on_bytes) on_bytes(static_cast<std::size_t>(n));
  }
  return digest_hex(XXH3_128bits_digest(state.get()));
}

// The weights files the loader reads (model/checkpoint.cpp): the shard index and the shards it
// names, or the single file. Names are relative to the directory.
struct weights_layout {
  std::vector<std::string> small;   // hashed at every start (the index)
  std::vector<std::string> shards;  // digests cached
};

result<weights_layout> list_weights(const std::string& dir) {
  const std::string index_path = dir + "/" + index_name;
  if (!regular_file(index_path)) {
    if (!regular_file(dir + "/" + single_name)) {
      return error(errc::not_found, dir + ": no " + single_name + " or " + index_name);
    }
    return weights_layout{{}, {single_name}};
  }
  std::ifstream in(index_path);
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, false);
  const auto map = j.is_object() ? j.find("weight_map") : j.end();
  if (!in || j.is_discarded() || map == j.end() || !map->is_object()) {
    return error(errc::bad_format, index_path + ": no 'weight_map' object");
  }
  std::set<std::string> shards;
  for (const auto& file : *map) {
    const std::string name = file.is_string() ? file.get<std::string>() : std::string();
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
      return error(errc::bad_format, index_path + ": weight_map names a bad file '" + name + "'");
    }
    shards.insert(name);
  }
  return weights_layout{{index_name}, {shards.begin(), shards.end()}};
}

// One file's part of the id: its name, whether it exists, its size and digest.
struct record {
  std::string name;
  bool present = true;
  std::uint64_t size = 0;
  std::string digest;
};

std::string id_of(const std::vector<record>& records) {
  std::string text = id_format;
  for (const record& r : records) {
    text += '\n' + r.name + '\0' + (r.present ? "1" : "0") + '\0' + std::to_string(r.size) + '\0' +
            r.digest;
  }
  return "content:" + digest_hex(XXH3_128bits(text.data(), text.size()));
}

// Config, tokenizer and index files, hashed at every start (they are small).
result<std::vector<record>> small_records(const std::string& dir,
                                          const std::vector<std::string>& names,
                                          std::uint64_t& bytes_hashed) {
  std::vector<record> out;
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    const bool required = name == "config.json" || name == index_name;
    if (!required && !regular_file(path)) {
      out.push_back({name, false, 0, ""});
      continue;
    }
    auto key = file_key::of(path);
    if (!key) return key.err();
    auto digest = hash_file(path, nullptr, [&](std::size_t n) { bytes_hashed += n; });
    if (!digest) return digest.err();
    out.push_back({name, true, key->size, *digest});
  }
  return out;
}

struct weights_pass {
  std::vector<record> records;
  std::vector<cached_weights_digest> from_cache;
  std::uint64_t bytes_hashed = 0;
};

// Hashes one weights file and caches its digest, unless the file was written while it was read
// or just before: file times are as coarse as the kernel's tick, so a write right after this
// one could keep its mtime (git's "racy clean" entries).
result<std::string> hash_weights(const file_key& key, weights_digest_cache& cache,
                                 const std::function<void(std::size_t)>& on_bytes) {
  const std::int64_t hashed_at_ns = unix_nanoseconds();
  auto digest = hash_file(key.path, nullptr, on_bytes);
  if (!digest) return digest;
  auto after = file_key::of(key.path);
  if (after && *after == key && key.mtime_ns < hashed_at_ns - racy_window_ns) {
    cache.put(key, *digest, unix_seconds());
  }
  return digest;
}

// Weights files: digests from the cache where their key matches, hashed otherwise.
result<weights_pass> weights_records(const std::string& dir, const std::vector<std::string>& names,
                                     const std::string& cache_dir,
                                     std::uint64_t progress_min_bytes) {
  auto cache = weights_digest_cache::load(cache_dir, checkpoint_identity::cache_file_name);
  std::vector<file_key> keys;
  std::uint64_t to_hash_bytes = 0;
  for (const std::string& name : names) {
    auto key = file_key::of(dir + "/" + name);
    if (!key) return key.err();
    if (!cache.find(*key)) to_hash_bytes += key->size;
    keys.push_back(std::move(key.value()));
  }
  std::unique_ptr<progress_bar> bar;
  if (to_hash_bytes >= progress_min_bytes) {
    bar = std::make_unique<progress_bar>("hashing the weights of " + dir);
  }
  weights_pass out;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    auto digest = cache.find(keys[i]);
    if (digest) {
      out.from_cache.push_back({keys[i], *digest});
    } else {
      auto hashed = hash_weights(keys[i], cache, [&](std::size_t n) {
        out.bytes_hashed += n;
        if (bar) bar->update(out.bytes_hashed, to_hash_bytes);
      });
      if (!hashed) return hashed.err();
      digest = *hashed;
    }
    out.records.push_back({names[i], true, keys[i].size, *digest});
  }
  if (bar) {
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bar->finish(
        std::to_string(static_cast<long long>(out.bytes_hashed / 1e6 / std::max(secs, 1e-3))) +
        " MB/s");
  }
  if (cache.changed()) {
    if (status saved = cache.save(); !saved) {
      log::warn("checkpoint", "weights digests not cached (the next start hashes them again): " +
                                  saved.err().message);
    }
  }
  return out;
}

}  // namespace

const char* to_string(digest_check c) {
  switch (c) {
    case digest_check::none:
      return "none";
    case digest_check::running:
      return "running";
    case digest_check::matched:
      return "matched";
    case digest_check::changed:
      return "changed";
    case digest_check::failed:
      return "failed";
    case digest_check::stopped:
      return "stopped";
  }
  return "?";
}

std::string checkpoint_identity::default_cache_dir() {
  const auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  if (!env("BRIGADE_CACHE_DIR").empty()) return env("BRIGADE_CACHE_DIR");
  if (!env("XDG_CACHE_HOME").empty()) return env("XDG_CACHE_HOME") + "/brigade";
  if (!env("HOME").empty()) return env("HOME") + "/.cache/brigade";
  return std::string();
}

result<std::unique_ptr<checkpoint_identity>> checkpoint_identity::compute(const std::string& dir,
                                                                          const options& opts) {
  auto weights = list_weights(dir);
  if (!weights) return weights.err();
  std::vector<std::string> small(std::begin(config_files), std::end(config_files));
  small.insert(small.end(), weights->small.begin(), weights->small.end());
  std::unique_ptr<checkpoint_identity> self(new checkpoint_identity());
  auto records = small_records(dir, small, self->bytes_hashed_at_start_);
  if (!records) return records.err();
  self->cache_dir_ = opts.cache_dir.empty() ? default_cache_dir() : opts.cache_dir;
  auto pass = weights_records(dir, weights->shards, self->cache_dir_, opts.progress_min_bytes);
  if (!pass) return pass.err();
  records->insert(records->end(), pass->records.begin(), pass->records.end());
  self->id_ = id_of(*records);
  self->bytes_hashed_at_start_ += pass->bytes_hashed;
  self->to_check_ = std::move(pass->from_cache);
  if (opts.check_cached && !self->to_check_.empty()) {
    self->check_ = digest_check::running;
    self->checker_ = std::thread([s = self.get()] { s->check_in_background(); });
  }
  return self;
}

void checkpoint_identity::check_in_background() {
  digest_check outcome = digest_check::matched;
  auto cache = weights_digest_cache::load(cache_dir_, cache_file_name);
  for (const cached_weights_digest& c : to_check_) {
    auto digest = hash_file(c.key.path, &stop_, nullptr);
    if (!digest && digest.err().code == errc::cancelled) return finish_check(digest_check::stopped);
    if (!digest) {
      log::warn("checkpoint", "cannot check a cached weights digest: " + digest.err().message);
      if (outcome == digest_check::matched) outcome = digest_check::failed;
      continue;
    }
    if (*digest == c.digest_hex) continue;
    log::error("checkpoint",
               c.key.path +
                   ": the weights changed without their size, mtime or inode changing. This "
                   "process names its KV cache by the old weights' digest, so blocks cached for "
                   "them may be served until the next start, which drops them: restart now.");
    outcome = digest_check::changed;
    auto now = file_key::of(c.key.path);
    if (now && *now == c.key) {
      cache.put(c.key, *digest, unix_seconds());
    } else {
      cache.erase(c.key.path);
    }
  }
  if (cache.changed()) {
    if (status saved = cache.save(); !saved) {
      log::error("checkpoint", "the digest cache keeps the old digests (" + saved.err().message +
                                   "): delete " + cache_dir_ + "/" + cache_file_name);
    }
  }
  finish_check(outcome);
}

void checkpoint_identity::finish_check(digest_check outcome) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    check_ = outcome;
  }
  checked_.notify_all();
}

digest_check checkpoint_identity::wait_checked(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  checked_.wait_for(lock, timeout, [&] { return check_ != digest_check::running; });
  return check_;
}

checkpoint_identity::~checkpoint_identity() {
  stop_ = true;
  if (checker_.joinable()) checker_.join();
}

result<std::shared_ptr<const checkpoint_identity>> checkpoint_identity::shared(
    const std::string& dir, const std::shared_ptr<const void>& owner) {
  struct known_identity {
    std::weak_ptr<const void> owner;
    std::shared_ptr<const checkpoint_identity> identity;
  };
  // Destroyed at exit, which stops and joins the background checks still running.
  static std::mutex mutex;
  static std::map<std::string, known_identity> known;
  std::error_code ec;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(dir, ec);
  const std::string key = ec ? dir : canonical.string();
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(key); it != known.end()) {
    const std::weak_ptr<const void>& had = it->second.owner;
    if (!had.expired() && !had.owner_before(owner) && !owner.owner_before(had)) {
      return it->second.identity;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  auto made = compute(dir, options{});
  if (!made) return made.err();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const checkpoint_identity& c = *made.value();
  const std::string cache_file = c.cache_dir_.empty() ? std::string("no digest cache (no $HOME)")
                                                      : c.cache_dir_ + "/" + cache_file_name;
  log::info("checkpoint", dir + ": KV cache model id " + c.id() + " (" +
                              std::to_string(c.bytes_hashed_at_start() >> 20) + " MiB hashed in " +
                              std::to_string(static_cast<int>(secs * 1000)) + " ms, " +
                              std::to_string(c.cached_files()) + " weights digests from " +
                              cache_file +
                              (c.cached_files() > 0 ? ", checked again in the background)" : ")"));
  std::shared_ptr<const checkpoint_identity> identity = std::move(made.value());
  known[key] = {owner, identity};
  return identity;
}

}  // namespace brigade::model
