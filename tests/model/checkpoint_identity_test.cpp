// The content id the KV cache names a model by: what changes it, what does not, and the digest
// cache that spares a restart from reading the weights again.
#include <fcntl.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/log.hpp"
#include "model/checkpoint_identity.hpp"
#include "model/weights_digest_cache.hpp"
#include "support/temp_dir.hpp"

using namespace brigade;
using model::checkpoint_identity;
using model::digest_check;

namespace {

constexpr std::size_t weights_bytes = (std::size_t{9} << 20) + 123;  // more than two chunks
constexpr auto check_timeout = std::chrono::seconds(60);

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  REQUIRE(out.good());
}

std::string random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s)
    c = static_cast<char>(rng());
  return s;
}

// Moves the file's mtime an hour back (and `offset_ns` more): older than the digest cache's
// window for files written just before they are hashed.
void age(const std::string& path, long offset_ns = 0) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const long long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now).count() -
                       3600'000'000'000LL + offset_ns;
  const timespec t[2] = {{ns / 1'000'000'000, ns % 1'000'000'000},
                         {ns / 1'000'000'000, ns % 1'000'000'000}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), t, 0) == 0);
}

// Overwrites `path` in place with `bytes` of the same length, keeping its mtime (and inode).
void replace_keeping_mtime(const std::string& path, const std::string& bytes) {
  struct stat before {};
  REQUIRE(::stat(path.c_str(), &before) == 0);
  REQUIRE(static_cast<std::size_t>(before.st_size) == bytes.size());
  {
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    io.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(io.good());
  }
  const timespec t[2] = {before.st_atim, before.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), t, 0) == 0);
  struct stat after {};
  REQUIRE(::stat(path.c_str(), &after) == 0);
  REQUIRE(after.st_ino == before.st_ino);
  REQUIRE(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
}

void flip_byte(const std::string& path, std::size_t offset) {
  std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  io.get(c);
  io.seekp(static_cast<std::streamoff>(offset));
  io.put(static_cast<char>(c ^ 0x01));
  REQUIRE(io.good());
}

struct checkpoint_dir {
  testing::temp_dir dir{"identity-ckpt"};
  std::string weights = random_bytes(weights_bytes, 1);

  checkpoint_dir() {
    write_file(dir.file("config.json"), R"({"model_type": "qwen3_moe", "num_hidden_layers": 2})");
    write_file(dir.file("tokenizer.json"), R"({"model": {"type": "BPE"}})");
    write_file(dir.file("model.safetensors"), weights);
    age(dir.file("model.safetensors"));
  }
  std::string file(const std::string& name) const { return dir.file(name); }
  std::uint64_t small_bytes() const {
    return std::filesystem::file_size(file("config.json")) +
           std::filesystem::file_size(file("tokenizer.json"));
  }
};

checkpoint_identity::options in(const std::string& cache_dir) {
  checkpoint_identity::options o;
  o.cache_dir = cache_dir;
  return o;
}

// The id with a fresh, empty digest cache: what the files' content alone gives.
std::string uncached_id(const std::string& dir) {
  testing::temp_dir cache{"identity-cache"};
  auto id = checkpoint_identity::compute(dir, in(cache.path()));
  REQUIRE(id.ok());
  return id.value()->id();
}

// Silences the log for one test: the cases below provoke warnings and errors on purpose.
struct quiet_log {
  log::level was = log::threshold();
  quiet_log() { log::set_threshold(log::level::off); }
  ~quiet_log() { log::set_threshold(was); }
};

}  // namespace

TEST_CASE("the id names the content: unchanged files keep it, wherever they lie", "[identity]") {
  checkpoint_dir ck;
  const std::string id = uncached_id(ck.dir.path());
  CHECK(id.rfind("content:", 0) == 0);
  CHECK(id.size() == 8 + 32);
  CHECK(uncached_id(ck.dir.path()) == id);
  testing::temp_dir copy{"identity-copy"};
  for (const char* name : {"config.json", "tokenizer.json", "model.safetensors"}) {
    std::filesystem::copy_file(ck.file(name), copy.file(name),
                               std::filesystem::copy_options::overwrite_existing);
  }
  CHECK(uncached_id(copy.path()) == id);
}

