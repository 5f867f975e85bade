#include "model/weights_digest_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <vector>

namespace brigade::model {
namespace {

using json = nlohmann::json;
constexpr int format_version = 1;
constexpr std::size_t digest_hex_chars = 32;

bool is_digest_hex(const std::string& s) {
  return s.size() == digest_hex_chars && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string temporary_name(const std::string& path) {
  std::random_device rd;
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
}

}  // namespace

result<file_key> file_key::of(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(path, ec);
  if (ec) return error(errc::not_found, path + ": " + ec.message());
  struct stat st {};
  if (::stat(real.c_str(), &st) != 0) {
    return error(errc::io_error, real.string() + ": cannot stat: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return error(errc::bad_format, real.string() + ": not a regular file");
  file_key k;
  k.path = real.string();
  k.size = static_cast<std::uint64_t>(st.st_size);
  k.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  k.inode = static_cast<std::uint64_t>(st.st_ino);
  return k;
}

weights_digest_cache weights_digest_cache::load(std::string dir, std::string file_name) {
  weights_digest_cache c;
  c.dir_ = std::move(dir);
  c.file_name_ = std::move(file_name);
  if (!c.dir_.empty()) c.entries_ = read(c.dir_ + "/" + c.file_name_);
  return c;
}

weights_digest_cache::entry_map weights_digest_cache::read(const std::string& path) {
  entry_map out;
  std::ifstream in(path);
  if (!in) return out;
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("version", 0) != format_version) return out;
  const auto files = j.find("files");
  if (files == j.end() || !files->is_object()) return out;
  for (auto it = files->begin(); it != files->end(); ++it) {
    const json& e = it.value();
    if (!e.is_object()) continue;
    const auto size = e.find("size");
    const auto mtime = e.find("mtime_ns");
    const auto inode = e.find("inode");
    const auto digest = e.find("xxh3_128");
    if (size == e.end() || !size->is_number_unsigned() || mtime == e.end() ||
        !mtime->is_number_integer() || inode == e.end() || !inode->is_number_unsigned() ||
        digest == e.end() || !digest->is_string() || !is_digest_hex(digest->get<std::string>())) {
      continue;
    }
    entry x;
    x.key = {it.key(), size->get<std::uint64_t>(), mtime->get<std::int64_t>(),
             inode->get<std::uint64_t>()};
    x.digest_hex = digest->get<std::string>();
    x.checked_s = e.value("checked_s", std::int64_t{0});
    out[it.key()] = std::move(x);
  }
  return out;
}

std::optional<std::string> weights_digest_cache::find(const file_key& key) const {
  const auto it = entries_.find(key.path);
  if (it == entries_.end() || it->second.key != key) return std::nullopt;
  return it->second.digest_hex;
}

void weights_digest_cache::put(const file_key& key, const std::string& digest_hex,
                               std::int64_t checked_s) {
  entry e{key, digest_hex, checked_s};
  entries_[key.path] = e;
  changes_[key.path] = std::move(e);
}

void weights_digest_cache::erase(const std::string& path) {
  entries_.erase(path);
  changes_[path] = std::nullopt;
}

status weights_digest_cache::save() const {
  if (dir_.empty()) return error(errc::invalid_argument, "no digest cache directory");
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return error(errc::io_error, dir_ + ": cannot create: " + ec.message());
  const std::string path = dir_ + "/" + file_name_;
  entry_map merged = read(path);
  for (const auto& [file, change] : changes_) {
    if (change) {
      merged[file] = *change;
    } else {
      merged.erase(file);
    }
  }
  // Over the bound, the entries checked longest ago go first.
  std::vector<const entry*> by_age;
  for (const auto& [file, e] : merged)
    by_age.push_back(&e);
  std::sort(by_age.begin(), by_age.end(),
            [](const entry* a, const entry* b) { return a->checked_s > b->checked_s; });
  by_age.resize(std::min(by_age.size(), max_entries));
  json files = json::object();
  for (const entry* e : by_age) {
    files[e->key.path] = {{"size", e->key.size},
                          {"mtime_ns", e->key.mtime_ns},
                          {"inode", e->key.inode},
                          {"xxh3_128", e->digest_hex},
                          {"checked_s", e->checked_s}};
  }
  const json doc = {{"version", format_version}, {"files", std::move(files)}};
  const std::string tmp = temporary_name(path);
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << doc.dump(1) << "\n";
    out.close();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return error(errc::io_error, tmp + ": cannot write");
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return error(errc::io_error, path + ": cannot replace: " + ec.message());
  }
  return ok_status();
}

}  // namespace brigade::model
