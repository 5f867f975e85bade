#include <catch2/catch.hpp>

#include "tests/transport/test_inbox.hpp"

using namespace brigade;
using namespace brigade::transport;
using namespace brigade::transport::testing;

TEST_CASE("small messages arrive in order, both ways", "[transport]") {
  const std::string tls = GENERATE(as<std::string>{}, tcp_tls, shm_tls);
  INFO("UCX_TLS=" << tls);
  transport_pair pair(tls);
  constexpr int count = 1000;
  for (int i = 0; i < count; ++i) {
    const std::string text = std::to_string(i);
    REQUIRE(pair.a->send(2, 1, "h" + text, byte_buffer::copy_of(text)).ok());
    REQUIRE(pair.b->send(1, 1, "h" + text, byte_buffer::copy_of(text)).ok());
  }
  REQUIRE(pair.inbox_b.wait_for_messages(count));
  REQUIRE(pair.inbox_a.wait_for_messages(count));
  for (inbox* box : {&pair.inbox_a, &pair.inbox_b}) {
    const auto messages = box->messages();
    REQUIRE(messages.size() == count);
    for (int i = 0; i < count; ++i) {
      const std::string text = std::to_string(i);
      CHECK(messages[i].sequence == static_cast<std::uint64_t>(i + 1));
      CHECK(messages[i].header == "h" + text);
      CHECK(std::string(messages[i].payload.view().as_chars()) == text);
    }
  }
  CHECK(pair.inbox_b.messages().front().from == 1);
  CHECK(pair.inbox_a.messages().front().from == 2);
}
