#include "transport/outbound.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "transport/fault_points.hpp"
#include "transport/frame_header.hpp"
#include "transport/ucx_error.hpp"

namespace brigade::transport {

struct outbound::peer_state {
  peer_id id = 0;
  ucp_ep_h ep = nullptr;
  outbound* owner = nullptr;
  /// Last sequence number used per channel; a node talks on few channels, so a flat list is
  /// fastest.
  std::vector<std::pair<channel_id, std::uint64_t>> sequences;
  intrusive_list<send_operation> in_flight;
  /// Set once disconnect() or a failure started closing the endpoint: UCX errors are ignored.
  bool closing = false;
  bool failed = false;
  void* close_request = nullptr;
};

namespace {

std::string peer_name(peer_id peer) {
  return "peer " + std::to_string(peer);
}

}  // namespace

outbound::outbound(ucp_worker_h worker, const transport_config& config,
                   registration_cache& registrations, stats_counters& stats,
                   std::atomic<std::size_t>& outstanding)
    : worker_(worker),
      config_(config),
      stats_(stats),
      outstanding_(outstanding),
      registrations_(registrations) {}

outbound::~outbound() {
  const auto free_all = [](intrusive_list<send_operation>& list) {
    while (send_operation* op = list.pop_front())
      delete op;
  };
  for (auto& entry : peers_)
    free_all(entry.second->in_flight);
  for (auto& peer : closing_)
    free_all(peer->in_flight);
  free_all(orphans_);
}

status outbound::connect(const worker_address& address) {
  if (peers_.count(address.node)) {
    return error(errc::invalid_argument, "transport: " + peer_name(address.node) +
                                             " is already connected; disconnect() it first");
  }
  // A new endpoint must not meet the node's last one in UCX's TCP connection matching while
  // that one still closes: UCX 1.13 then fails an assertion in its progress (tcp_ep.c,
  // "!(ep->flags & UCT_TCP_EP_FLAG_CTX_TYPE_TX)") and aborts the whole process. Seen once in
  // about 500 random chaos runs: a node linked again to a peer killed mid-send while the failed
  // endpoint's forced close was still pending.
  if (!wait_closed(address.node, std::chrono::milliseconds(100))) {
    return error(errc::unavailable, "transport: the last link to " + peer_name(address.node) +
                                        " is still closing; connect again later");
  }
  const error_mode mode = effective_error_mode(config_);
  if (address.errors != mode) {
    return error(errc::invalid_argument,
                 "transport: " + peer_name(address.node) + " uses error mode '" +
                     to_string(address.errors) + "' (UCX_TLS='" + address.tls +
                     "') but this node uses '" + to_string(mode) + "' (UCX_TLS='" + config_.tls +
                     "'); give every node the same transports");
  }
  auto peer = std::make_unique<peer_state>();
  peer->id = address.node;
  peer->owner = this;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address.ucx_address.data());
  params.err_mode =
      mode == error_mode::peer ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  params.err_handler.cb = &outbound::on_endpoint_error;
  params.err_handler.arg = peer.get();
  const ucs_status_t s = ucp_ep_create(worker_, &params, &peer->ep);
  if (s != UCS_OK) {
    return ucx_error(errc::unavailable,
                     "transport: cannot create an endpoint to " + peer_name(address.node) +
                         " (UCX_TLS='" + config_.tls + "', the peer's '" + address.tls +
                         "'; both must share a transport)",
                     s);
  }
  // A link made again numbers on from where the last one stopped: the peer may never have seen
  // that link fail and still holds its duplicate window, where numbers starting again at 1 would
  // all read as repeats and be dropped.
  if (auto retired = retired_sequences_.find(address.node); retired != retired_sequences_.end()) {
    peer->sequences = std::move(retired->second);
    retired_sequences_.erase(retired);
  }
  peers_.emplace(address.node, std::move(peer));
  return ok_status();
}

bool outbound::wait_closed(peer_id id, std::chrono::milliseconds limit) {
  const clock::time_point deadline = clock::now() + limit;
  for (;;) {
    const bool pending = std::any_of(closing_.begin(), closing_.end(), [id](const auto& peer) {
      return peer->id == id && peer->close_request &&
             ucp_request_check_status(peer->close_request) == UCS_INPROGRESS;
    });
    if (!pending) return true;
    if (clock::now() >= deadline) return false;
    // Only UCX's own progress: its callbacks here record (completions, endpoint errors) and
    // run no handler of ours.
    ucp_worker_progress(worker_);
  }
}