TEST_CASE("any weights byte changes the id", "[identity]") {
  checkpoint_dir ck;
  const std::string original = uncached_id(ck.dir.path());
  for (std::size_t offset :
       {std::size_t{0}, std::size_t{4} << 20, weights_bytes / 2, weights_bytes - 1}) {
    INFO("offset " << offset);
    flip_byte(ck.file("model.safetensors"), offset);
    CHECK(uncached_id(ck.dir.path()) != original);
    flip_byte(ck.file("model.safetensors"), offset);
    CHECK(uncached_id(ck.dir.path()) == original);
  }
  // One byte more is another file too.
  write_file(ck.file("model.safetensors"), ck.weights + "x");
  CHECK(uncached_id(ck.dir.path()) != original);
}

TEST_CASE("config.json and the tokenizer files change the id", "[identity]") {
  checkpoint_dir ck;
  const std::string original = uncached_id(ck.dir.path());
  write_file(ck.file("config.json"), R"({"model_type": "qwen3_moe", "num_hidden_layers": 3})");
  const std::string other_config = uncached_id(ck.dir.path());
  CHECK(other_config != original);
  write_file(ck.file("tokenizer.json"), R"({"model": {"type": "WordPiece"}})");
  const std::string other_tokenizer = uncached_id(ck.dir.path());
  CHECK(other_tokenizer != other_config);
  write_file(ck.file("tokenizer_config.json"), "{}");
  const std::string with_tokenizer_config = uncached_id(ck.dir.path());
  CHECK(with_tokenizer_config != other_tokenizer);
  std::filesystem::remove(ck.file("tokenizer_config.json"));
  CHECK(uncached_id(ck.dir.path()) == other_tokenizer);
  // A file brigade does not read is not part of the checkpoint.
  write_file(ck.file("README.md"), "notes");
  CHECK(uncached_id(ck.dir.path()) == other_tokenizer);
}

TEST_CASE("a sharded checkpoint: the index and every shard it names", "[identity]") {
  checkpoint_dir ck;
  std::filesystem::remove(ck.file("model.safetensors"));
  write_file(ck.file("model-00001-of-00002.safetensors"), random_bytes(1000, 2));
  write_file(ck.file("model-00002-of-00002.safetensors"), random_bytes(2000, 3));
  write_file(ck.file("model.safetensors.index.json"),
             R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                "b": "model-00002-of-00002.safetensors",
                                "c": "model-00002-of-00002.safetensors"}})");
  const std::string original = uncached_id(ck.dir.path());
  // A stray single file is not read when an index exists.
  write_file(ck.file("model.safetensors"), "stray");
  CHECK(uncached_id(ck.dir.path()) == original);
  flip_byte(ck.file("model-00002-of-00002.safetensors"), 1999);
  CHECK(uncached_id(ck.dir.path()) != original);
  std::filesystem::remove(ck.file("model-00002-of-00002.safetensors"));
  testing::temp_dir cache{"identity-cache"};
  auto missing = checkpoint_identity::compute(ck.dir.path(), in(cache.path()));
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.err().message, Catch::Contains("model-00002-of-00002.safetensors"));
  write_file(ck.file("model.safetensors.index.json"), R"({"weight_map": {"a": "../x"}})");
  CHECK_FALSE(checkpoint_identity::compute(ck.dir.path(), in(cache.path())).ok());
}

TEST_CASE("a directory without config or weights has no id", "[identity]") {
  testing::temp_dir empty{"identity-empty"};
  testing::temp_dir cache{"identity-cache"};
  CHECK_FALSE(checkpoint_identity::compute(empty.path(), in(cache.path())).ok());
  write_file(empty.file("model.safetensors"), "x");
  CHECK_FALSE(checkpoint_identity::compute(empty.path(), in(cache.path())).ok());
}

