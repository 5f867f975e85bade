#include "cluster/data_plane.hpp"

#include <algorithm>
#include <cstring>

#include "cluster/data_plane_impl.hpp"
#include "cluster/wire_checks.hpp"
#include "common/log.hpp"

namespace brigade::cluster {
namespace {

using transport::received_message;

void on_expert_call(data_plane::impl* dp, received_message& m) {
  auto h = wire::read<wire::expert_call_header>(m.header);
  if (!h) return log::warn("data plane", "dropped a malformed expert call");
  caf::anon_send(dp->ingress, expert_call_in{m.from, *h, std::move(m.payload)});
}

void on_answer(data_plane::impl* dp, received_message& m) {
  auto h = wire::read<wire::answer_header>(m.header);
  if (!h) return log::warn("data plane", "dropped a malformed answer");
  if (caf::actor proxy = dp->untrack(h->correlation)) {
    caf::anon_send(proxy, answer_in{*h, std::move(m.payload)});
  }
}

void on_weights_call(data_plane::impl* dp, received_message& m) {
  auto h = wire::read<wire::weights_call_header>(m.header);
  if (!h) return log::warn("data plane", "dropped a malformed request for expert weights");
  caf::anon_send(dp->ingress, weights_call_in{m.from, *h});
}

void on_weights_answer(data_plane::impl* dp, received_message& m) {
  auto h = wire::read<wire::weights_answer_header>(m.header);
  if (!h) return log::warn("data plane", "dropped malformed expert weights");
  if (caf::actor proxy = dp->untrack(h->correlation)) {
    caf::anon_send(proxy, weights_answer_in{*h, std::move(m.payload)});
  }
}

// A KV handoff comes as two messages (tokens, then blocks, in either order of arrival): the
// blocks land straight in their buffer and are handed on without a copy.
void on_kv_part(data_plane::impl* dp, received_message& m, bool meta) {
  uint64_t correlation = 0;
  std::optional<wire::kv_meta_header> meta_header;
  if (meta) {
    meta_header = wire::read<wire::kv_meta_header>(m.header);
    if (!meta_header) return log::warn("data plane", "dropped a malformed KV handoff");
    correlation = meta_header->correlation;
  } else {
    auto h = wire::read<wire::kv_data_header>(m.header);
    if (!h) return log::warn("data plane", "dropped malformed KV blocks");
    correlation = h->correlation;
  }
  data_plane::impl::kv_parts parts;
  {
    std::lock_guard<std::mutex> lock(dp->mutex);
    auto& p = dp->kv_assembly[{m.from, correlation}];
    if (meta) {
      p.meta = meta_header;
      p.tokens = std::move(m.payload);
    } else {
      p.blocks = std::move(m.payload);
    }
    p.from = m.from;
    if (!p.meta || !p.blocks) return;
    parts = std::move(p);
    dp->kv_assembly.erase({m.from, correlation});
  }
  const wire::kv_meta_header& h = *parts.meta;
  if (status sizes = wire::check(h, parts.tokens.size(), parts.blocks->size()); !sizes) {
    // The sender waits for an answer: it gets the refusal, and its request an explicit error.
    log::warn("data plane", "refused a KV handoff from peer " + std::to_string(parts.from) + ": " +
                                sizes.err().message);
    wire::answer_header refusal;
    refusal.correlation = correlation;
    refusal.set_message(sizes.err().message);
    (void)dp->send(parts.from, wire::kv_answer, wire::as_bytes(refusal), {});
    return;
  }
  actors::kv_handoff out;
  out.request = h.request;
  out.attempt = h.attempt;
  out.block_tokens = h.block_tokens;
  out.cached_tokens = h.cached_tokens;
  const auto* ids = reinterpret_cast<const int32_t*>(parts.tokens.data());
  out.tokens.assign(ids, ids + h.tokens);
  out.params.stop_ids.assign(ids + h.tokens, ids + h.tokens + h.stop_ids);
  out.params.max_tokens = h.max_tokens;
  out.params.draw_offset = h.draw_offset;
  out.params.sampling.temperature = h.temperature;
  out.params.sampling.top_k = h.top_k;
  out.params.sampling.top_p = h.top_p;
  out.params.sampling.seed = h.seed;
  out.params.sampling.presence_penalty = h.presence_penalty;
  out.params.sampling.frequency_penalty = h.frequency_penalty;
  out.params.sampling.repetition_penalty = h.repetition_penalty;
  out.params.sampling.min_tokens = h.min_tokens;
  const int32_t* biases = ids + h.tokens + h.stop_ids;
  for (int32_t i = 0; i < h.bias_pairs; ++i) {
    model::token_bias b;
    b.token = biases[2 * i];
    std::memcpy(&b.bias, &biases[2 * i + 1], sizeof b.bias);
    out.params.sampling.logit_bias.push_back(b);
  }
  out.params.top_logprobs = h.top_logprobs;
  out.params.prompt_logprobs = h.prompt_logprobs;
  const int32_t* pairs = biases + 2 * h.bias_pairs;
  auto pair_at = [&pairs](int32_t i) {
    model::token_logprob p;
    p.token = pairs[2 * i];
    std::memcpy(&p.logprob, &pairs[2 * i + 1], sizeof p.logprob);
    return p;
  };
  // Each position: the chosen token's pair, then the likeliest ones'.
  auto read_position = [&](int32_t count) {
    model::position_logprobs at;
    at.chosen = pair_at(0);
    for (int32_t i = 1; i < count; ++i)
      at.top.push_back(pair_at(i));
    pairs += 2 * count;
    return at;
  };
  if (h.logprob_pairs > 0) out.logprobs.push_back(read_position(h.logprob_pairs));
  for (int32_t p = 0; p < h.prompt_positions; ++p)
    out.prompt_logprobs.push_back(read_position(1 + std::max(h.prompt_logprobs, 0)));
  const transport::byte_buffer blocks = *parts.blocks;
  out.kv =
      actors::shared_floats::alias(blocks.owner(), reinterpret_cast<const float*>(blocks.data()),
                                   static_cast<size_t>(h.kv_floats));
  caf::anon_send(dp->ingress, kv_call_in{parts.from, correlation, h.target, std::move(out)});
}

status open_channels(data_plane::impl* dp) {
  auto open = [&](wire::channel ch, transport::message_handler handler) {
    transport::channel_options options;
    options.on_message = std::move(handler);
    // A message a link delivers twice (a retransmission, a duplicate fault) is handed over once:
    // a KV handoff that arrived twice would start its sequence twice.
    options.drop_duplicates = true;
    return dp->net->open_channel(ch, std::move(options));
  };
  for (status s :
       {open(wire::expert_call, [dp](received_message& m) { on_expert_call(dp, m); }),
        open(wire::expert_answer, [dp](received_message& m) { on_answer(dp, m); }),
        open(wire::kv_meta, [dp](received_message& m) { on_kv_part(dp, m, true); }),
        open(wire::kv_data, [dp](received_message& m) { on_kv_part(dp, m, false); }),
        open(wire::kv_answer, [dp](received_message& m) { on_answer(dp, m); }),
        open(wire::weights_call, [dp](received_message& m) { on_weights_call(dp, m); }),
        open(wire::weights_answer, [dp](received_message& m) { on_weights_answer(dp, m); })}) {
    if (!s) return s;
  }
  dp->net->on_peer_failure([dp](uint64_t peer, const error& why) {
    {
      std::lock_guard<std::mutex> lock(dp->mutex);
      dp->connected.erase(peer);
    }
    dp->fail_peer(peer, "the data plane lost peer " + std::to_string(peer) + ": " + why.message);
    // UCX's verdict on an endpoint, not the control plane's on the node: made again at once
    // (a node declared down is not), so that the peer is heard again.
    dp->relink(peer);
  });
  return ok_status();
}

}  // namespace

transport::byte_buffer floats_buffer(std::vector<float>&& values) {
  auto owner = std::make_shared<std::vector<float>>(std::move(values));
  const size_t bytes = owner->size() * sizeof(float);
  std::shared_ptr<std::byte> alias(owner, reinterpret_cast<std::byte*>(owner->data()));
  return transport::byte_buffer(std::move(alias), bytes);
}

transport::byte_buffer alias_buffer(const std::shared_ptr<const float>& owner, size_t floats) {
  // The transport only reads a payload it sends; the const_cast never leads to a write.
  std::shared_ptr<std::byte> alias(std::const_pointer_cast<float>(owner),
                                   reinterpret_cast<std::byte*>(const_cast<float*>(owner.get())));
  return transport::byte_buffer(std::move(alias), floats * sizeof(float));
}

uint64_t data_plane::impl::track(uint64_t peer, const caf::actor& proxy) {
  const uint64_t correlation = next_correlation++;
  std::lock_guard<std::mutex> lock(mutex);
  pending[correlation] = {peer, proxy};
  return correlation;
}

caf::actor data_plane::impl::untrack(uint64_t correlation) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = pending.find(correlation);
  if (it == pending.end()) return {};
  caf::actor proxy = std::move(it->second.proxy);
  pending.erase(it);
  return proxy;
}