bool outbound::disconnect(peer_id id, const error& why) {
  auto node = peers_.extract(id);
  if (node.empty()) return false;
  std::unique_ptr<peer_state> peer = std::move(node.mapped());
  peer->closing = true;
  fail_delayed(id, why, false);
  // Handlers run now (fail fast); UCX still owns the requests and releases them, with an error,
  // when the forced close purges them, or when the worker is destroyed.
  while (send_operation* op = peer->in_flight.pop_front()) {
    complete_early(*op, why);
    orphans_.push_back(op);
  }
  start_close(std::move(peer), true);
  return true;
}

void outbound::submit(std::unique_ptr<send_operation> op) {
  const auto it = peers_.find(op->to);
  if (it == peers_.end()) {
    const peer_id to = op->to;
    complete(std::move(op), error(errc::unavailable, "transport: no endpoint to " + peer_name(to) +
                                                         "; connect() it first (or it was "
                                                         "disconnected)"));
    return;
  }
  peer_state& peer = *it->second;
  frame_header header;
  header.channel = op->channel;
  header.header_bytes = static_cast<std::uint16_t>(op->am_header.size() - frame_header::wire_bytes);
  header.sender = config_.self_id;
  header.sequence = ++sequence_of(peer, op->channel);
  header.payload_bytes = op->payload.size();
  header.encode(op->am_header.data());
  if (fault_points::armed() && apply_faults(op)) return;
  post(peer, std::move(op));
}

std::uint64_t& outbound::sequence_of(peer_state& peer, channel_id channel) {
  for (auto& entry : peer.sequences) {
    if (entry.first == channel) return entry.second;
  }
  return peer.sequences.emplace_back(channel, 0).second;
}

bool outbound::try_send_now(peer_id to, channel_id channel, byte_view header,
                            const byte_buffer& payload, completion_handler& done) {
  constexpr std::size_t stack_header_bytes = 256;
  if (payload.size() >= config_.rendezvous_threshold_bytes ||
      frame_header::wire_bytes + header.size() > stack_header_bytes || fault_points::armed()) {
    return false;
  }
  const auto it = peers_.find(to);
  // Pending sends to this peer must go first, so a new message may not overtake them.
  if (it == peers_.end() || !it->second->in_flight.empty()) return false;
  peer_state& peer = *it->second;
  std::uint64_t& sequence = sequence_of(peer, channel);
  frame_header frame;
  frame.channel = channel;
  frame.header_bytes = static_cast<std::uint16_t>(header.size());
  frame.sender = config_.self_id;
  frame.sequence = sequence + 1;
  frame.payload_bytes = payload.size();
  std::byte am_header[stack_header_bytes];
  frame.encode(am_header);
  if (!header.empty())
    std::memcpy(am_header + frame_header::wire_bytes, header.data(), header.size());
  ucp_request_param_t param{};
  // The header lives on this stack frame, so UCX must finish with it before returning.
  param.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
  const ucs_status_ptr_t sent = ucp_am_send_nbx(peer.ep, frame_header::am_id, am_header,
                                                frame_header::wire_bytes + header.size(),
                                                payload.data(), payload.size(), &param);
  if (UCS_PTR_STATUS(sent) == UCS_ERR_NO_RESOURCE) return false;
  ++sequence;
  if (sent == nullptr) {
    stats_counters::bump(stats_.sent_messages);
    stats_counters::bump(stats_.sent_bytes, payload.size());
    if (done) finished_.push_back(finished{std::move(done), ok_status(), payload.size(), false});
    return true;
  }
  const error failed = ucx_error(
      errc::unavailable, "transport: send to " + peer_name(to) + " failed", UCS_PTR_STATUS(sent));
  finished_.push_back(finished{std::move(done), failed, payload.size(), false});
  return true;
}

bool outbound::apply_faults(std::unique_ptr<send_operation>& op) {
  const fault_action action = fault_points::on_send(config_.self_id, op->to, op->channel);
  if (action.severed) {
    stats_counters::bump(stats_.faults_applied);
    const std::string text = "transport: the link between node " + std::to_string(config_.self_id) +
                             " and " + peer_name(op->to) + " is severed by a fault point";
    complete(std::move(op), error(errc::unavailable, text));
    return true;
  }
  if (action.drop) {
    stats_counters::bump(stats_.faults_applied);
    complete(std::move(op), ok_status());
    return true;
  }
  if (action.duplicate) {
    stats_counters::bump(stats_.faults_applied);
    op->duplicate = true;
  }
  if (action.delay_ms > 0) {
    stats_counters::bump(stats_.faults_applied);
    op->due = clock::now() + std::chrono::milliseconds(action.delay_ms);
    delayed_.push_back(std::move(op));
    return true;
  }
  return false;
}

