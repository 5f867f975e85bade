#include "cli/top_events.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

namespace brigade::cli {

top_events::top_events(top_target target, std::string api_key, size_t keep, int64_t retry_ms)
    : target_(std::move(target)),
      api_key_(std::move(api_key)),
      keep_(std::max<size_t>(keep, 1)),
      retry_ms_(std::max<int64_t>(retry_ms, 1)),
      thread_([this] { loop(); }) {}

top_events::~top_events() {
  std::unique_lock<std::mutex> lock(mutex_);
  stop_ = true;
  wake_.notify_all();
  // An interrupt that lands while the client is between its check and its connect is missed:
  // repeat it until the thread is out.
  while (!done_) {
    if (client_) client_->interrupt();
    wake_.wait_for(lock, std::chrono::milliseconds(20));
  }
  lock.unlock();
  thread_.join();
}

std::vector<nlohmann::json> top_events::last() const {
  std::vector<nlohmann::json> out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [kind, events] : events_)
      out.insert(out.end(), events.begin(), events.end());
  }
  auto seq = [](const nlohmann::json& e) { return e.value("seq", uint64_t{0}); };
  std::stable_sort(out.begin(), out.end(), [&](const nlohmann::json& a, const nlohmann::json& b) {
    return seq(a) < seq(b);
  });
  return out;
}

std::string top_events::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void top_events::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    const uint64_t since = since_;
    lock.unlock();
    read_stream(since);
    lock.lock();
    wake_.wait_for(lock, std::chrono::milliseconds(retry_ms_), [this] { return stop_; });
  }
  done_ = true;
  wake_.notify_all();
}

void top_events::read_stream(uint64_t since) {
  serve::http_client client(target_.host, target_.port);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) return;
    client_ = &client;
    error_.clear();
  }
  serve::header_list headers;
  if (!api_key_.empty()) headers.emplace_back("Authorization", "Bearer " + api_key_);
  auto on_data = [this](const std::string& data) {
    auto event = nlohmann::json::parse(data, nullptr, false);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!event.is_object()) return !stop_;
    const auto seq = event.find("seq");
    if (seq == event.end() || !seq->is_number_unsigned()) return !stop_;
    since_ = std::max(since_, seq->get<uint64_t>());
    const auto kind = event.find("kind");
    const std::string name =
        kind != event.end() && kind->is_string() ? kind->get<std::string>() : "";
    if (events_.size() >= max_kinds && !events_.count(name)) return !stop_;
    auto& of_kind = events_[name];
    of_kind.push_back(std::move(event));
    while (of_kind.size() > keep_)
      of_kind.pop_front();
    return !stop_;
  };
  const std::string path = "/v1/events";
  auto answer =
      client.stream(path + "?since=" + std::to_string(since), "", headers, on_data, "GET");
  std::lock_guard<std::mutex> lock(mutex_);
  client_ = nullptr;
  if (stop_) return;
  if (!answer) {
    error_ = describe_unreachable(target_.url, answer.err().message);
  } else if (answer->status != 200) {
    error_ = describe_http_failure(path, answer->status, answer->body, !api_key_.empty());
  } else {
    error_ = "the server ended the event stream";
  }
}

}  // namespace brigade::cli