void data_plane::impl::fail(uint64_t correlation, const std::string& why) {
  if (caf::actor proxy = untrack(correlation)) {
    caf::anon_send(proxy, call_failed{correlation, why});
  }
}

void data_plane::impl::fail_peer(uint64_t peer, const std::string& why) {
  std::vector<std::pair<uint64_t, caf::actor>> failed;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto it = pending.begin(); it != pending.end();) {
      if (it->second.peer == peer) {
        failed.emplace_back(it->first, std::move(it->second.proxy));
        it = pending.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = kv_assembly.begin(); it != kv_assembly.end();) {
      it = it->first.first == peer ? kv_assembly.erase(it) : std::next(it);
    }
  }
  for (auto& [correlation, proxy] : failed)
    caf::anon_send(proxy, call_failed{correlation, why});
}

std::optional<uint64_t> data_plane::impl::peer_for(const caf::node_id& node) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = peer_of_node.find(node);
  if (it == peer_of_node.end()) return std::nullopt;
  return it->second;
}

caf::actor data_plane::impl::local(caf::actor_id id) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = locals.find(id);
  return it == locals.end() ? caf::actor{} : it->second;
}

void data_plane::impl::forget_proxy(const caf::node_id& node, caf::actor_id id) {
  std::lock_guard<std::mutex> lock(mutex);
  proxies.erase({node, id});
}

