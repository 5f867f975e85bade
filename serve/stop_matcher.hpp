// Stop strings: generated text is released only once it can no longer be the start of a stop
// string, and everything from the first match on is cut. A matched request is cancelled by the
// caller, so it never costs more than the tokens already produced.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace brigade::serve {

class stop_matcher {
 public:
  /// `stops` must hold no empty string.
  explicit stop_matcher(std::vector<std::string> stops);

  struct released {
    std::string text;      ///< Safe to send to the client now.
    bool matched = false;  ///< A stop string matched: `text` ends right before it.
  };
  /// Adds newly decoded text (complete UTF-8 characters).
  released push(std::string_view text);
  /// The text still held back when generation ends without a match.
  std::string finish();

 private:
  std::vector<std::string> stops_;
  std::string held_;
};

}  // namespace brigade::serve
