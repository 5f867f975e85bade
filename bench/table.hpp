// Plain-text tables for benchmark output: people read tables, scripts read --json.
#pragma once

#include <string>
#include <vector>

namespace brigade::bench {

class table {
 public:
  explicit table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add_row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  /// Columns padded to their widest cell, numbers right-aligned.
  std::string render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

/// "%.*f" without iostreams.
std::string fixed(double value, int decimals);

}  // namespace brigade::bench
