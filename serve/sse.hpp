// Server-sent events, as the OpenAI streaming API frames them: "data: <json>\n\n" per event and
// "data: [DONE]\n\n" at the end. The writer is used by the server; the reader by the load
// generator and the tests, which read streams the way a client does.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace brigade::serve {

/// One event carrying `data`; a multi-line payload becomes one "data:" line per line.
std::string sse_event(std::string_view data);
/// The event that ends an OpenAI stream.
std::string sse_done();

/// Splits a byte stream, fed in arbitrary pieces, into the data of its events.
class sse_reader {
 public:
  /// An event or an unterminated line longer than this is a framing error.
  explicit sse_reader(size_t max_event_bytes = 1 << 20) : max_event_bytes_(max_event_bytes) {}

  /// Appends the data of every event completed by `bytes` to `events`. Returns false (and
  /// stays failed) when the stream breaks the framing or the size bound.
  bool feed(std::string_view bytes, std::vector<std::string>& events);
  bool failed() const { return failed_; }
  /// True when bytes of an unfinished event are pending (a stream should not end there).
  bool partial() const { return !line_.empty() || has_data_; }

 private:
  void take_line(std::vector<std::string>& events);

  size_t max_event_bytes_;
  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool failed_ = false;
};

}  // namespace brigade::serve
