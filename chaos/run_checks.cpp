#include "chaos/run_checks.hpp"

#include <algorithm>
#include <cmath>

namespace brigade::chaos {
namespace {

// The windows in which the cluster was recovering: from each fault to when it served again
// (after the fault's end, for timed faults).
std::vector<std::pair<int64_t, int64_t>> recovery_windows(const run_result& r) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& f : r.faults) {
    if (f.at_ms < 0) continue;
    const int64_t from = f.at_ms;
    const int64_t base = f.from_end && f.healed_ms >= 0 ? f.healed_ms : f.at_ms;
    const int64_t to = f.serve_again_ms >= 0 ? base + f.serve_again_ms : base + 1000;
    out.emplace_back(from, std::max(from, to));
  }
  return out;
}

bool inside(const std::vector<std::pair<int64_t, int64_t>>& windows, int64_t t) {
  return std::any_of(windows.begin(), windows.end(),
                     [t](const auto& w) { return t >= w.first && t <= w.second; });
}

}  // namespace

latency_stats percentiles(std::vector<double> values) {
  latency_stats out;
  out.samples = static_cast<int64_t>(values.size());
  if (values.empty()) return out;
  std::sort(values.begin(), values.end());
  auto rank = [&](double q) {
    const size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size()))) - 1;
    return values[std::min(i, values.size() - 1)];
  };
  out.p50_ms = rank(0.50);
  out.p99_ms = rank(0.99);
  return out;
}

void judge(const scenario& s, const std::vector<request_spec>& requests,
           const std::vector<std::string>& expected, const std::vector<outcome>& outcomes,
           const std::vector<std::pair<request_spec, outcome>>& probes,
           const std::vector<std::string>& probe_expected, run_result& r) {
  r.requests = static_cast<int>(requests.size());
  std::vector<std::string> examples;
  auto tally = [&](const outcome& o, const std::string& want, const std::string& label) {
    switch (o.how) {
      case outcome::end::complete:
        ++r.completed;
        if (o.text != want) {
          ++r.diverged;
          if (examples.size() < 3) {
            examples.push_back(label + " answered \"" + o.text.substr(0, 60) + "\", the engine \"" +
                               want.substr(0, 60) + "\"");
          }
        }
        break;
      case outcome::end::error:
        ++r.errors;
        if (examples.size() < 3 && s.checks.errors_allowed == 0) {
          examples.push_back(label + " ended with an error: " + o.detail.substr(0, 160));
        }
        break;
      case outcome::end::lost:
      case outcome::end::pending:
        ++r.lost;
        examples.push_back(label + " was lost: " + o.detail);
        break;
      case outcome::end::duplicated:
        ++r.duplicated;
        examples.push_back(label + " was answered twice: " + o.detail);
        break;
    }
  };
  for (size_t i = 0; i < outcomes.size(); ++i)
    tally(outcomes[i], expected[i], "request " + std::to_string(i));
  // Probes are requests too: each must end once, and right when it completes.
  int probe_lost = 0, probe_duplicated = 0, probe_diverged = 0;
  for (size_t i = 0; i < probes.size(); ++i) {
    const outcome& o = probes[i].second;
    if (o.how == outcome::end::duplicated) ++probe_duplicated;
    if (o.how == outcome::end::complete && o.text != probe_expected[i]) ++probe_diverged;
    (void)probe_lost;
  }
  r.duplicated += probe_duplicated;
  r.diverged += probe_diverged;
  const auto windows = recovery_windows(r);
  std::vector<double> ttft_in, ttft_out, tpot_in, tpot_out;
  for (const auto& o : outcomes) {
    if (o.how != outcome::end::complete || o.first_ms < 0) continue;
    (inside(windows, o.sent_ms) ? ttft_in : ttft_out).push_back(double(o.first_ms - o.sent_ms));
    for (size_t c = 1; c < o.chunk_ms.size(); ++c) {
      const double gap = double(o.chunk_ms[c] - o.chunk_ms[c - 1]);
      (inside(windows, o.chunk_ms[c - 1]) ? tpot_in : tpot_out).push_back(gap);
    }
  }
  r.ttft_recovery = percentiles(ttft_in);
  r.ttft_outside = percentiles(ttft_out);
  r.tpot_recovery = percentiles(tpot_in);
  r.tpot_outside = percentiles(tpot_out);
  const checks_spec& c = s.checks;
  if (r.lost > 0) r.failures.push_back(std::to_string(r.lost) + " requests lost");
  if (r.duplicated > 0) r.failures.push_back(std::to_string(r.duplicated) + " answered twice");
  if (c.identical && r.diverged > 0) {
    r.failures.push_back(std::to_string(r.diverged) + " answers differ from the engine's");
  }
  if (r.errors > c.errors_allowed) {
    r.failures.push_back(std::to_string(r.errors) + " requests ended with an error (" +
                         std::to_string(c.errors_allowed) + " allowed)");
  }
  for (size_t i = 0; i < r.faults.size(); ++i) {
    const fault_result& f = r.faults[i];
    const std::string name = "fault " + std::to_string(i + 1) + " (" + f.what + ")";
    if (!f.detected) r.failures.push_back(name + " was never noticed");
    // A restarted node's rejoining is reported, not bounded: it waits for the next re-dial.
    const bool bounded = s.faults[i].action != fault_spec::kind::restart;
    if (bounded && f.detected && f.detect_ms >= 0 && c.detect_ms > 0 && f.detect_ms > c.detect_ms) {
      r.failures.push_back(name + " noticed after " + std::to_string(f.detect_ms) + " ms (bound " +
                           std::to_string(c.detect_ms) + " ms)");
    }
    if (s.faults[i].action == fault_spec::kind::term && f.at_ms >= 0 &&
        (f.exit_ms < 0 || (c.exit_ms > 0 && f.exit_ms > c.exit_ms))) {
      r.failures.push_back(name + ": the process " +
                           (f.exit_ms < 0
                                ? std::string("did not exit")
                                : "exited only after " + std::to_string(f.exit_ms) + " ms") +
                           " (bound " + std::to_string(c.exit_ms) + " ms)");
    }
    const bool probed =
        f.at_ms >= 0 && s.faults[i].action != fault_spec::kind::replan &&
        !(s.faults[i].target.what == fault_target::kind::coordinator &&
          (s.faults[i].action == fault_spec::kind::kill ||
           (s.faults[i].action == fault_spec::kind::stop && s.faults[i].for_ms == 0)));
    if (probed && c.serve_again_ms > 0 && f.serve_again_ms < 0) {
      r.failures.push_back(name + ": no new request was served within 60 s");
    } else if (probed && c.serve_again_ms > 0 && f.serve_again_ms > c.serve_again_ms) {
      r.failures.push_back(name + ": serving again took " + std::to_string(f.serve_again_ms) +
                           " ms (bound " + std::to_string(c.serve_again_ms) + " ms)");
    }
  }
  if (c.kv_leaks && !r.kv_leaks.empty()) {
    std::string which;
    for (const auto& k : r.kv_leaks)
      which += (which.empty() ? "" : "; ") + k;
    r.failures.push_back("KV blocks did not come back: " + which);
  }
  if (c.memory_growth > 0 && r.memory_growth > c.memory_growth) {
    r.failures.push_back(
        "a surviving node's memory grew " + std::to_string(r.memory_growth).substr(0, 4) +
        "x (bound " + std::to_string(c.memory_growth).substr(0, 4) + "x): " + r.memory_growth_node);
  }
  if (r.failures.empty()) return;
  for (const auto& e : examples)
    r.failures.push_back("  e.g. " + e);
}