status data_plane::impl::send(uint64_t peer, transport::channel_id channel,
                              transport::byte_view header, transport::byte_buffer payload,
                              transport::completion_handler done) {
  relink(peer);
  // A send that fails on a link the control plane still counts (its endpoint broke without
  // UCX saying so) forgets the link: the next send connects it afresh.
  auto on_done = [this, peer, done = std::move(done)](const status& outcome) {
    if (!outcome && outcome.err().code == errc::unavailable) forget_link(peer, outcome.err());
    if (done) done(outcome);
  };
  return net->send(peer, channel, header, std::move(payload), std::move(on_done));
}

void data_plane::impl::relink(uint64_t peer) {
  if (stopping) return;
  std::vector<std::byte> address;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto known = addresses.find(peer);
    if (!connected.count(peer) && !declared_down.count(peer) && known != addresses.end()) {
      address = known->second;
    }
  }
  // The transport object outlives its progress thread, where this runs from failure reports.
  transport::node_transport* t = net.get();
  if (address.empty() || !t) return;
  status again = t->connect(peer, {address.data(), address.size()});
  if (again || again.err().message.find("already connected") != std::string::npos) {
    std::lock_guard<std::mutex> lock(mutex);
    connected.insert(peer);
  }
  log::info("data plane", "link to peer " + std::to_string(peer) + " connected again" +
                              (again ? "" : ": " + again.err().message));
}

void data_plane::impl::forget_link(uint64_t peer, const error& why) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!connected.erase(peer)) return;
  }
  log::warn("data plane", "a send to peer " + std::to_string(peer) + " failed (" + why.message +
                              "); its link is made afresh");
  transport::node_transport* t = net.get();
  if (stopping || !t) return;
  (void)t->disconnect(peer, why.message);
  // At once, not on this side's next send: the disconnect also stops hearing the peer, and a
  // node that only answers calls would otherwise never send again, so never hear again.
  relink(peer);
}