TEST_CASE("a restart takes the weights digest from the cache and checks it in the background",
          "[identity]") {
  quiet_log quiet;
  checkpoint_dir ck;
  testing::temp_dir cache{"identity-cache"};
  auto first = checkpoint_identity::compute(ck.dir.path(), in(cache.path()));
  REQUIRE(first.ok());
  CHECK(first.value()->bytes_hashed_at_start() == ck.small_bytes() + weights_bytes);
  CHECK(first.value()->cached_files() == 0);
  CHECK(first.value()->wait_checked(check_timeout) == digest_check::none);
  REQUIRE(std::filesystem::exists(cache.file(checkpoint_identity::cache_file_name)));

  auto second = checkpoint_identity::compute(ck.dir.path(), in(cache.path()));
  REQUIRE(second.ok());
  CHECK(second.value()->id() == first.value()->id());
  CHECK(second.value()->bytes_hashed_at_start() == ck.small_bytes());
  CHECK(second.value()->cached_files() == 1);
  CHECK(second.value()->wait_checked(check_timeout) == digest_check::matched);

  SECTION("a new mtime is a new key: the file is hashed again") {
    const std::string other = random_bytes(weights_bytes, 9);
    replace_keeping_mtime(ck.file("model.safetensors"), other);
    age(ck.file("model.safetensors"), 1);
    auto third = checkpoint_identity::compute(ck.dir.path(), in(cache.path()));
    REQUIRE(third.ok());
    CHECK(third.value()->id() != first.value()->id());
    CHECK(third.value()->bytes_hashed_at_start() == ck.small_bytes() + weights_bytes);
    CHECK(third.value()->id() == uncached_id(ck.dir.path()));
  }
  SECTION("content replaced under the same size, mtime and inode: found in the background") {
    replace_keeping_mtime(ck.file("model.safetensors"), random_bytes(weights_bytes, 9));
    auto third = checkpoint_identity::compute(ck.dir.path(), in(cache.path()));
    REQUIRE(third.ok());
    // The start trusted the cache: the old weights' id, nothing of the weights read.
    CHECK(third.value()->id() == first.value()->id());
    CHECK(third.value()->bytes_hashed_at_start() == ck.small_bytes());
    CHECK(third.value()->wait_checked(check_timeout) == digest_check::changed);
    // The check stored the new digest: the next start names the new weights without reading
    // them.
    auto fourth = checkpoint_identity::compute(ck.dir.path(), in(cache.path()));
    REQUIRE(fourth.ok());
    CHECK(fourth.value()->id() != first.value()->id());
    CHECK(fourth.value()->id() == uncached_id(ck.dir.path()));
    CHECK(fourth.value()->bytes_hashed_at_start() == ck.small_bytes());
    CHECK(fourth.value()->wait_checked(check_timeout) == digest_check::matched);
  }
  SECTION("destroyed while its check runs, it stops and joins it") {
    auto third = checkpoint_identity::compute(ck.dir.path(), in(cache.path()));
    REQUIRE(third.ok());
    third.value().reset();
  }
}

TEST_CASE("a file written just before it was hashed is not cached", "[identity]") {
  checkpoint_dir ck;
  testing::temp_dir cache{"identity-cache"};
  write_file(ck.file("model.safetensors"), ck.weights);  // mtime now
  auto first = checkpoint_identity::compute(ck.dir.path(), in(cache.path()));
  REQUIRE(first.ok());
  auto second = checkpoint_identity::compute(ck.dir.path(), in(cache.path()));
  REQUIRE(second.ok());
  CHECK(second.value()->id() == first.value()->id());
  CHECK(second.value()->cached_files() == 0);
  CHECK(second.value()->bytes_hashed_at_start() == ck.small_bytes() + weights_bytes);
}

TEST_CASE("an unwritable digest cache only costs a rehash", "[identity]") {
  quiet_log quiet;
  checkpoint_dir ck;
  const std::string id = uncached_id(ck.dir.path());
  testing::temp_dir scratch{"identity-cache"};
  write_file(scratch.file("plain-file"), "not a directory");
  // Under a plain file: no directory can be made there, not even by root.
  const std::string cache_dir = scratch.file("plain-file") + "/brigade";
  for (int start = 0; start < 2; ++start) {
    auto got = checkpoint_identity::compute(ck.dir.path(), in(cache_dir));
    REQUIRE(got.ok());
    CHECK(got.value()->id() == id);
    CHECK(got.value()->bytes_hashed_at_start() == ck.small_bytes() + weights_bytes);
  }
  // A malformed cache file reads as empty and is replaced.
  testing::temp_dir bad{"identity-cache"};
  write_file(bad.file(checkpoint_identity::cache_file_name), "{not json");
  auto got = checkpoint_identity::compute(ck.dir.path(), in(bad.path()));
  REQUIRE(got.ok());
  CHECK(got.value()->id() == id);
  auto again = checkpoint_identity::compute(ck.dir.path(), in(bad.path()));
  REQUIRE(again.ok());
  CHECK(again.value()->cached_files() == 1);
}

