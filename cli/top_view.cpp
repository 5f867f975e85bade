#include "cli/top_view.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <initializer_list>

namespace brigade::cli {

namespace {

using nlohmann::json;
using lines = std::vector<std::string>;

std::string strf(const char* format, ...) __attribute__((format(printf, 1, 2)));

std::string strf(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  return n < 0 ? std::string() : std::string(buf, std::min<size_t>(size_t(n), sizeof buf - 1));
}

double number(const json& j, const char* key, double fallback) {
  if (!j.is_object()) return fallback;
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

long long integer(const json& j, const char* key, long long fallback) {
  if (!j.is_object()) return fallback;
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<long long>() : fallback;
}

std::string text(const json& j, const char* key) {
  if (!j.is_object()) return "";
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// `s` padded with spaces to `cells` cells, on the right (left-aligned) or on the left.
std::string pad(const std::string& s, size_t cells, bool left_align = true) {
  const std::string cut = fit(s, cells);
  const std::string fill(cells - display_width(cut), ' ');
  return left_align ? cut + fill : fill + cut;
}

// Milliseconds to a short figure; "-" for a negative (unknown) value.
std::string ms_text(double ms) {
  if (ms < 0 || !std::isfinite(ms)) return "-";
  return strf(ms < 10 ? "%.2f" : ms < 1000 ? "%.1f" : "%.0f", ms);
}

// Loads are counts of routed tokens, fractional once averaged: small ones keep two decimals.
std::string load_text(double load, double max) {
  return strf(max < 10 ? "%.2f" : "%.0f", load);
}

// `text` broken at spaces into lines of at most `columns` cells, at most `max_lines` of them.
lines wrap(const std::string& text, size_t columns, size_t max_lines) {
  lines out;
  std::string rest = text;
  while (!rest.empty() && out.size() < max_lines) {
    if (display_width(rest) <= columns || out.size() + 1 == max_lines) {
      out.push_back(fit(rest, columns));
      break;
    }
    size_t cut = rest.rfind(' ', columns);
    if (cut == std::string::npos || cut == 0) cut = columns;
    out.push_back(rest.substr(0, cut));
    rest = rest.substr(std::min(rest.size(), cut + 1));
  }
  return out;
}

// Keeps `section` at `n` lines at most, its last line then saying how many were left out.
void keep(lines& section, size_t n) {
  if (section.size() <= n) return;
  if (n == 0) {
    section.clear();
    return;
  }
  const size_t left_out = section.size() - (n - 1);
  section.resize(n - 1);
  section.push_back(strf("  ... %zu more", left_out));
}

lines title_lines(const top_snapshot& s, size_t columns) {
  lines out{strf("brigade top  %s  frame %lld  every %lld ms  q quits", s.url.c_str(),
                 static_cast<long long>(s.frame), static_cast<long long>(s.interval_ms))};
  if (!s.error.empty()) {
    const std::string retry =
        strf(" (retrying every %lld ms)", static_cast<long long>(s.interval_ms));
    for (auto& l : wrap("! " + s.error + retry, columns, 3))
      out.push_back(l);
  }
  return out;
}

// Orders "expert_shard-2" before "expert_shard-10": by the text, then by the number it ends in.
bool name_less(const std::string& a, const std::string& b) {
  auto split = [](const std::string& s) {
    size_t i = s.size();
    while (i > 0 && std::isdigit(static_cast<unsigned char>(s[i - 1])))
      --i;
    const size_t digits = s.size() - i;
    return std::make_pair(s.substr(0, i),
                          digits == 0 || digits > 18 ? -1LL : std::stoll(s.substr(i)));
  };
  return split(a) < split(b);
}

// The roles in the server's order of kinds, by name within a kind: rows do not swap places
// from one frame to the next.
std::vector<const json*> sorted_roles(const json& status) {
  std::vector<std::string> kinds;
  std::vector<const json*> out;
  for (const auto& r : status) {
    out.push_back(&r);
    if (std::find(kinds.begin(), kinds.end(), text(r, "role")) == kinds.end())
      kinds.push_back(text(r, "role"));
  }
  auto kind_of = [&](const json* r) {
    return std::find(kinds.begin(), kinds.end(), text(*r, "role")) - kinds.begin();
  };
  std::stable_sort(out.begin(), out.end(), [&](const json* a, const json* b) {
    if (kind_of(a) != kind_of(b)) return kind_of(a) < kind_of(b);
    return name_less(text(*a, "name"), text(*b, "name"));
  });
  return out;
}

lines role_lines(const json& status, const step_means& means) {
  if (!status.is_array()) return {"ROLES  - (no status yet)"};
  size_t name_w = 4, role_w = 4;
  for (const auto& r : status) {
    name_w = std::max(name_w, display_width(text(r, "name")));
    role_w = std::max(role_w, display_width(text(r, "role")));
  }
  name_w = std::min<size_t>(name_w, 24);
  role_w = std::min<size_t>(role_w, 16);
  lines out{pad("NAME", name_w) + " " + pad("ROLE", role_w) +
            "  QUEUE  IN FLIGHT   LAST MS   MEAN MS      STEPS"};
  for (const json* r : sorted_roles(status)) {
    out.push_back(pad(text(*r, "name"), name_w) + " " + pad(text(*r, "role"), role_w) +
                  strf(" %6lld %10lld %9s %9s %10lld", integer(*r, "queue_depth", 0),
                       integer(*r, "in_flight", 0), ms_text(number(*r, "last_step_ms", -1)).c_str(),
                       ms_text(means.mean_ms(*r)).c_str(), integer(*r, "steps", 0)));
  }
  if (status.empty()) out.push_back("(the server reports no roles)");
  return out;
}

std::vector<double> numbers(const json& array) {
  std::vector<double> out;
  if (!array.is_array()) return out;
  for (const auto& v : array)
    out.push_back(v.is_number() ? v.get<double>() : 0.0);
  return out;
}

const json* last_window(const json& experts) {
  if (!experts.is_object()) return nullptr;
  const auto it = experts.find("windows");
  if (it == experts.end() || !it->is_array() || it->empty()) return nullptr;
  return &it->back();
}

lines load_lines(const json& experts, size_t columns) {
  if (!experts.is_object()) return {"SHARD LOAD  - (this server has no expert shards)"};
  const json* window = last_window(experts);
  if (!window) {
    return {strf("SHARD LOAD  no sample window closed yet (one closes every %lld steps)",
                 integer(experts, "sample_interval_steps", 0))};
  }
  const std::vector<double> load = numbers((*window)["shard_load"]);
  if (load.empty()) return {"SHARD LOAD  the last window has no shard loads"};
  const auto max_it = std::max_element(load.begin(), load.end());
  const double max = *max_it;
  double sum = 0;
  for (double v : load)
    sum += v;
  const double mean = sum / double(load.size());
  lines out{strf("SHARD LOAD  window %lld: max %s on shard %td, mean %s, max/mean %.2f (| = mean)",
                 integer(*window, "window", 0), load_text(max, max).c_str(), max_it - load.begin(),
                 load_text(mean, max).c_str(), mean > 0 ? max / mean : 0.0)};
  const std::string last_label = strf("shard %zu", load.size() - 1);
  size_t number_w = 1;
  for (double v : load)
    number_w = std::max(number_w, load_text(v, max).size());
  const size_t fixed = last_label.size() + 1 + 1 + number_w + 4;
  const int cells = static_cast<int>(columns > fixed + 4 ? columns - fixed : 4);
  const int mean_cell =
      max > 0 ? std::min(cells - 1, static_cast<int>(std::lround(mean / max * cells))) : -1;
  for (size_t s = 0; s < load.size(); ++s) {
    out.push_back(pad(strf("shard %zu", s), last_label.size()) + " " +
                  load_bar(load[s], max, cells, mean_cell) + " " +
                  pad(load_text(load[s], max), number_w, false) +
                  (load[s] == max && max > 0 ? " max" : ""));
  }
  return out;
}

std::string migration_text(const json& m) {
  if (!m.is_object()) return "no migration running";
  return strf("migration to epoch %lld %s: %lld slots, %.1f s", integer(m, "epoch", 0),
              text(m, "phase").c_str(), integer(m, "moved_slots", 0), number(m, "elapsed_s", 0));
}

lines balance_lines(const json& experts, size_t columns) {
  if (!experts.is_object()) return {"BALANCEDNESS  -"};
  std::vector<double> values;
  for (const auto& w : experts.value("windows", json::array()))
    values.push_back(number(w, "balancedness", 0));
  const json& rebalances = experts.value("rebalances", json::object());
  const std::string second =
      strf("layout epoch %lld, %s, plans adopted %lld, rolled back %lld, rejected %lld",
           integer(experts, "epoch", 0), migration_text(experts.value("migration", json())).c_str(),
           integer(rebalances, "adopted", 0), integer(rebalances, "rolled_back", 0),
           integer(rebalances, "rejected", 0));
  if (values.empty()) return {"BALANCEDNESS  no sample window yet", second};
  const std::string head = "BALANCEDNESS  ";
  const std::string tail =
      strf("  %.3f last of %zu windows (mean/max load, 1 is even)", values.back(), values.size());
  const size_t taken = head.size() + display_width(tail);
  const size_t shown = std::min(values.size(), columns > taken + 8 ? columns - taken : 8);
  const std::vector<double> recent(values.end() - static_cast<std::ptrdiff_t>(shown), values.end());
  return {head + sparkline(recent) + tail, second};
}

std::string clock_text(long long unix_ms) {
  if (unix_ms <= 0) return "--:--:--";
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm local{};
  if (!localtime_r(&t, &local)) return "--:--:--";
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return buf;
}

std::string event_summary(const json& ev) {
  std::string out = pad(text(ev, "kind"), 20) + strf(" epoch %lld", integer(ev, "epoch", 0));
  if (integer(ev, "moved_slots", 0) > 0) out += strf("  moved %lld", integer(ev, "moved_slots", 0));
  if (number(ev, "predicted_balancedness", 0) > 0)
    out += strf("  predicted %.3f", number(ev, "predicted_balancedness", 0));
  if (number(ev, "measured_balancedness", 0) > 0)
    out += strf("  measured %.3f", number(ev, "measured_balancedness", 0));
  if (number(ev, "duration_s", 0) > 0) out += strf("  %.2f s", number(ev, "duration_s", 0));
  for (const char* key : {"actor", "node", "detail"}) {
    if (!text(ev, key).empty()) out += "  " + text(ev, key);
  }
  return out;
}

// Every sample window's measurement is an event too; the sparkline shows those.
constexpr const char* measurement_kind = "balance_measured";

lines event_lines(const top_snapshot& s) {
  lines out{"EVENTS  re-plans and migrations, newest last"};
  // When the whole server is down, the title's error says so already.
  if (!s.events_error.empty() && s.error.empty()) out.push_back("! events: " + s.events_error);
  const size_t heading = out.size();
  for (const auto& ev : s.events) {
    if (text(ev, "kind") == measurement_kind) continue;
    out.push_back(clock_text(integer(ev, "unix_ms", 0)) + "  " + event_summary(ev));
  }
  if (out.size() == heading) out.push_back("no re-plan or migration yet");
  return out;
}

// Events keep their heading and newest lines; older ones give way first.
void keep_newest(lines& events, size_t n) {
  if (events.size() <= n) return;
  if (n == 0) {
    events.clear();
    return;
  }
  events.erase(events.begin() + 1,
               events.begin() + static_cast<std::ptrdiff_t>(events.size() - n + 1));
}

}  // namespace

void step_means::observe(const json& status) {
  if (!status.is_array()) return;
  for (const auto& role : status) {
    const std::string name = text(role, "name");
    const long long steps = integer(role, "steps", -1);
    if (name.empty() || steps < 0) continue;
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      if (by_name_.size() >= max_roles) continue;
      it = by_name_.emplace(name, samples{}).first;
    }
    samples& s = it->second;
    if (steps != s.steps && steps > 0) {
      s.sum_ms += number(role, "last_step_ms", 0);
      ++s.count;
    }
    s.steps = steps;
  }
}

double step_means::mean_ms(const json& role) const {
  const long long steps = integer(role, "steps", 0);
  const double total_ms = number(role.value("detail", json()), "step_ms_total", -1);
  if (total_ms >= 0 && steps > 0) return total_ms / double(steps);
  const auto it = by_name_.find(text(role, "name"));
  if (it == by_name_.end() || it->second.count == 0) return -1;
  return it->second.sum_ms / double(it->second.count);
}

std::vector<std::string> render_top(const top_snapshot& snapshot, const step_means& means,
                                    frame_size size) {
  const size_t columns = static_cast<size_t>(std::max(size.columns, 20));
  const size_t rows = static_cast<size_t>(std::max(size.rows, 4));
  const lines head = title_lines(snapshot, columns);
  lines roles = role_lines(snapshot.status, means);
  // Before any answer, experts is null for want of data, not of expert shards.
  lines load =
      snapshot.status.is_null() ? lines{"SHARD LOAD  -"} : load_lines(snapshot.experts, columns);
  const lines balance = balance_lines(snapshot.experts, columns);
  lines events = event_lines(snapshot);
  // Roles and shards give way to keep a few events in view; the events take what is left.
  const size_t fixed = head.size() + balance.size();
  const size_t free = rows > fixed ? rows - fixed : 0;
  const size_t events_min = std::min<size_t>(events.size(), 4);
  const size_t rest = free > events_min ? free - events_min : 0;
  keep(roles, std::max<size_t>(2, rest > load.size() ? rest - load.size() : 0));
  keep(load, std::max<size_t>(2, rest > roles.size() ? rest - roles.size() : 0));
  const size_t used = roles.size() + load.size();
  keep_newest(events, free > used ? free - used : 0);
  lines out;
  for (const lines* section :
       std::initializer_list<const lines*>{&head, &roles, &load, &balance, &events}) {
    for (const auto& l : *section)
      out.push_back(fit(l, columns));
  }
  if (out.size() > rows) out.resize(rows);
  return out;
}

std::string load_bar(double value, double max, int cells, int mean_cell) {
  static const char* const eighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  if (cells <= 0) return "";
  const double share = max > 0 && std::isfinite(value) ? std::clamp(value / max, 0.0, 1.0) : 0.0;
  const long eighth_count = std::lround(share * cells * 8);
  const int full = static_cast<int>(eighth_count / 8);
  const int part = static_cast<int>(eighth_count % 8);
  std::string out;
  for (int i = 0; i < full; ++i)
    out += "█";
  int used = full;
  if (part > 0) {
    out += eighths[part];
    ++used;
  }
  for (int i = used; i < cells; ++i)
    out += i == mean_cell ? "|" : " ";
  return out;
}

std::string sparkline(const std::vector<double>& values) {
  static const char* const levels[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  std::string out;
  for (double v : values) {
    const double clamped = std::isfinite(v) ? std::clamp(v, 0.0, 1.0) : 0.0;
    out += levels[std::lround(clamped * 7)];
  }
  return out;
}

size_t display_width(const std::string& text) {
  size_t cells = 0;
  for (unsigned char c : text)
    cells += (c & 0xC0) != 0x80;
  return cells;
}

std::string fit(const std::string& text, size_t columns) {
  if (display_width(text) <= columns) return text;
  if (columns == 0) return "";
  std::string out;
  size_t cells = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) != 0x80 && ++cells == columns) break;
    out += text[i];
  }
  return out + "…";
}

}  // namespace brigade::cli