void data_plane::impl::send_call(uint64_t peer, transport::channel_id channel,
                                 transport::byte_view header, transport::byte_buffer payload,
                                 uint64_t correlation) {
  auto done = [this, correlation](const status& outcome) {
    if (!outcome) fail(correlation, outcome.err().message);
  };
  status sent = send(peer, channel, header, std::move(payload), done);
  if (!sent) fail(correlation, sent.err().message);
}

data_plane::data_plane(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

data_plane::~data_plane() {
  if (remote_link::current() == this) remote_link::install(nullptr);
  impl_->stopping = true;
  impl_->net.reset();  // stops the progress thread: no handler runs after this
  caf::anon_send_exit(impl_->ingress, caf::exit_reason::user_shutdown);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (auto& [key, proxy] : impl_->proxies)
    caf::anon_send_exit(proxy, caf::exit_reason::user_shutdown);
}

result<std::unique_ptr<data_plane>> data_plane::start(caf::actor_system& sys,
                                                      const transport::transport_config& config) {
  auto p = std::make_unique<impl>();
  p->sys = &sys;
  auto net = transport::node_transport::start(config);
  if (!net) return net.err();
  p->net = std::move(net.value());
  impl* raw = p.get();
  p->ingress = sys.spawn(ingress_behavior, raw);
  status opened = open_channels(raw);
  if (!opened) return opened.err();
  return std::unique_ptr<data_plane>(new data_plane(std::move(p)));
}

uint64_t data_plane::self() const {
  return impl_->net->self();
}

std::vector<std::byte> data_plane::address() const {
  return impl_->net->local_address();
}

status data_plane::add_peer(const peer_entry& peer) {
  if (peer.id == self()) return ok_status();
  {
    // The coordinator sends the whole peer list again whenever a node rejoins: peers already
    // connected keep their endpoint.
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->addresses[peer.id] = peer.address;
    impl_->declared_down.erase(peer.id);
    if (impl_->connected.count(peer.id)) {
      impl_->peer_of_node[peer.node] = peer.id;
      return ok_status();
    }
  }
  status connected = impl_->net->connect(peer.id, {peer.address.data(), peer.address.size()});
  if (!connected) {
    return error(connected.err().code,
                 "data plane: cannot reach node '" + peer.name + "': " + connected.err().message);
  }
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->peer_of_node[peer.node] = peer.id;
  impl_->connected.insert(peer.id);
  return ok_status();
}

void data_plane::peer_down(uint64_t peer, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->connected.erase(peer);
    impl_->declared_down.insert(peer);
  }
  (void)impl_->net->disconnect(peer, why);
  impl_->fail_peer(peer, why);
}

void data_plane::retain_peers(const std::vector<uint64_t>& peers) {
  std::vector<uint64_t> gone;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    for (const auto& [id, address] : impl_->addresses) {
      const bool listed = std::find(peers.begin(), peers.end(), id) != peers.end();
      if (!listed && !impl_->declared_down.count(id)) gone.push_back(id);
    }
  }
  for (uint64_t id : gone)
    peer_down(id, "no longer among the coordinator's nodes");
}

void data_plane::register_local(const caf::actor& actor) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->locals[actor.id()] = actor;
}

namespace {

// The proxy for a remote handle, created on first use; `spawn` makes a new one.
template <class Handle, class Spawn>
Handle view(data_plane::impl& dp, const Handle& handle, Spawn spawn) {
  if (!handle || handle->node() == dp.sys->node()) return handle;
  auto peer = dp.peer_for(handle->node());
  if (!peer) return handle;  // not a data-plane peer: plain CAF
  std::lock_guard<std::mutex> lock(dp.mutex);
  auto& proxy = dp.proxies[{handle->node(), handle->id()}];
  if (!proxy) proxy = spawn(*peer);
  return caf::actor_cast<Handle>(proxy);
}

}  // namespace

actors::expert_shard_actor data_plane::local_view(const actors::expert_shard_actor& shard) {
  return view(*impl_, shard, [&](uint64_t peer) {
    return spawn_shard_proxy(*impl_->sys, impl_.get(), shard, peer);
  });
}

actors::decode_worker_actor data_plane::local_view(const actors::decode_worker_actor& worker) {
  return view(*impl_, worker, [&](uint64_t peer) {
    return spawn_decode_proxy(*impl_->sys, impl_.get(), worker, peer);
  });
}

}  // namespace brigade::cluster