void outbound::post(peer_state& peer, std::unique_ptr<send_operation> op) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &outbound::on_send_done;
  param.user_data = op.get();
  if (op->payload.size() >= config_.rendezvous_threshold_bytes) {
    result<std::shared_ptr<memory_registration>> registration = registrations_.acquire(op->payload);
    stats_.registration_hits.store(registrations_.hits(), std::memory_order_relaxed);
    stats_.registration_misses.store(registrations_.misses(), std::memory_order_relaxed);
    if (!registration) {
      complete(std::move(op), registration.err());
      return;
    }
    op->registration = std::move(*registration);
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_MEMH;
    param.flags = UCP_AM_SEND_FLAG_RNDV;
    param.memh = op->registration->handle();
  }
  op->owner = this;
  const int copies = op->duplicate ? 2 : 1;
  for (int i = 0; i < copies; ++i) {
    const ucs_status_ptr_t request =
        ucp_am_send_nbx(peer.ep, frame_header::am_id, op->am_header.data(), op->am_header.size(),
                        op->payload.data(), op->payload.size(), &param);
    if (request == nullptr) continue;
    if (UCS_PTR_IS_ERR(request)) {
      op->outcome =
          ucx_error(errc::unavailable, "transport: send to " + peer_name(peer.id) + " failed",
                    UCS_PTR_STATUS(request));
      break;
    }
    op->requests[op->ucx_pending++] = request;
  }
  if (op->ucx_pending == 0) {
    status outcome = op->outcome;
    complete(std::move(op), std::move(outcome));
    return;
  }
  op->posted = clock::now();
  peer.in_flight.push_back(op.release());
}

bool outbound::has_in_flight() const {
  for (const auto& entry : peers_)
    if (!entry.second->in_flight.empty()) return true;
  return false;
}

void outbound::check_stalled(clock::time_point now, std::chrono::milliseconds limit) {
  if (limit.count() <= 0) return;
  for (auto& [id, peer] : peers_) {
    const send_operation* oldest = peer->in_flight.front();
    if (peer->failed || peer->closing || !oldest || now - oldest->posted < limit) continue;
    peer->failed = true;
    failed_peers_.emplace_back(
        id, error(errc::unavailable, "transport: no send to " + peer_name(id) + " completed for " +
                                         std::to_string(limit.count()) +
                                         " ms; its endpoint is taken as broken"));
  }
}

void outbound::on_send_done(void* request, ucs_status_t s, void* user_data) {
  auto* op = static_cast<send_operation*>(user_data);
  ucp_request_free(request);
  for (void*& r : op->requests) {
    if (r == request) r = nullptr;
  }
  if (s != UCS_OK && op->outcome.ok()) {
    op->outcome =
        ucx_error(errc::unavailable, "transport: send to " + peer_name(op->to) + " failed", s);
  }
  if (--op->ucx_pending > 0) return;
  if (intrusive_list<send_operation>* list = op->list()) list->remove(op);
  std::unique_ptr<send_operation> owned(op);
  if (owned->notified) return;
  status outcome = owned->outcome;
  owned->owner->complete(std::move(owned), std::move(outcome));
}

void outbound::on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t s) {
  auto* peer = static_cast<peer_state*>(arg);
  if (peer->closing || peer->failed) return;
  peer->failed = true;
  peer->owner->failed_peers_.emplace_back(
      peer->id,
      ucx_error(errc::unavailable,
                "transport: UCX reports the endpoint to " + peer_name(peer->id) + " failed", s));
}

void outbound::complete(std::unique_ptr<send_operation> op, status outcome) {
  if (!op->done && outcome.ok()) {
    // Nobody waits for this one: account for it now instead of queueing an empty handler.
    stats_counters::bump(stats_.sent_messages);
    stats_counters::bump(stats_.sent_bytes, op->payload.size());
    outstanding_.fetch_sub(1, std::memory_order_release);
    return;
  }
  finished_.push_back(finished{std::move(op->done), std::move(outcome), op->payload.size()});
}

void outbound::complete_early(send_operation& op, status outcome) {
  op.notified = true;
  finished_.push_back(finished{std::move(op.done), std::move(outcome), op.payload.size()});
}

bool outbound::post_due_delays(clock::time_point now) {
  bool posted = false;
  for (size_t i = 0; i < delayed_.size();) {
    if (delayed_[i]->due > now) {
      ++i;
      continue;
    }
    std::unique_ptr<send_operation> op = std::move(delayed_[i]);
    delayed_.erase(delayed_.begin() + static_cast<std::ptrdiff_t>(i));
    posted = true;
    const auto it = peers_.find(op->to);
    if (it == peers_.end()) {
      const peer_id to = op->to;
      complete(std::move(op), error(errc::unavailable, "transport: " + peer_name(to) +
                                                           " went away while "
                                                           "a delay fault held "
                                                           "the message"));
      continue;
    }
    post(*it->second, std::move(op));
  }
  return posted;
}

