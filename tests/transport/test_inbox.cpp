#include "tests/transport/test_inbox.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <thread>

namespace brigade::transport::testing {

channel_options inbox::options(bool drop_duplicates) {
  channel_options o;
  o.drop_duplicates = drop_duplicates;
  o.on_message = [this](received_message& m) {
    recorded_message r;
    r.from = m.from;
    r.channel = m.channel;
    r.sequence = m.sequence;
    r.header = std::string(m.header.as_chars());
    r.payload = std::move(m.payload);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      messages_.push_back(std::move(r));
    }
    changed_.notify_all();
  };
  o.on_receive_error = [this](peer_id from, channel_id channel, const error& why) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      failures_.push_back(recorded_failure{from, channel, why});
    }
    changed_.notify_all();
  };
  return o;
}

bool inbox::wait_for_messages(std::size_t count, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return messages_.size() >= count; });
}

bool inbox::wait_for_failures(std::size_t count, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return failures_.size() >= count; });
}

std::vector<recorded_message> inbox::messages() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return messages_;
}

std::vector<recorded_failure> inbox::failures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failures_;
}

std::size_t inbox::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return messages_.size();
}

transport_pair::transport_pair(const std::string& tls, bool drop_duplicates,
                               transport_config overrides_a, bool use_overrides) {
  transport_config config_a = use_overrides ? overrides_a : test_config(1, tls);
  auto started_a = node_transport::start(config_a);
  REQUIRE(started_a.ok());
  auto started_b = node_transport::start(test_config(2, tls));
  REQUIRE(started_b.ok());
  a = std::move(*started_a);
  b = std::move(*started_b);
  REQUIRE(a->open_channel(1, inbox_a.options(drop_duplicates)).ok());
  REQUIRE(b->open_channel(1, inbox_b.options(drop_duplicates)).ok());
  const auto address_a = a->local_address();
  const auto address_b = b->local_address();
  status ab = a->connect(2, byte_view(address_b.data(), address_b.size()));
  INFO((ab ? std::string() : ab.err().describe()));
  REQUIRE(ab.ok());
  status ba = b->connect(1, byte_view(address_a.data(), address_a.size()));
  INFO((ba ? std::string() : ba.err().describe()));
  REQUIRE(ba.ok());
}

stalled_progress::stalled_progress(node_transport& transport)
    : stalled_progress(transport, [] {}) {}

stalled_progress::stalled_progress(node_transport& transport, std::function<void()> first) {
  std::shared_future<void> released = release_.get_future().share();
  std::promise<void> entered;
  std::future<void> stalled = entered.get_future();
  REQUIRE(transport
              .post([released, &entered, first] {
                first();
                entered.set_value();
                released.wait();
              })
              .ok());
  stalled.wait();
}

void stalled_progress::release() {
  if (released_) return;
  released_ = true;
  release_.set_value();
}

bool eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + wait_limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

transport_pair::~transport_pair() {
  a.reset();
  b.reset();
}

status send_and_wait(node_transport& from, peer_id to, channel_id channel, std::string header,
                     byte_buffer payload) {
  send_future done;
  status queued = from.send(to, channel, header, std::move(payload), done.handler());
  if (!queued) return queued;
  std::optional<status> outcome = done.wait_for(wait_limit);
  REQUIRE(outcome.has_value());
  return *outcome;
}

}  // namespace brigade::transport::testing
