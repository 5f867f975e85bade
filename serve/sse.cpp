#include "serve/sse.hpp"

namespace brigade::serve {

std::string sse_event(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 8);
  size_t start = 0;
  while (true) {
    const size_t nl = data.find('\n', start);
    out += "data: ";
    out += data.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    out += '\n';
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  out += '\n';
  return out;
}

std::string sse_done() {
  return "data: [DONE]\n\n";
}

bool sse_reader::feed(std::string_view bytes, std::vector<std::string>& events) {
  if (failed_) return false;
  for (char c : bytes) {
    if (c == '\n') {
      if (!line_.empty() && line_.back() == '\r') line_.pop_back();
      take_line(events);
      line_.clear();
    } else {
      line_ += c;
    }
    if (line_.size() + data_.size() > max_event_bytes_) {
      failed_ = true;
      return false;
    }
  }
  return true;
}

void sse_reader::take_line(std::vector<std::string>& events) {
  if (line_.empty()) {
    // A blank line ends the event; an event without data is dispatched by no one.
    if (has_data_) events.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line_[0] == ':') return;  // A comment.
  const size_t colon = line_.find(':');
  const std::string_view field = std::string_view(line_).substr(0, colon);
  if (field != "data") return;  // event:, id: and retry: carry nothing OpenAI streams use.
  std::string_view value;
  if (colon != std::string::npos) {
    value = std::string_view(line_).substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  if (has_data_) data_ += '\n';
  data_ += value;
  has_data_ = true;
}

}  // namespace brigade::serve