void check_pools(const nlohmann::json& status, run_result& r) {
  if (!status.is_array()) {
    r.kv_leaks.push_back("the coordinator did not answer GET /v1/status at the end");
    return;
  }
  for (const auto& s : status) {
    const std::string role = s.value("role", "");
    const std::string name = s.value("name", "");
    const auto& d = s.contains("detail") ? s["detail"] : nlohmann::json();
    if (!d.is_object()) continue;
    if (role == "decode") {
      ++r.kv_pools_checked;
      const int64_t free = d.value("free_kv_blocks", int64_t{-1});
      const int64_t all = d.value("kv_blocks", int64_t{-2});
      if (free != all) {
        r.kv_leaks.push_back(name + " has " + std::to_string(all - free) + " of " +
                             std::to_string(all) + " blocks taken with no request running");
      }
    } else if (role == "prefill" && d.contains("cache") && d["cache"].is_object()) {
      ++r.kv_pools_checked;
      const auto& c = d["cache"];
      if (!c.value("enabled", false)) continue;
      const int64_t used = c.value("used_blocks", int64_t{0});
      const int64_t cached = c.value("cached_blocks", int64_t{0});
      const int64_t pinned = c.value("pinned_blocks", int64_t{0});
      if (used != cached || pinned != 0 || c.value("invariant_violations", 0) != 0) {
        r.kv_leaks.push_back(name + " holds " + std::to_string(used) + " blocks for " +
                             std::to_string(cached) + " cached, " + std::to_string(pinned) +
                             " pinned, with no request running");
      }
    }
  }
}

}  // namespace brigade::chaos
