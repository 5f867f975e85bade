// The data plane's actors: proxies that stand for remote expert shards and decode workers, and
// the ingress that hands arriving calls to local ones.
#include <algorithm>
#include <cstring>

#include "cluster/data_plane_impl.hpp"
#include "cluster/wire_checks.hpp"
#include "common/log.hpp"

namespace brigade::cluster {
namespace {

constexpr std::chrono::seconds local_call_timeout{30};

caf::error remote_error(const std::string& why) {
  return caf::make_error(caf::sec::runtime_error, why);
}

// What both proxies keep: the calls waiting for an answer.
struct proxy_state {
  std::map<uint64_t, caf::response_promise> waiting;
  static inline const char* name = "data_plane_proxy";
};

using proxy_pointer = caf::stateful_actor<proxy_state>*;

void fail_all(proxy_pointer self, const std::string& why) {
  for (auto& [correlation, rp] : self->state.waiting)
    rp.deliver(remote_error(why));
  self->state.waiting.clear();
}

// Dies with the remote actor, failing what waits, so workers see the failure at once.
void watch_remote(proxy_pointer self, data_plane::impl* dp, const caf::actor& remote) {
  self->monitor(remote);
  const caf::node_id node = remote->node();
  const caf::actor_id id = remote->id();
  self->set_down_handler([=](caf::down_msg& dm) {
    fail_all(self, "remote actor down: " + to_string(dm.reason));
    dp->forget_proxy(node, id);
    self->quit(dm.reason);
  });
}

caf::result<actors::expert_reply> forward_expert(proxy_pointer self, data_plane::impl* dp,
                                                 uint64_t peer, caf::actor_id target,
                                                 actors::expert_request& req) {
  auto rp = self->make_response_promise();
  const uint64_t correlation = dp->track(peer, caf::actor_cast<caf::actor>(self));
  self->state.waiting[correlation] = rp;
  wire::expert_call_header h;
  h.correlation = correlation;
  h.target = target;
  h.step = req.step;
  h.caller = static_cast<uint32_t>(req.caller);
  h.epoch = req.epoch;
  h.layer = req.layer;
  h.rows = req.input.rows;
  h.cols = req.input.cols;
  // Slots and rows in one payload: activations are small next to KV blocks, so one copy here
  // buys a single message.
  const size_t slot_bytes = req.slots.size() * sizeof(int32_t);
  const size_t row_bytes = req.input.data.size() * sizeof(float);
  auto payload = transport::byte_buffer::allocate(slot_bytes + row_bytes);
  std::memcpy(payload.data(), req.slots.data(), slot_bytes);
  std::memcpy(payload.data() + slot_bytes, req.input.data.data(), row_bytes);
  dp->send_call(peer, wire::expert_call, wire::as_bytes(h), std::move(payload), correlation);
  return caf::delegated<actors::expert_reply>{};
}

void on_expert_answer(proxy_pointer self, answer_in& a) {
  auto it = self->state.waiting.find(a.header.correlation);
  if (it == self->state.waiting.end()) return;
  caf::response_promise rp = std::move(it->second);
  self->state.waiting.erase(it);
  if (!a.header.ok) return rp.deliver(remote_error(a.header.message_text()));
  if (status sizes = wire::check(a.header, a.payload.size()); !sizes) {
    return rp.deliver(remote_error(sizes.err().message));
  }
  actors::expert_reply reply;
  reply.step = a.header.step;
  reply.layer = a.header.layer;
  reply.output.rows = a.header.rows;
  reply.output.cols = a.header.cols;
  const auto* values = reinterpret_cast<const float*>(a.payload.data());
  reply.output.data.assign(values, values + a.payload.size() / sizeof(float));
  rp.deliver(std::move(reply));
}

// Expert weights for a migration: the request is a header, the answer's payload the weights.
caf::result<actors::expert_weights> forward_weights(proxy_pointer self, data_plane::impl* dp,
                                                    uint64_t peer, caf::actor_id target,
                                                    int32_t layer, int32_t expert) {
  auto rp = self->make_response_promise();
  const uint64_t correlation = dp->track(peer, caf::actor_cast<caf::actor>(self));
  self->state.waiting[correlation] = rp;
  wire::weights_call_header h;
  h.correlation = correlation;
  h.target = target;
  h.layer = layer;
  h.expert = expert;
  dp->send_call(peer, wire::weights_call, wire::as_bytes(h), {}, correlation);
  return caf::delegated<actors::expert_weights>{};
}

void on_weights_answer(proxy_pointer self, weights_answer_in& a) {
  auto it = self->state.waiting.find(a.header.correlation);
  if (it == self->state.waiting.end()) return;
  caf::response_promise rp = std::move(it->second);
  self->state.waiting.erase(it);
  if (!a.header.ok) return rp.deliver(remote_error(a.header.message_text()));
  if (a.payload.size() != a.header.bytes) {
    return rp.deliver(remote_error("expert weights arrived with " +
                                   std::to_string(a.payload.size()) + " bytes, their header says " +
                                   std::to_string(a.header.bytes)));
  }
  actors::expert_weights w;
  w.layer = a.header.layer;
  w.expert = a.header.expert;
  w.hidden = a.header.hidden;
  w.inter = a.header.inter;
  w.type = static_cast<gpu::dtype>(a.header.type);
  w.size = a.payload.size();
  // The received buffer is handed on as it is: the weights are unpacked from it once.
  const transport::byte_buffer payload = a.payload;
  w.bytes = std::shared_ptr<const std::byte>(payload.owner(), payload.data());
  rp.deliver(std::move(w));
}

void on_call_failed(proxy_pointer self, call_failed& f) {
  auto it = self->state.waiting.find(f.correlation);
  if (it == self->state.waiting.end()) return;
  it->second.deliver(remote_error(f.why));
  self->state.waiting.erase(it);
}

caf::behavior shard_proxy(proxy_pointer self, data_plane::impl* dp,
                          actors::expert_shard_actor remote, uint64_t peer) {
  watch_remote(self, dp, caf::actor_cast<caf::actor>(remote));
  const caf::actor_id target = remote->id();
  return {
      [=](actors::expert_request& req) { return forward_expert(self, dp, peer, target, req); },
      [=](answer_in& a) { on_expert_answer(self, a); },
      [=](actors::weights_atom, int32_t layer, int32_t expert, bool) {
        return forward_weights(self, dp, peer, target, layer, expert);
      },
      [=](weights_answer_in& a) { on_weights_answer(self, a); },
      [=](call_failed& f) { on_call_failed(self, f); },
      // Control messages stay on CAF.
      [=](actors::prepare_atom atom, actors::shard_plan& plan) {
        return self->delegate(remote, atom, std::move(plan));
      },
      [=](actors::release_atom atom, uint64_t epoch) { self->send(remote, atom, epoch); },
      [=](actors::abort_atom atom, uint64_t epoch) { self->send(remote, atom, epoch); },
      [=](actors::status_atom atom) { return self->delegate(remote, atom); },
  };
}

// KV blocks go as their own message, straight from the prefill worker's buffer.
// A (token, logprob) pair as two int32 words: the logprob's float bits in the second.
void add_logprob_pair(std::vector<int32_t>& ids, const model::token_logprob& p) {
  int32_t bits = 0;
  std::memcpy(&bits, &p.logprob, sizeof bits);
  ids.push_back(p.token);
  ids.push_back(bits);
}

caf::result<bool> forward_kv(proxy_pointer self, data_plane::impl* dp, uint64_t peer,
                             caf::actor_id target, actors::kv_handoff& h) {
  auto rp = self->make_response_promise();
  const uint64_t correlation = dp->track(peer, caf::actor_cast<caf::actor>(self));
  self->state.waiting[correlation] = rp;
  wire::kv_meta_header m;
  m.correlation = correlation;
  m.target = target;
  m.request = h.request;
  m.attempt = h.attempt;
  m.block_tokens = h.block_tokens;
  m.tokens = static_cast<int32_t>(h.tokens.size());
  m.stop_ids = static_cast<int32_t>(h.params.stop_ids.size());
  m.cached_tokens = h.cached_tokens;
  m.max_tokens = h.params.max_tokens;
  m.draw_offset = h.params.draw_offset;
  m.temperature = h.params.sampling.temperature;
  m.top_k = h.params.sampling.top_k;
  m.top_p = h.params.sampling.top_p;
  m.seed = h.params.sampling.seed;
  m.kv_floats = h.kv.size();
  m.top_logprobs = h.params.top_logprobs;
  const model::sampling_params& sampling = h.params.sampling;
  m.presence_penalty = sampling.presence_penalty;
  m.frequency_penalty = sampling.frequency_penalty;
  m.repetition_penalty = sampling.repetition_penalty;
  m.min_tokens = sampling.min_tokens;
  m.bias_pairs = static_cast<int32_t>(sampling.logit_bias.size());
  std::vector<int32_t> ids = h.tokens;
  ids.insert(ids.end(), h.params.stop_ids.begin(), h.params.stop_ids.end());
  for (const model::token_bias& b : sampling.logit_bias) {
    int32_t bits = 0;
    std::memcpy(&bits, &b.bias, sizeof bits);
    ids.push_back(b.token);
    ids.push_back(bits);
  }
  if (!h.logprobs.empty()) {
    const model::position_logprobs& first = h.logprobs.front();
    add_logprob_pair(ids, first.chosen);
    for (const auto& p : first.top)
      add_logprob_pair(ids, p);
    m.logprob_pairs = static_cast<int32_t>(1 + first.top.size());
  }
  m.prompt_logprobs = h.params.prompt_logprobs;
  m.prompt_positions = static_cast<int32_t>(h.prompt_logprobs.size());
  for (const model::position_logprobs& p : h.prompt_logprobs) {
    add_logprob_pair(ids, p.chosen);
    // Exactly 1 + prompt_logprobs pairs per position, as the header says (the receiver checks).
    for (size_t i = 0; i < static_cast<size_t>(std::max(m.prompt_logprobs, 0)); ++i)
      add_logprob_pair(ids, i < p.top.size() ? p.top[i] : model::token_logprob{});
  }
  auto tokens = transport::byte_buffer::copy_of({ids.data(), ids.size() * sizeof(int32_t)});
  dp->send_call(peer, wire::kv_meta, wire::as_bytes(m), std::move(tokens), correlation);
  wire::kv_data_header d{correlation};
  dp->send_call(peer, wire::kv_data, wire::as_bytes(d), alias_buffer(h.kv.owner(), h.kv.size()),
                correlation);
  return caf::delegated<bool>{};
}

void on_kv_answer(proxy_pointer self, answer_in& a) {
  auto it = self->state.waiting.find(a.header.correlation);
  if (it == self->state.waiting.end()) return;
  if (a.header.ok) {
    it->second.deliver(true);
  } else {
    it->second.deliver(remote_error(a.header.message_text()));
  }
  self->state.waiting.erase(it);
}

caf::behavior decode_proxy(proxy_pointer self, data_plane::impl* dp,
                           actors::decode_worker_actor remote, uint64_t peer) {
  watch_remote(self, dp, caf::actor_cast<caf::actor>(remote));
  const caf::actor_id target = remote->id();
  return {
      [=](actors::kv_handoff& h) { return forward_kv(self, dp, peer, target, h); },
      [=](answer_in& a) { on_kv_answer(self, a); },
      [=](call_failed& f) { on_call_failed(self, f); },
      [=](actors::cancel_atom atom, uint64_t request, uint32_t attempt) {
        self->send(remote, atom, request, attempt);
      },
      [=](actors::status_atom atom) { return self->delegate(remote, atom); },
  };
}

void answer(data_plane::impl* dp, uint64_t to, transport::channel_id channel, wire::answer_header h,
            transport::byte_buffer payload) {
  (void)dp->send(to, channel, wire::as_bytes(h), std::move(payload));
}

void serve_expert_call(caf::event_based_actor* self, data_plane::impl* dp, expert_call_in& in) {
  wire::answer_header h;
  h.correlation = in.header.correlation;
  h.step = in.header.step;
  h.layer = in.header.layer;
  const auto shard = caf::actor_cast<actors::expert_shard_actor>(dp->local(in.header.target));
  if (!shard) {
    h.set_message("no expert shard with that id on this node");
    return answer(dp, in.from, wire::expert_answer, h, {});
  }
  if (status sizes = wire::check(in.header, in.payload.size()); !sizes) {
    h.set_message(sizes.err().message);
    return answer(dp, in.from, wire::expert_answer, h, {});
  }
  const size_t rows = static_cast<size_t>(in.header.rows);
  const size_t cols = static_cast<size_t>(in.header.cols);
  actors::expert_request req;
  req.step = in.header.step;
  // Every call from another node comes through this actor: the caller names the worker on its
  // node, so that the shard counts each worker's steps apart.
  req.caller = in.from ^ (uint64_t{in.header.caller} * 0x9E3779B97F4A7C15ULL);
  req.epoch = in.header.epoch;
  req.layer = in.header.layer;
  const auto* slots = reinterpret_cast<const int32_t*>(in.payload.data());
  req.slots.assign(slots, slots + rows);
  const auto* values = reinterpret_cast<const float*>(in.payload.data() + rows * sizeof(int32_t));
  req.input.rows = in.header.rows;
  req.input.cols = in.header.cols;
  req.input.data.assign(values, values + rows * cols);
  const uint64_t from = in.from;
  self->request(shard, local_call_timeout, std::move(req))
      .then(
          [=](actors::expert_reply& reply) mutable {
            h.ok = 1;
            h.rows = reply.output.rows;
            h.cols = reply.output.cols;
            answer(dp, from, wire::expert_answer, h, floats_buffer(std::move(reply.output.data)));
          },
          [=](caf::error& err) mutable {
            h.set_message(to_string(err));
            answer(dp, from, wire::expert_answer, h, {});
          });
}

void serve_weights_call(caf::event_based_actor* self, data_plane::impl* dp, weights_call_in& in) {
  wire::weights_answer_header h;
  h.correlation = in.header.correlation;
  h.layer = in.header.layer;
  h.expert = in.header.expert;
  const auto shard = caf::actor_cast<actors::expert_shard_actor>(dp->local(in.header.target));
  const uint64_t from = in.from;
  auto send = [dp, from](const wire::weights_answer_header& header, transport::byte_buffer body) {
    (void)dp->send(from, wire::weights_answer, wire::as_bytes(header), std::move(body));
  };
  if (!shard) {
    h.set_message("no expert shard with that id on this node");
    return send(h, {});
  }
  // The asking shard is on another node: it needs the bytes.
  self->request(shard, local_call_timeout, actors::weights_atom_v, h.layer, h.expert, false)
      .then(
          [=](actors::expert_weights& w) mutable {
            h.ok = 1;
            h.bytes = w.size;
            h.hidden = w.hidden;
            h.inter = w.inter;
            h.type = static_cast<int32_t>(w.type);
            // Sent straight from the exported copy; the transport only reads it.
            std::shared_ptr<std::byte> bytes(w.bytes, const_cast<std::byte*>(w.bytes.get()));
            send(h, transport::byte_buffer(std::move(bytes), w.size));
          },
          [=](caf::error& err) mutable {
            h.set_message(to_string(err));
            send(h, {});
          });
}

void serve_kv_call(caf::event_based_actor* self, data_plane::impl* dp, kv_call_in& in) {
  wire::answer_header h;
  h.correlation = in.correlation;
  const auto worker = caf::actor_cast<actors::decode_worker_actor>(dp->local(in.target));
  if (!worker) {
    h.set_message("no decode worker with that id on this node");
    return answer(dp, in.from, wire::kv_answer, h, {});
  }
  const uint64_t from = in.from;
  self->request(worker, local_call_timeout, std::move(in.handoff))
      .then(
          [=](bool) mutable {
            h.ok = 1;
            answer(dp, from, wire::kv_answer, h, {});
          },
          [=](caf::error& err) mutable {
            h.set_message(to_string(err));
            answer(dp, from, wire::kv_answer, h, {});
          });
}

}  // namespace

caf::behavior ingress_behavior(caf::event_based_actor* self, data_plane::impl* dp) {
  return {
      [=](expert_call_in& in) { serve_expert_call(self, dp, in); },
      [=](kv_call_in& in) { serve_kv_call(self, dp, in); },
      [=](weights_call_in& in) { serve_weights_call(self, dp, in); },
  };
}

caf::actor spawn_shard_proxy(caf::actor_system& sys, data_plane::impl* dp,
                             actors::expert_shard_actor remote, uint64_t peer) {
  return sys.spawn(shard_proxy, dp, std::move(remote), peer);
}

caf::actor spawn_decode_proxy(caf::actor_system& sys, data_plane::impl* dp,
                              actors::decode_worker_actor remote, uint64_t peer) {
  return sys.spawn(decode_proxy, dp, std::move(remote), peer);
}

}  // namespace brigade::cluster
