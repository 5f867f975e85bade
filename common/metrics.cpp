#include "common/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace brigade::metrics {
namespace {

void atomic_add(std::atomic<double>& target, double by) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + by, std::memory_order_relaxed)) {
  }
}

bool valid_name(const std::string& name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
    const bool digit = c >= '0' && c <= '9';
    if (!letter && !(digit && i > 0)) return false;
  }
  return true;
}

// HELP text escapes backslash and newline; label values also escape the double quote.
std::string escape(const std::string& text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

// {a="x",b="y"} with an optional extra label (histograms' le); empty when there are no labels.
std::string label_text(const std::vector<std::string>& names,
                       const std::vector<std::string>& values, const std::string& extra_name = "",
                       const std::string& extra_value = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += out.empty() ? "{" : ",";
    out += names[i] + "=\"" + escape(values[i], true) + "\"";
  }
  if (!extra_name.empty()) {
    out += out.empty() ? "{" : ",";
    out += extra_name + "=\"" + extra_value + "\"";
  }
  if (!out.empty()) out += "}";
  return out;
}

const char* type_name(metric_type t) {
  switch (t) {
    case metric_type::counter:
      return "counter";
    case metric_type::gauge:
      return "gauge";
    case metric_type::histogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

void counter::inc(double by) {
  if (by < 0) throw std::logic_error("a counter cannot decrease");
  atomic_add(value_, by);
}

void gauge::inc(double by) {
  atomic_add(value_, by);
}

histogram::histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {
  if (!std::is_sorted(bounds_.begin(), bounds_.end()) ||
      std::adjacent_find(bounds_.begin(), bounds_.end()) != bounds_.end()) {
    throw std::logic_error("histogram bucket bounds must be strictly ascending");
  }
}

void histogram::observe(double v) {
  // The first bucket whose upper bound is >= v; Prometheus buckets are inclusive (le).
  const size_t bucket =
      static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[bucket];
  sum_ += v;
}

histogram::snapshot histogram::read() const {
  snapshot s;
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t running = 0;
  s.cumulative.reserve(counts_.size());
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.sum = sum_;
  s.count = running;
  return s;
}

family_base::family_base(std::string name, std::string help, metric_type type,
                         std::vector<std::string> label_names)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)) {
  if (name_.rfind("brigade_", 0) != 0 || !valid_name(name_, true)) {
    throw std::logic_error("metric name '" + name_ + "' must be brigade_[a-zA-Z0-9_:]*");
  }
  for (const auto& l : label_names_) {
    if (!valid_name(l, false) || l.rfind("__", 0) == 0 || l == "le") {
      throw std::logic_error("metric " + name_ + ": bad label name '" + l + "'");
    }
  }
}

void family_base::write(std::string& out) const {
  out += "# HELP " + name_ + " " + escape(help_, false) + "\n";
  out += "# TYPE " + name_ + " " + type_name(type_) + "\n";
  write_samples(out);
}

void family_base::check_arity(const std::vector<std::string>& values) const {
  if (values.size() != label_names_.size()) {
    throw std::logic_error("metric " + name_ + " takes " + std::to_string(label_names_.size()) +
                           " label values, got " + std::to_string(values.size()));
  }
}

template <class Metric>
family<Metric>::family(std::string name, std::string help, std::vector<std::string> label_names,
                       std::vector<double> upper_bounds)
    : family_base(std::move(name), std::move(help),
                  std::is_same<Metric, counter>::value ? metric_type::counter
                  : std::is_same<Metric, gauge>::value ? metric_type::gauge
                                                       : metric_type::histogram,
                  std::move(label_names)),
      upper_bounds_(std::move(upper_bounds)) {}

template <class Metric>
Metric& family<Metric>::with(const std::vector<std::string>& label_values) {
  check_arity(label_values);
  std::lock_guard<std::mutex> lock(children_mutex_);
  auto& slot = children_[label_values];
  if (!slot) {
    if constexpr (std::is_same<Metric, histogram>::value) {
      slot = std::make_unique<histogram>(upper_bounds_);
    } else {
      slot = std::make_unique<Metric>();
    }
  }
  return *slot;
}

template <class Metric>
void family<Metric>::write_samples(std::string& out) const {
  std::lock_guard<std::mutex> lock(children_mutex_);
  for (const auto& [values, metric] : children_) {
    if constexpr (std::is_same<Metric, histogram>::value) {
      const histogram::snapshot s = metric->read();
      const auto& bounds = metric->upper_bounds();
      for (size_t i = 0; i <= bounds.size(); ++i) {
        const std::string le = i < bounds.size() ? format_value(bounds[i]) : "+Inf";
        out += name() + "_bucket" + label_text(label_names(), values, "le", le) + " " +
               format_value(static_cast<double>(s.cumulative[i])) + "\n";
      }
      out += name() + "_sum" + label_text(label_names(), values) + " " + format_value(s.sum) + "\n";
      out += name() + "_count" + label_text(label_names(), values) + " " +
             format_value(static_cast<double>(s.count)) + "\n";
    } else {
      out +=
          name() + label_text(label_names(), values) + " " + format_value(metric->value()) + "\n";
    }
  }
}

template class family<counter>;
template class family<gauge>;
template class family<histogram>;

template <class Metric>
family<Metric>& registry::add(const std::string& name, const std::string& help, metric_type type,
                              const std::vector<std::string>& label_names,
                              const std::vector<double>& upper_bounds) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& f : families_) {
    if (f->name() != name) continue;
    if (f->type() != type || f->label_names() != label_names) {
      throw std::logic_error("metric " + name +
                             " is already registered with another type or labels");
    }
    return static_cast<family<Metric>&>(*f);
  }
  auto created = std::make_unique<family<Metric>>(name, help, label_names, upper_bounds);
  family<Metric>& ref = *created;
  families_.push_back(std::move(created));
  return ref;
}

family<counter>& registry::add_counter(const std::string& name, const std::string& help,
                                       const std::vector<std::string>& label_names) {
  return add<counter>(name, help, metric_type::counter, label_names, {});
}

family<gauge>& registry::add_gauge(const std::string& name, const std::string& help,
                                   const std::vector<std::string>& label_names) {
  return add<gauge>(name, help, metric_type::gauge, label_names, {});
}

family<histogram>& registry::add_histogram(const std::string& name, const std::string& help,
                                           const std::vector<double>& upper_bounds,
                                           const std::vector<std::string>& label_names) {
  if (!std::is_sorted(upper_bounds.begin(), upper_bounds.end()) ||
      std::adjacent_find(upper_bounds.begin(), upper_bounds.end()) != upper_bounds.end()) {
    throw std::logic_error("metric " + name + ": bucket bounds must be strictly ascending");
  }
  return add<histogram>(name, help, metric_type::histogram, label_names, upper_bounds);
}

std::string registry::prometheus_text() const {
  std::string out;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& f : families_)
    f->write(out);
  return out;
}

std::vector<double> latency_buckets_s() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
          0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
}

std::vector<double> token_latency_buckets_s() {
  return {0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
          0.075, 0.1,    0.15,  0.2,  0.3,   0.4,  0.5,   0.75, 1.0,  2.5};
}

std::vector<double> token_count_buckets(double max_tokens) {
  std::vector<double> out;
  for (double decade = 1; decade <= max_tokens; decade *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (decade * m <= max_tokens) out.push_back(decade * m);
    }
  }
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  // The shortest text that reads back as the same double ("0.1", "42", "1e-05").
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace brigade::metrics
