// Small text helpers for tests: a whole file as a string, counting occurrences.
#pragma once

#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>

namespace brigade::testing {

/// The whole file at `path`; empty when it cannot be read.
inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// How often `needle` occurs in `text`, overlaps included.
inline size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

}  // namespace brigade::testing
