#include "serve/stop_matcher.hpp"

#include <algorithm>

namespace brigade::serve {

stop_matcher::stop_matcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

stop_matcher::released stop_matcher::push(std::string_view text) {
  held_ += text;
  released out;
  if (stops_.empty()) {
    out.text.swap(held_);
    return out;
  }
  // Released text never holds the start of a possible match, so searching what is held suffices.
  size_t first = std::string::npos;
  for (const auto& s : stops_)
    first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    out.text = held_.substr(0, first);
    out.matched = true;
    held_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string. A stop string is
  // valid UTF-8, so that tail starts on a character boundary.
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t k = std::min(s.size() - 1, held_.size()); k > hold; --k) {
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  out.text = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string stop_matcher::finish() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace brigade::serve