TEST_CASE("a loaded model keeps its identity, and the next one gets the files' own", "[identity]") {
  quiet_log quiet;
  checkpoint_dir ck;
  testing::temp_dir cache{"identity-cache"};
  const char* was = std::getenv("BRIGADE_CACHE_DIR");
  const std::string saved = was ? was : "";
  ::setenv("BRIGADE_CACHE_DIR", cache.path().c_str(), 1);
  const auto loaded = std::make_shared<int>(1);
  auto first = checkpoint_identity::shared(ck.dir.path(), loaded);
  REQUIRE(first.ok());
  auto again = checkpoint_identity::shared(ck.dir.path(), loaded);
  REQUIRE(again.ok());
  CHECK(again.value() == first.value());
  flip_byte(ck.file("model.safetensors"), 7);
  age(ck.file("model.safetensors"), 1);
  // The model loaded before the change still computes with the old weights.
  CHECK(checkpoint_identity::shared(ck.dir.path(), loaded).value() == first.value());
  const auto reloaded = std::make_shared<int>(2);
  auto next = checkpoint_identity::shared(ck.dir.path(), reloaded);
  REQUIRE(next.ok());
  CHECK(next.value()->id() != first.value()->id());
  CHECK(next.value()->id() == uncached_id(ck.dir.path()));
  if (was) {
    ::setenv("BRIGADE_CACHE_DIR", saved.c_str(), 1);
  } else {
    ::unsetenv("BRIGADE_CACHE_DIR");
  }
}

TEST_CASE("the default cache location follows the environment", "[identity]") {
  const auto set = [](const char* name, const char* value) {
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  };
  struct saved {
    const char* name;
    std::string value;
    bool had;
  };
  std::vector<saved> env;
  for (const char* name : {"BRIGADE_CACHE_DIR", "XDG_CACHE_HOME", "HOME"}) {
    const char* v = std::getenv(name);
    env.push_back({name, v ? v : "", v != nullptr});
  }
  set("BRIGADE_CACHE_DIR", "/b");
  set("XDG_CACHE_HOME", "/x");
  set("HOME", "/h");
  CHECK(checkpoint_identity::default_cache_dir() == "/b");
  set("BRIGADE_CACHE_DIR", nullptr);
  CHECK(checkpoint_identity::default_cache_dir() == "/x/brigade");
  set("XDG_CACHE_HOME", nullptr);
  CHECK(checkpoint_identity::default_cache_dir() == "/h/.cache/brigade");
  set("HOME", nullptr);
  CHECK(checkpoint_identity::default_cache_dir().empty());
  for (const auto& e : env)
    set(e.name, e.had ? e.value.c_str() : nullptr);
}

TEST_CASE("digest cache saves merge with another process's and stay bounded", "[identity]") {
  testing::temp_dir cache{"identity-cache"};
  const std::string digest(32, 'a');
  auto a = model::weights_digest_cache::load(cache.path(), "d.json");
  auto b = model::weights_digest_cache::load(cache.path(), "d.json");
  const model::file_key ka{"/a", 1, 2, 3};
  const model::file_key kb{"/b", 4, 5, 6};
  a.put(ka, digest, 10);
  b.put(kb, digest, 10);
  REQUIRE(a.save().ok());
  REQUIRE(b.save().ok());
  auto both = model::weights_digest_cache::load(cache.path(), "d.json");
  CHECK(both.find(ka) == digest);
  CHECK(both.find(kb) == digest);
  CHECK_FALSE(both.find({"/a", 1, 2, 4}).has_value());
  for (std::size_t i = 0; i < model::weights_digest_cache::max_entries + 5; ++i) {
    both.put({"/f" + std::to_string(i), 1, 1, 1}, digest, 100 + static_cast<std::int64_t>(i));
  }
  REQUIRE(both.save().ok());
  auto bounded = model::weights_digest_cache::load(cache.path(), "d.json");
  CHECK_FALSE(bounded.find(ka).has_value());  // checked longest ago
  CHECK(bounded.find({"/f1028", 1, 1, 1}) == digest);
}
