// Reading one YAML mapping of a configuration file (a manifest, a fault scenario), field by field:
// each reader checks its field's type and range, errors name the field by its path
// ("roles.decode.count") and the file, and keys nobody read are rejected, so that a typo never
// silently falls back to a default. The first error wins; later reads do nothing.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "config/manifest.hpp"

namespace brigade::config {

class yaml_section {
 public:
  yaml_section(const YAML::Node& node, std::string path, std::string source, error* err);

  bool ok() const { return err_->message.empty(); }

  void integer(const char* key, int& out, int min, int max);
  void integer64(const char* key, int64_t& out, int64_t min, int64_t max);
  void flag(const char* key, bool& out);
  void number(const char* key, double& out, double min);
  void text(const char* key, std::string& out);
  void texts(const char* key, std::vector<std::string>& out);
  /// A device: cpu or cuda:N (gpu::parse_device).
  void device(const char* key, gpu::device_choice& out);
  /// A list of nodes: each a mapping with name, address, the roles it hosts and their device.
  void nodes(const char* key, std::vector<node_spec>& out);
  /// A size in bytes: an integer, or a string with a unit ("512MiB", "2GiB", "64KiB", "1GB").
  void bytes(const char* key, uint64_t& out);
  /// A mapping of names to durations (seconds, or a number with s, m, h or d: "7d", "12h").
  void durations(const char* key, std::vector<std::pair<std::string, int64_t>>& out);
  /// A duration in milliseconds: an integer (milliseconds) or a number with ms, s or m ("1.5s").
  void duration_ms(const char* key, int64_t& out, int64_t min_ms, int64_t max_ms);
  /// Calls `fn` with the sub-section `key` when present.
  void child(const char* key, const std::function<void(yaml_section&)>& fn);
  /// Calls `fn` with the raw node of `key` when present, for fields of a shape of their own.
  void raw(const char* key, const std::function<void(const YAML::Node&)>& fn);
  /// Reports an error on `key` found by a check after reading.
  void invalid(const char* key, const std::string& what);
  /// Checks the node is a mapping; call before reading.
  void begin();
  /// Rejects keys nobody read, and keys given twice.
  void finish();
  /// The path fields of this section are named with ("faults[2].").
  const std::string& path() const { return path_; }
  const std::string& source() const { return source_; }
  error* err() const { return err_; }

 private:
  std::string name() const;
  void read(const char* key, const std::function<void(const YAML::Node&)>& fn);
  void fail(const char* key, const std::string& what);

  YAML::Node node_;
  std::string path_;
  std::string source_;
  error* err_;
  std::set<std::string> known_;
};

/// "512MiB", "2GiB", "1GB" or a plain integer, in bytes; false when malformed.
bool parse_bytes(const std::string& text, uint64_t& out);
/// "7d", "12h", "30m", "45s" or plain seconds, at least 1 s and at most 3650 days.
bool parse_duration_s(const std::string& text, int64_t& out);
/// "250ms", "1.5s", "2m" or plain milliseconds; false when malformed or negative.
bool parse_duration_ms(const std::string& text, int64_t& out);

}  // namespace brigade::config
