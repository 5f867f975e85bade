#include "bench/skewed_workload.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>

#include "model/routing_profile.hpp"

namespace brigade::bench {
namespace {

// A candidate's routing as one unit vector over (layer, expert).
std::vector<double> unit_profile(const std::vector<std::vector<int64_t>>& counts) {
  std::vector<double> v;
  for (const auto& layer : counts)
    v.insert(v.end(), layer.begin(), layer.end());
  double norm = 0.0;
  for (double x : v)
    norm += x * x;
  norm = std::sqrt(norm);
  for (double& x : v)
    x = norm > 0 ? x / norm : 0.0;
  return v;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    s += a[i] * b[i];
  return s;
}

// How much of a unit profile sits on few (layer, expert) cells: the sum of the fourth powers.
double concentration(const std::vector<double>& unit) {
  double s = 0.0;
  for (double x : unit)
    s += x * x * x * x;
  return s;
}

double expert_skew(const std::vector<std::vector<double>>& load) {
  if (load.empty()) return 1.0;
  double total = 0.0;
  for (const auto& layer : load) {
    const double sum = std::accumulate(layer.begin(), layer.end(), 0.0);
    const double most = layer.empty() ? 0.0 : *std::max_element(layer.begin(), layer.end());
    total += sum > 0 ? most * static_cast<double>(layer.size()) / sum : 1.0;
  }
  return total / static_cast<double>(load.size());
}

}  // namespace

result<std::vector<skew_phase>> build_skewed_workload(const model::loaded_model& m,
                                                      gpu::backend& dev, const skew_options& o) {
  const int vocab = m.config.vocab_size;
  if (o.phases < 1 || o.prompts_per_phase < 1 || o.alphabet < 1 || o.prompt_tokens < 1 ||
      o.candidates < o.phases * o.prompts_per_phase) {
    return error(errc::invalid_argument,
                 "a skewed workload needs at least phases x prompts_per_phase candidates");
  }
  std::mt19937_64 rng(o.seed);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<std::vector<int64_t>>> counts;
  std::vector<std::vector<double>> profiles;
  for (int c = 0; c < o.candidates; ++c) {
    std::vector<int32_t> alphabet;
    for (int a = 0; a < o.alphabet; ++a)  // Ids 0-2 are often special: skip a few.
      alphabet.push_back(static_cast<int32_t>(8 + rng() % static_cast<uint64_t>(vocab - 8)));
    std::vector<int32_t> p;
    for (int t = 0; t < o.prompt_tokens; ++t)
      p.push_back(alphabet[rng() % alphabet.size()]);
    auto routed = model::profile_routing(m, dev, p);
    if (!routed) return routed.err();
    profiles.push_back(unit_profile(routed.value()));
    counts.push_back(std::move(routed.value()));
    prompts.push_back(std::move(p));
  }
  std::vector<bool> taken(prompts.size(), false);
  std::vector<skew_phase> phases;
  std::vector<double> before(profiles[0].size(), 0.0);  // the earlier phases' routing, summed
  for (int ph = 0; ph < o.phases; ++ph) {
    // The seed: the most concentrated candidate first, then the one least like what came before.
    size_t seed = prompts.size();
    double best = -1e300;
    for (size_t c = 0; c < prompts.size(); ++c) {
      if (taken[c]) continue;
      const double score = ph == 0 ? concentration(profiles[c]) : -dot(profiles[c], before);
      if (score > best) best = score, seed = c;
    }
    std::vector<size_t> order;
    for (size_t c = 0; c < prompts.size(); ++c)
      if (!taken[c]) order.push_back(c);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return dot(profiles[a], profiles[seed]) > dot(profiles[b], profiles[seed]);
    });
    order.resize(static_cast<size_t>(o.prompts_per_phase));
    skew_phase phase;
    phase.load.assign(counts[0].size(), std::vector<double>(counts[0][0].size(), 0.0));
    for (size_t c : order) {
      taken[c] = true;
      phase.prompts.push_back(prompts[c]);
      for (size_t l = 0; l < counts[c].size(); ++l)
        for (size_t e = 0; e < counts[c][l].size(); ++e)
          phase.load[l][e] += static_cast<double>(counts[c][l][e]);
      for (size_t i = 0; i < before.size(); ++i)
        before[i] += profiles[c][i];
    }
    phase.expert_max_over_mean = expert_skew(phase.load);
    phases.push_back(std::move(phase));
  }
  return phases;
}

}  // namespace brigade::bench
