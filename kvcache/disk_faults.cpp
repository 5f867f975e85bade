#include "kvcache/disk_faults.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

namespace brigade::kvcache {
namespace {

using fault_clock = std::chrono::steady_clock;

struct disk_rule {
  disk_fault_action action;
  std::optional<fault_clock::time_point> until;
};

struct registry {
  std::mutex mutex;
  std::map<std::string, disk_rule> rules;
};

registry& rules() {
  static registry r;
  return r;
}

std::vector<std::string_view> words_of(std::string_view text) {
  std::vector<std::string_view> words;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = text.find_first_not_of(" \t", pos);
    if (start == std::string_view::npos) break;
    const size_t end = std::min(text.find_first_of(" \t", start), text.size());
    words.push_back(text.substr(start, end - start));
    pos = end;
  }
  return words;
}

bool number(std::string_view text, std::uint32_t& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

result<disk_rule> parse(std::string_view spec) {
  const auto bad = [&](const std::string& what) {
    return error(errc::invalid_argument, "disk fault '" + std::string(spec) + "': " + what);
  };
  const std::vector<std::string_view> words = words_of(spec);
  if (words.empty() || (words[0] != "full" && words[0] != "slow")) {
    return bad("expected 'full [for_ms=N]' or 'slow ms=N [for_ms=N]'");
  }
  disk_rule rule;
  rule.action.full = words[0] == "full";
  std::uint32_t for_ms = 0;
  for (size_t i = 1; i < words.size(); ++i) {
    const size_t eq = words[i].find('=');
    const std::string_view key = words[i].substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : words[i].substr(eq + 1);
    std::uint32_t* out = key == "ms" ? &rule.action.slow_ms : key == "for_ms" ? &for_ms : nullptr;
    if (!out || !number(value, *out))
      return bad("'" + std::string(words[i]) + "' is not ms=N or for_ms=N");
  }
  if (!rule.action.full && rule.action.slow_ms == 0) return bad("slow needs ms=N with N > 0");
  if (for_ms > 0) rule.until = fault_clock::now() + std::chrono::milliseconds(for_ms);
  return rule;
}

}  // namespace

status disk_faults::set(const std::string& name, std::string_view spec) {
  result<disk_rule> rule = parse(spec);
  if (!rule) return rule.err();
  registry& r = rules();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.rules[name] = rule.value();
  armed_.store(true, std::memory_order_relaxed);
  return ok_status();
}

void disk_faults::clear(const std::string& name) {
  registry& r = rules();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.rules.erase(name);
  armed_.store(!r.rules.empty(), std::memory_order_relaxed);
}

void disk_faults::clear_all() {
  registry& r = rules();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.rules.clear();
  armed_.store(false, std::memory_order_relaxed);
}

disk_fault_action disk_faults::current() {
  disk_fault_action out;
  registry& r = rules();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto now = fault_clock::now();
  for (auto it = r.rules.begin(); it != r.rules.end();) {
    if (it->second.until && *it->second.until <= now) {
      it = r.rules.erase(it);
      continue;
    }
    out.full = out.full || it->second.action.full;
    out.slow_ms = std::max(out.slow_ms, it->second.action.slow_ms);
    ++it;
  }
  armed_.store(!r.rules.empty(), std::memory_order_relaxed);
  return out;
}

}  // namespace brigade::kvcache
