// The data plane takes whatever a peer sends over UCX. A header whose counts do not match its
// payload (negative, or so large that they wrap around to the payload's length) gets a refusal
// naming the mismatch, and the node goes on serving well-formed calls. The peer here is a bare
// transport that writes the frames by hand.
#include "cluster/data_plane.hpp"

#include <caf/all.hpp>

#include <catch2/catch.hpp>

#include "actors/expert_shard.hpp"
#include "cluster/wire.hpp"
#include "deploy/message_types.hpp"
#include "tests/transport/test_inbox.hpp"

using namespace brigade;
using namespace brigade::cluster;
using namespace brigade::transport::testing;

namespace {

constexpr uint64_t node_id = 1, peer_id = 2;

// Stands in for an expert shard: answers every row with itself doubled.
caf::behavior doubling_shard() {
  return {[](actors::expert_request& req) {
    actors::expert_reply reply;
    reply.step = req.step;
    reply.layer = req.layer;
    reply.output = req.input;
    for (float& v : reply.output.data)
      v *= 2;
    return reply;
  }};
}

struct node_and_peer {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<data_plane> plane;
  inbox answers;
  std::unique_ptr<transport::node_transport> peer;
  caf::actor shard;

  node_and_peer() {
    cfg.set("logger.verbosity", caf::atom("quiet"));
    deploy::register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    auto p = data_plane::start(*sys, test_config(node_id, tcp_tls));
    REQUIRE(p.ok());
    plane = std::move(p.value());
    auto t = transport::node_transport::start(test_config(peer_id, tcp_tls));
    REQUIRE(t.ok());
    peer = std::move(t.value());
    for (auto ch : {wire::expert_answer, wire::kv_answer})
      REQUIRE(peer->open_channel(ch, answers.options()).ok());
    const auto address = plane->address();
    REQUIRE(peer->connect(node_id, {address.data(), address.size()}).ok());
    REQUIRE(plane->add_peer({peer_id, "peer", caf::node_id{}, peer->local_address()}).ok());
    shard = sys->spawn(doubling_shard);
    plane->register_local(shard);
  }
  ~node_and_peer() {
    peer.reset();
    plane.reset();
    caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  }

  // Sends a header and payload, then waits for the answer it brings.
  recorded_message call(wire::channel ch, transport::byte_view header,
                        transport::byte_buffer payload) {
    const size_t before = answers.size();
    REQUIRE(
        send_and_wait(*peer, node_id, ch, std::string(header.as_chars()), std::move(payload)).ok());
    REQUIRE(answers.wait_for_messages(before + 1));
    return answers.messages()[before];
  }
};

wire::answer_header answer_of(const recorded_message& m) {
  auto h = wire::read<wire::answer_header>(
      {reinterpret_cast<const std::byte*>(m.header.data()), m.header.size()});
  REQUIRE(h);
  return *h;
}

transport::byte_buffer expert_payload(const std::vector<int32_t>& slots,
                                      const std::vector<float>& rows) {
  auto out = transport::byte_buffer::allocate(slots.size() * 4 + rows.size() * 4);
  std::memcpy(out.data(), slots.data(), slots.size() * 4);
  std::memcpy(out.data() + slots.size() * 4, rows.data(), rows.size() * 4);
  return out;
}

}  // namespace

TEST_CASE("expert calls whose counts do not match their payload are refused; good ones answered",
          "[cluster][data_plane]") {
  node_and_peer n;
  wire::expert_call_header h;
  h.correlation = 7;
  h.target = n.shard.id();
  // (2^64 - 1) * 4 + (2^64 - 1)^2 * 4 wraps to the empty payload's 0 bytes.
  h.rows = -1;
  h.cols = -1;
  auto refused = answer_of(n.call(wire::expert_call, wire::as_bytes(h), {}));
  CHECK(refused.correlation == 7);
  CHECK(refused.ok == 0);
  CHECK_THAT(refused.message_text(),
             Catch::Contains("expert call") && Catch::Contains("rows -1, cols -1"));

  h.correlation = 8;
  h.rows = 2;
  h.cols = 3;
  auto good =
      n.call(wire::expert_call, wire::as_bytes(h), expert_payload({0, 1}, {1, 2, 3, 4, 5, 6}));
  const auto answered = answer_of(good);
  CHECK(answered.correlation == 8);
  REQUIRE(answered.ok == 1);
  CHECK(answered.rows == 2);
  CHECK(answered.cols == 3);
  REQUIRE(good.payload.size() == 6 * sizeof(float));
  std::vector<float> values(6);
  std::memcpy(values.data(), good.payload.data(), good.payload.size());
  CHECK(values == std::vector<float>{2, 4, 6, 8, 10, 12});
}

TEST_CASE("a KV handoff whose counts do not match its payload is refused, not dropped",
          "[cluster][data_plane]") {
  node_and_peer n;
  wire::kv_meta_header meta;
  meta.correlation = 11;
  meta.target = n.shard.id();
  meta.tokens = -1;  // -1 + 1 ids: 0 bytes when added as unsigned 64-bit counts
  meta.stop_ids = 1;
  REQUIRE(send_and_wait(*n.peer, node_id, wire::kv_meta,
                        std::string(wire::as_bytes(meta).as_chars()), {})
              .ok());
  wire::kv_data_header data{11};
  auto refused = answer_of(n.call(wire::kv_data, wire::as_bytes(data), {}));
  CHECK(refused.correlation == 11);
  CHECK(refused.ok == 0);
  CHECK_THAT(refused.message_text(),
             Catch::Contains("token list") && Catch::Contains("tokens -1, stop ids 1"));
}
