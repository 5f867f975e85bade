#include "transport/node_transport.hpp"

#include <cstring>

#include "transport/frame_header.hpp"
#include "transport/progress_engine.hpp"
#include "transport/worker_address.hpp"

namespace brigade::transport {

result<std::unique_ptr<node_transport>> node_transport::start(const transport_config& config) {
  result<std::unique_ptr<progress_engine>> engine = progress_engine::start(config);
  if (!engine) return engine.err();
  return std::unique_ptr<node_transport>(new node_transport(std::move(*engine)));
}

node_transport::node_transport(std::unique_ptr<progress_engine> engine)
    : engine_(std::move(engine)) {}

node_transport::~node_transport() = default;

peer_id node_transport::self() const {
  return engine_->config().self_id;
}

error_mode node_transport::errors() const {
  return effective_error_mode(engine_->config());
}

const std::vector<std::byte>& node_transport::local_address() const {
  return engine_->local_address();
}

status node_transport::open_channel(channel_id channel, channel_options options) {
  if (!options.on_message) {
    return error(errc::invalid_argument,
                 "transport: channel " + std::to_string(channel) + " needs an on_message handler");
  }
  progress_engine* engine = engine_.get();
  return engine_->call([engine, channel, &options] {
    engine->in().open_channel(channel, std::move(options));
    return ok_status();
  });
}

status node_transport::connect(peer_id peer, byte_view address) {
  result<worker_address> decoded = worker_address::decode(address);
  if (!decoded) return decoded.err();
  if (decoded->node != peer) {
    return error(errc::invalid_argument,
                 "transport: connect(" + std::to_string(peer) + ") got the address of node " +
                     std::to_string(decoded->node) + "; the control plane mixed up two peers");
  }
  progress_engine* engine = engine_.get();
  return engine_->call([engine, &decoded, peer] {
    status s = engine->out().connect(*decoded);
    if (s) engine->in().admit(peer);
    return s;
  });
}

status node_transport::disconnect(peer_id peer, const std::string& reason) {
  progress_engine* engine = engine_.get();
  const error why(errc::unavailable,
                  "transport: peer " + std::to_string(peer) + " disconnected: " + reason);
  return engine_->call([engine, peer, &why] {
    engine->drop_peer(peer, why, false);
    return ok_status();
  });
}

void node_transport::on_peer_failure(peer_failure_handler handler) {
  progress_engine* engine = engine_.get();
  engine_->call([engine, &handler] {
    engine->set_peer_failure_handler(std::move(handler));
    return ok_status();
  });
}

status node_transport::send(peer_id peer, channel_id channel, byte_view header, byte_buffer payload,
                            completion_handler done) {
  if (header.size() > engine_->config().max_header_bytes) {
    return error(errc::invalid_argument, "transport: a " + std::to_string(header.size()) +
                                             "-byte header exceeds max_header_bytes (" +
                                             std::to_string(engine_->config().max_header_bytes) +
                                             "); put bulk data in the payload");
  }
  if (engine_->on_progress_thread() &&
      engine_->out().try_send_now(peer, channel, header, payload, done)) {
    return ok_status();
  }
  auto op = std::make_unique<send_operation>();
  op->to = peer;
  op->channel = channel;
  op->am_header.resize(frame_header::wire_bytes + header.size());
  if (!header.empty()) {
    std::memcpy(op->am_header.data() + frame_header::wire_bytes, header.data(), header.size());
  }
  op->payload = std::move(payload);
  op->done = std::move(done);
  return engine_->submit(std::move(op));
}

status node_transport::post(std::function<void()> task) {
  return engine_->post(std::move(task));
}

bool node_transport::on_progress_thread() const {
  return engine_->on_progress_thread();
}

transport_stats node_transport::stats() const {
  return engine_->stats();
}

result<std::string> node_transport::describe_peer(peer_id peer) {
  progress_engine* engine = engine_.get();
  result<std::string> out = std::string();
  status s = engine_->call([engine, peer, &out] {
    out = engine->out().describe(peer);
    return ok_status();
  });
  if (!s) return s.err();
  return out;
}

}  // namespace brigade::transport