int outbound::ms_until_next_delay(clock::time_point now) const {
  if (delayed_.empty()) return -1;
  clock::time_point next = delayed_.front()->due;
  for (const auto& op : delayed_)
    next = std::min(next, op->due);
  if (next <= now) return 0;
  const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
  return static_cast<int>(wait) + 1;
}

void outbound::fail_delayed(peer_id peer, const error& why, bool all_peers) {
  for (size_t i = 0; i < delayed_.size();) {
    if (!all_peers && delayed_[i]->to != peer) {
      ++i;
      continue;
    }
    std::unique_ptr<send_operation> op = std::move(delayed_[i]);
    delayed_.erase(delayed_.begin() + static_cast<std::ptrdiff_t>(i));
    complete(std::move(op), why);
  }
}

bool outbound::after_progress() {
  bool worked = reap_closed();
  if (finished_.empty()) return worked;
  // Handlers may send, which can finish more operations, and may disconnect a peer, which runs
  // this again from inside a handler: each call takes its own batch, so nothing is run (and
  // given back to max_outstanding_sends) twice.
  std::vector<finished> batch;
  batch.swap(finished_);
  for (finished& f : batch) {
    if (f.outcome.ok()) {
      stats_counters::bump(stats_.sent_messages);
      stats_counters::bump(stats_.sent_bytes, f.payload_bytes);
    } else {
      stats_counters::bump(stats_.failed_sends);
    }
    if (f.counted) outstanding_.fetch_sub(1, std::memory_order_release);
    if (f.done) f.done(f.outcome);
  }
  return true;
}

std::vector<std::pair<peer_id, error>> outbound::take_failed_peers() {
  std::vector<std::pair<peer_id, error>> out;
  out.swap(failed_peers_);
  return out;
}

void outbound::start_close(std::unique_ptr<peer_state> peer, bool force) {
  retired_sequences_[peer->id] = peer->sequences;
  peer->closing = true;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  const ucs_status_ptr_t request = ucp_ep_close_nbx(peer->ep, &param);
  if (UCS_PTR_IS_PTR(request) && request != nullptr) peer->close_request = request;
  closing_.push_back(std::move(peer));
}

bool outbound::reap_closed() {
  if (closing_.empty()) return false;
  bool reaped = false;
  for (size_t i = 0; i < closing_.size();) {
    peer_state& peer = *closing_[i];
    if (peer.close_request && ucp_request_check_status(peer.close_request) == UCS_INPROGRESS) {
      ++i;
      continue;
    }
    if (peer.close_request) ucp_request_free(peer.close_request);
    peer.close_request = nullptr;
    if (!peer.in_flight.empty()) {
      ++i;
      continue;
    }
    closing_.erase(closing_.begin() + static_cast<std::ptrdiff_t>(i));
    reaped = true;
  }
  return reaped;
}

void outbound::close_all(bool force, const error& why) {
  fail_delayed(0, why, true);
  for (auto& entry : peers_) {
    if (force) {
      while (send_operation* op = entry.second->in_flight.pop_front()) {
        complete_early(*op, why);
        orphans_.push_back(op);
      }
    }
    start_close(std::move(entry.second), force);
  }
  peers_.clear();
}

void outbound::abandon_closing(const error& why) {
  for (auto& peer : closing_) {
    while (send_operation* op = peer->in_flight.pop_front()) {
      complete_early(*op, why);
      orphans_.push_back(op);
    }
  }
}

void outbound::release_requests() {
  ucp_worker_h worker = worker_;
  const auto release = [worker](intrusive_list<send_operation>& list) {
    for (send_operation* op = list.front(); op; op = list.next(op)) {
      for (void*& r : op->requests) {
        if (!r) continue;
        ucp_request_cancel(worker, r);
        ucp_request_free(r);
        r = nullptr;
      }
    }
  };
  for (auto& entry : peers_)
    release(entry.second->in_flight);
  for (auto& peer : closing_) {
    release(peer->in_flight);
    if (peer->close_request) ucp_request_free(peer->close_request);
    peer->close_request = nullptr;
  }
  release(orphans_);
}

result<std::string> outbound::describe(peer_id id) const {
  const auto it = peers_.find(id);
  if (it == peers_.end()) {
    return error(errc::not_found, "transport: no endpoint to " + peer_name(id));
  }
  char* text = nullptr;
  size_t size = 0;
  FILE* stream = open_memstream(&text, &size);
  if (!stream) return error(errc::io_error, "transport: open_memstream failed");
  ucp_ep_print_info(it->second->ep, stream);
  std::fclose(stream);
  std::string out(text, size);
  std::free(text);
  return out;
}

}  // namespace brigade::transport
