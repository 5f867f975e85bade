#include "transport/fault_points.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <vector>

namespace brigade::transport {
namespace {

using fault_clock = std::chrono::steady_clock;

// A rule as set: its generator, and when it ends.
struct active_rule {
  fault_rule rule;
  std::mt19937_64 random;
  std::optional<fault_clock::time_point> until;
};

struct registry {
  std::mutex mutex;
  std::map<std::string, active_rule> rules;
};

// Drops the rules whose time is over. Called with the mutex held.
void expire(registry& r) {
  const auto now = fault_clock::now();
  for (auto it = r.rules.begin(); it != r.rules.end();) {
    it = it->second.until && *it->second.until <= now ? r.rules.erase(it) : std::next(it);
  }
}

registry& rules() {
  static registry r;
  return r;
}

bool matches_direction(const fault_rule& rule, peer_id from, peer_id to) {
  return (!rule.from || *rule.from == from) && (!rule.to || *rule.to == to);
}

bool matches_link(const fault_rule& rule, peer_id a, peer_id b) {
  return matches_direction(rule, a, b) || matches_direction(rule, b, a);
}

std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = text.find_first_not_of(" \t,", pos);
    if (start == std::string_view::npos) break;
    const size_t end = std::min(text.find_first_of(" \t,", start), text.size());
    words.push_back(text.substr(start, end - start));
    pos = end;
  }
  return words;
}

template <class T>
bool parse_number(std::string_view text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

result<fault_kind> parse_kind(std::string_view word) {
  if (word == "drop") return fault_kind::drop;
  if (word == "delay") return fault_kind::delay;
  if (word == "duplicate") return fault_kind::duplicate;
  if (word == "sever") return fault_kind::sever;
  if (word == "reorder") return fault_kind::reorder;
  return error(errc::invalid_argument, "fault spec: unknown fault '" + std::string(word) +
                                           "'; expected drop, delay, duplicate, reorder or sever");
}

status apply_option(fault_rule& rule, std::string_view key, std::string_view value) {
  bool parsed = false;
  if (key == "from") {
    peer_id v = 0;
    parsed = parse_number(value, v);
    rule.from = v;
  } else if (key == "to") {
    peer_id v = 0;
    parsed = parse_number(value, v);
    rule.to = v;
  } else if (key == "channel") {
    channel_id v = 0;
    parsed = parse_number(value, v);
    rule.channel = v;
  } else if (key == "ms") {
    parsed = parse_number(value, rule.delay_ms);
  } else if (key == "count") {
    parsed = parse_number(value, rule.count);
  } else if (key == "seed") {
    parsed = parse_number(value, rule.seed);
  } else if (key == "for_ms") {
    parsed = parse_number(value, rule.for_ms);
  } else if (key == "rate") {
    const std::string text(value);
    char* end = nullptr;
    rule.rate = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(rule.rate > 0.0 && rule.rate <= 1.0)) {
      return error(errc::invalid_argument,
                   "fault spec: rate must be a share in (0, 1], got '" + text + "'");
    }
    return ok_status();
  } else {
    return error(errc::invalid_argument,
                 "fault spec: unknown option '" + std::string(key) +
                     "'; expected from, to, channel, ms, count, rate, seed or for_ms");
  }
  if (!parsed) {
    return error(errc::invalid_argument, "fault spec: option '" + std::string(key) +
                                             "' needs a non-negative integer, got '" +
                                             std::string(value) + "'");
  }
  return ok_status();
}

}  // namespace

const char* to_string(fault_kind kind) {
  switch (kind) {
    case fault_kind::drop:
      return "drop";
    case fault_kind::delay:
      return "delay";
    case fault_kind::duplicate:
      return "duplicate";
    case fault_kind::sever:
      return "sever";
    case fault_kind::reorder:
      return "reorder";
  }
  return "unknown";
}

