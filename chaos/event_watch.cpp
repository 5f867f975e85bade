#include "chaos/event_watch.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/wall_clock.hpp"
#include "serve/http_client.hpp"

namespace brigade::chaos {

int64_t event_at_ms(int64_t unix_ms, int64_t now_unix_ms, int64_t now_since_start_ms) {
  return now_since_start_ms - std::max<int64_t>(0, now_unix_ms - unix_ms);
}

event_watch::event_watch(std::string host, uint16_t port, std::string api_key,
                         std::chrono::steady_clock::time_point start,
                         std::function<void(const seen_event&)> on_event)
    : host_(std::move(host)),
      port_(port),
      api_key_(std::move(api_key)),
      start_(start),
      on_event_(std::move(on_event)),
      thread_([this] { loop(); }) {}

event_watch::~event_watch() {
  stop_ = true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (client_) client_->interrupt();
  }
  thread_.join();
}

void event_watch::retarget(uint16_t port) {
  std::lock_guard<std::mutex> lock(mutex_);
  port_ = port;
  since_ = 0;
  if (client_) client_->interrupt();
}

std::vector<seen_event> event_watch::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

void event_watch::loop() {
  while (!stop_) {
    serve::http_client client(host_, port_);
    uint64_t since = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      client_ = &client;
      since = since_;
    }
    auto on_data = [&](const std::string& data) {
      const auto j = nlohmann::json::parse(data, nullptr, false);
      if (!j.is_object()) return !stop_;
      seen_event e;
      const int64_t arrived = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - start_)
                                  .count();
      const int64_t now_unix = unix_ms();
      e.at_ms = event_at_ms(j.value("unix_ms", now_unix), now_unix, arrived);
      e.kind = j.value("kind", std::string());
      e.node = j.value("node", std::string());
      e.actor = j.value("actor", std::string());
      e.detail = j.value("detail", std::string());
      {
        std::lock_guard<std::mutex> lock(mutex_);
        since_ = std::max<uint64_t>(since_, j.value("seq", uint64_t{0}));
        events_.push_back(e);
      }
      if (on_event_) on_event_(e);
      return !stop_;
    };
    (void)client.stream("/v1/events?since=" + std::to_string(since), "",
                        {{"Authorization", "Bearer " + api_key_}}, on_data, "GET");
    {
      std::lock_guard<std::mutex> lock(mutex_);
      client_ = nullptr;
    }
    for (int i = 0; i < 10 && !stop_; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool out_of_contact_at(const std::vector<seen_event>& seen, const std::string& node,
                       int64_t at_ms) {
  bool lost = false;
  for (const seen_event& e : seen) {
    if (e.at_ms > at_ms) break;
    if (e.node != node) continue;
    // A node stopping on its own (SIGTERM) leaves as surely as a lost one.
    if (e.kind == "node_lost" || e.kind == "node_leaving") lost = true;
    if (e.kind == "node_rejoined") lost = false;
  }
  return lost;
}

}  // namespace brigade::chaos
