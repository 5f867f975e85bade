// Counters, gauges and histograms with labels, and the Prometheus text exposition format
// (version 0.0.4) that /metrics serves. Usable from any layer: no network or actor headers.
//
// Every metric name starts with "brigade_". Families are registered once by name; registering the
// same name again with the same type returns the existing family, so a component can look its
// metrics up by name instead of keeping references. Updates are thread-safe and lock-free for
// counters and gauges; a histogram takes a short lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace brigade::metrics {

/// A value that only goes up (requests served, tokens generated).
class counter {
 public:
  void inc(double by = 1.0);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

/// A value that goes up and down (requests running, queue depth).
class gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void inc(double by = 1.0);
  void dec(double by = 1.0) { inc(-by); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

/// Observations counted into buckets by upper bound (le), with their sum and count.
class histogram {
 public:
  /// `upper_bounds` ascending; the +Inf bucket is implicit.
  explicit histogram(std::vector<double> upper_bounds);
  void observe(double v);

  struct snapshot {
    std::vector<uint64_t> cumulative;  ///< One per upper bound, then +Inf.
    double sum = 0.0;
    uint64_t count = 0;
  };
  snapshot read() const;
  const std::vector<double>& upper_bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // Per bucket, not cumulative; the last is +Inf.
  double sum_ = 0.0;
};

enum class metric_type { counter, gauge, histogram };

/// The shared part of a family: name, help, label names and the text writer.
class family_base {
 public:
  family_base(std::string name, std::string help, metric_type type,
              std::vector<std::string> label_names);
  virtual ~family_base() = default;
  family_base(const family_base&) = delete;
  family_base& operator=(const family_base&) = delete;

  const std::string& name() const { return name_; }
  metric_type type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  /// Appends "# HELP", "# TYPE" and one sample line per child (histograms: several).
  void write(std::string& out) const;

 protected:
  virtual void write_samples(std::string& out) const = 0;
  /// Checks that `values` has one entry per label name.
  void check_arity(const std::vector<std::string>& values) const;
  mutable std::mutex children_mutex_;

 private:
  std::string name_;
  std::string help_;
  metric_type type_;
  std::vector<std::string> label_names_;
};

/// All metrics of one name, one child per combination of label values.
template <class Metric>
class family final : public family_base {
 public:
  family(std::string name, std::string help, std::vector<std::string> label_names,
         std::vector<double> upper_bounds = {});
  /// The child for these label values (in label-name order), created on first use. The
  /// reference stays valid for the registry's lifetime.
  Metric& with(const std::vector<std::string>& label_values);
  /// The only child of a family without labels.
  Metric& get() { return with({}); }

 private:
  void write_samples(std::string& out) const override;
  std::vector<double> upper_bounds_;  // Histograms only.
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> children_;
};

/// A set of metric families and their exposition text.
class registry {
 public:
  /// These return the family registered under `name`, registering it first if needed. A name
  /// reused with another type or other labels is a programming error (std::logic_error).
  family<counter>& add_counter(const std::string& name, const std::string& help,
                               const std::vector<std::string>& label_names = {});
  family<gauge>& add_gauge(const std::string& name, const std::string& help,
                           const std::vector<std::string>& label_names = {});
  family<histogram>& add_histogram(const std::string& name, const std::string& help,
                                   const std::vector<double>& upper_bounds,
                                   const std::vector<std::string>& label_names = {});

  /// Every family in registration order, in the Prometheus text format.
  std::string prometheus_text() const;

 private:
  template <class Metric>
  family<Metric>& add(const std::string& name, const std::string& help, metric_type type,
                      const std::vector<std::string>& label_names,
                      const std::vector<double>& upper_bounds);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<family_base>> families_;
};

/// Seconds from 1 ms to 80 s, for request latencies (time to first token, end to end).
std::vector<double> latency_buckets_s();
/// Seconds from 1 ms to 2.5 s, for per-token latencies.
std::vector<double> token_latency_buckets_s();
/// Token counts 1, 2, 5, 10, ... up to `max_tokens`.
std::vector<double> token_count_buckets(double max_tokens);

/// A sample value as Prometheus writes it: integers without a fraction, +Inf, -Inf, NaN.
std::string format_value(double v);

}  // namespace brigade::metrics