void fault_points::set(const std::string& name, const fault_rule& rule) {
  registry& r = rules();
  std::lock_guard<std::mutex> lock(r.mutex);
  active_rule& a = r.rules[name];
  a.rule = rule;
  a.random.seed(rule.seed);
  a.until.reset();
  if (rule.for_ms > 0) a.until = fault_clock::now() + std::chrono::milliseconds(rule.for_ms);
  armed_.store(true, std::memory_order_relaxed);
}

status fault_points::set(const std::string& name, std::string_view spec) {
  result<fault_rule> rule = parse(spec);
  if (!rule) return rule.err();
  set(name, *rule);
  return ok_status();
}

void fault_points::clear(const std::string& name) {
  registry& r = rules();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.rules.erase(name);
  armed_.store(!r.rules.empty(), std::memory_order_relaxed);
}

void fault_points::clear_all() {
  registry& r = rules();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.rules.clear();
  armed_.store(false, std::memory_order_relaxed);
}

result<fault_rule> fault_points::parse(std::string_view spec) {
  const std::vector<std::string_view> words = split_words(spec);
  if (words.empty()) return error(errc::invalid_argument, "fault spec is empty");
  result<fault_kind> kind = parse_kind(words[0]);
  if (!kind) return kind.err();
  fault_rule rule;
  rule.kind = *kind;
  for (size_t i = 1; i < words.size(); ++i) {
    const size_t eq = words[i].find('=');
    if (eq == std::string_view::npos) {
      return error(errc::invalid_argument,
                   "fault spec: '" + std::string(words[i]) + "' is not key=value (e.g. to=2)");
    }
    status s = apply_option(rule, words[i].substr(0, eq), words[i].substr(eq + 1));
    if (!s) return s.err();
  }
  if (rule.count == 0) {
    return error(errc::invalid_argument,
                 "fault spec: count=0 would never apply; omit count to apply until cleared");
  }
  if ((rule.kind == fault_kind::delay || rule.kind == fault_kind::reorder) && rule.delay_ms == 0) {
    return error(errc::invalid_argument,
                 "fault spec: " + std::string(words[0]) + " needs ms=N with N > 0");
  }
  return rule;
}

fault_action fault_points::on_send(peer_id from, peer_id to, channel_id channel) {
  fault_action action;
  registry& r = rules();
  std::lock_guard<std::mutex> lock(r.mutex);
  expire(r);
  for (auto it = r.rules.begin(); it != r.rules.end();) {
    fault_rule& rule = it->second.rule;
    const bool sever = rule.kind == fault_kind::sever;
    const bool hit =
        sever ? matches_link(rule, from, to)
              : matches_direction(rule, from, to) && (!rule.channel || *rule.channel == channel);
    std::mt19937_64& random = it->second.random;
    const auto draw = [&random] { return std::uniform_real_distribution<double>(0, 1)(random); };
    if (!hit || (!sever && rule.rate < 1.0 && draw() >= rule.rate)) {
      ++it;
      continue;
    }
    switch (rule.kind) {
      case fault_kind::sever:
        action.severed = true;
        break;
      case fault_kind::drop:
        action.drop = true;
        break;
      case fault_kind::duplicate:
        action.duplicate = true;
        break;
      case fault_kind::delay:
        action.delay_ms = std::max(action.delay_ms, rule.delay_ms);
        break;
      case fault_kind::reorder:
        action.delay_ms = std::max(
            action.delay_ms,
            static_cast<std::uint32_t>(1 + random() % std::max<std::uint32_t>(1, rule.delay_ms)));
        break;
    }
    if (!sever && rule.count > 0 && --rule.count == 0) {
      it = r.rules.erase(it);
    } else {
      ++it;
    }
  }
  armed_.store(!r.rules.empty(), std::memory_order_relaxed);
  return action;
}

bool fault_points::severed(peer_id a, peer_id b) {
  registry& r = rules();
  std::lock_guard<std::mutex> lock(r.mutex);
  expire(r);
  armed_.store(!r.rules.empty(), std::memory_order_relaxed);
  for (const auto& [name, active] : r.rules) {
    if (active.rule.kind == fault_kind::sever && matches_link(active.rule, a, b)) return true;
  }
  return false;
}

}  // namespace brigade::transport
