#include "transport/inbound.hpp"

#include <cstring>
#include <string>

#include "common/log.hpp"
#include "transport/fault_points.hpp"
#include "transport/frame_header.hpp"
#include "transport/ucx_error.hpp"

namespace brigade::transport {

struct inbound::receive : intrusive_list_hook<receive> {
  peer_id from = 0;
  channel_id channel = 0;
  std::uint64_t sequence = 0;
  std::vector<std::byte> header;
  byte_buffer payload;
  std::size_t length = 0;
  /// Keeps the receive buffer's registration alive while UCX writes into it.
  std::shared_ptr<memory_registration> registration;
  inbound* owner = nullptr;
  /// Its failure was already reported (the sender departed); UCX still holds the receive.
  bool failed = false;
  /// UCX's handle while the receive is in flight.
  void* request = nullptr;
  /// Inside ucp_am_recv_data_nbx: a completion now is recorded here, and the caller finishes
  /// the receive once the call returns (see start_rendezvous).
  bool starting = false;
  bool completed_while_starting = false;
  ucs_status_t early_status = UCS_OK;
};

inbound::delivery& inbound::delivery_batch::add(peer_id from, channel_id channel,
                                                std::uint64_t sequence, const std::byte* header,
                                                std::size_t header_bytes) {
  delivery& d = deliveries.emplace_back();
  d.from = from;
  d.channel = channel;
  d.sequence = sequence;
  d.header_offset = headers.size();
  d.header_bytes = header_bytes;
  headers.insert(headers.end(), header, header + header_bytes);
  return d;
}

namespace {

std::string sender_name(peer_id peer) {
  return "peer " + std::to_string(peer);
}

}  // namespace

inbound::inbound(ucp_worker_h worker, const transport_config& config,
                 registration_cache& registrations, stats_counters& stats)
    : worker_(worker), config_(config), registrations_(registrations), stats_(stats) {}

inbound::~inbound() {
  const auto free_all = [](intrusive_list<receive>& list) {
    while (receive* r = list.pop_front())
      delete r;
  };
  for (auto& entry : in_flight_)
    free_all(entry.second);
  free_all(orphans_);
}

status inbound::install() {
  ucp_am_handler_param_t param{};
  param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                     UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  param.id = frame_header::am_id;
  param.cb = &inbound::on_active_message;
  param.arg = this;
  param.flags = UCP_AM_FLAG_WHOLE_MSG;
  const ucs_status_t s = ucp_worker_set_am_recv_handler(worker_, &param);
  if (s != UCS_OK) {
    return ucx_error(errc::internal, "transport: cannot install the active-message handler", s);
  }
  return ok_status();
}

void inbound::open_channel(channel_id channel, channel_options options) {
  channel_state& state = channels_[channel];
  state.options = std::move(options);
  state.windows.clear();
}

ucs_status_t inbound::on_active_message(void* arg, const void* header, size_t header_length,
                                        void* data, size_t length,
                                        const ucp_am_recv_param_t* param) {
  return static_cast<inbound*>(arg)->handle_message(header, header_length, data, length, param);
}

ucs_status_t inbound::handle_message(const void* header, size_t header_length, void* data,
                                     size_t length, const ucp_am_recv_param_t* param) {
  // Returning UCS_OK for a rendezvous message tells UCX we do not want its data; the sender's
  // request then completes without the transfer.
  result<frame_header> frame = frame_header::decode(byte_view(header, header_length), length);
  if (!frame) {
    stats_counters::bump(stats_.dropped_malformed);
    log::warn("transport", "dropped a malformed frame: " + frame.err().message);
    return UCS_OK;
  }
  if (departed(frame->sender)) {
    stats_counters::bump(stats_.dropped_unroutable);
    return UCS_OK;
  }
  if (fault_points::armed() && fault_points::severed(config_.self_id, frame->sender)) {
    stats_counters::bump(stats_.faults_applied);
    return UCS_OK;
  }
  const auto channel = channels_.find(frame->channel);
  if (channel == channels_.end()) {
    stats_counters::bump(stats_.dropped_unroutable);
    log::warn("transport", "dropped a message from " + sender_name(frame->sender) + " on channel " +
                               std::to_string(frame->channel) + ", which this node has not opened");
    return UCS_OK;
  }
  channel_state& state = channel->second;
  if (state.options.drop_duplicates && !state.windows[frame->sender].accept(frame->sequence)) {
    stats_counters::bump(stats_.dropped_duplicates);
    return UCS_OK;
  }
  const auto* user_header = static_cast<const std::byte*>(header) + frame_header::wire_bytes;
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
    auto r = std::make_unique<receive>();
    r->from = frame->sender;
    r->channel = frame->channel;
    r->sequence = frame->sequence;
    r->length = length;
    r->owner = this;
    r->header.assign(user_header, user_header + frame->header_bytes);
    return start_rendezvous(state, std::move(r), data);
  }
  delivery& d =
      ready_.add(frame->sender, frame->channel, frame->sequence, user_header, frame->header_bytes);
  d.state = &state;
  result<byte_buffer> buffer = allocate(frame->channel, state, frame->sender, length);
  if (buffer) {
    if (length) std::memcpy(buffer->data(), data, length);
    d.payload = std::move(*buffer);
  } else {
    d.outcome = buffer.err();
  }
  return UCS_OK;
}

result<byte_buffer> inbound::allocate(channel_id id, channel_state& channel, peer_id from,
                                      size_t bytes) {
  if (!channel.options.allocate) return arena_.allocate(bytes);
  result<byte_buffer> buffer = channel.options.allocate(from, id, bytes);
  if (!buffer) return buffer;
  if (buffer->size() < bytes) {
    return error(errc::internal, "transport: the channel allocator returned " +
                                     std::to_string(buffer->size()) + " bytes for a " +
                                     std::to_string(bytes) + "-byte payload");
  }
  return buffer->size() == bytes ? std::move(*buffer) : buffer->slice(0, bytes);
}

ucs_status_t inbound::start_rendezvous(channel_state& channel, std::unique_ptr<receive> r,
                                       void* descriptor) {
  // Called inside the active-message callback, as soon as the announcement arrives: the data
  // starts moving without waiting for the rest of the progress round.
  result<byte_buffer> buffer = allocate(r->channel, channel, r->from, r->length);
  if (!buffer) {
    // UCS_OK hands the descriptor back to UCX, which tells the sender to stop waiting.
    delivery& d = ready_.add(r->from, r->channel, r->sequence, nullptr, 0);
    d.outcome = buffer.err();
    return UCS_OK;
  }
  if (r->length >= config_.rendezvous_threshold_bytes) {
    result<std::shared_ptr<memory_registration>> registration = registrations_.acquire(*buffer);
    if (registration) r->registration = std::move(*registration);
  }
  r->payload = std::move(*buffer);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.recv_am = &inbound::on_receive_done;
  param.user_data = r.get();
  if (r->registration) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    param.memh = r->registration->handle();
  }
  stats_counters::bump(stats_.rendezvous_receives_started);
  r->starting = true;
  const ucs_status_ptr_t request =
      ucp_am_recv_data_nbx(worker_, descriptor, r->payload.data(), r->length, &param);
  r->starting = false;
  if (r->completed_while_starting) {
    // The completion callback ran before the call returned (UCX's contract says it does not,
    // but a receive freed there and then listed here would corrupt the in-flight list): the
    // callback freed the request; finish the receive as a completion at once.
    const ucs_status_t s = r->early_status;
    const peer_id from = r->from;
    finish_rendezvous(std::move(r), s == UCS_OK ? ok_status()
                                                : ucx_error(errc::unavailable,
                                                            "transport: receiving a message from " +
                                                                sender_name(from) + " failed",
                                                            s));
  } else if (request == nullptr) {
    finish_rendezvous(std::move(r), ok_status());
  } else if (UCS_PTR_IS_ERR(request)) {
    const peer_id from = r->from;
    finish_rendezvous(std::move(r),
                      ucx_error(errc::unavailable,
                                "transport: cannot receive a message from " + sender_name(from),
                                UCS_PTR_STATUS(request)));
  } else {
    r->request = request;
    in_flight_[r->from].push_back(r.release());
  }
  // UCX owns the descriptor from ucp_am_recv_data_nbx on, whatever it returned.
  return UCS_INPROGRESS;
}

void inbound::on_receive_done(void* request, ucs_status_t s, size_t, void* user_data) {
  auto* r = static_cast<receive*>(user_data);
  ucp_request_free(request);
  if (r->starting) {
    r->completed_while_starting = true;
    r->early_status = s;
    return;
  }
  if (intrusive_list<receive>* list = r->list()) list->remove(r);
  std::unique_ptr<receive> owned(r);
  if (owned->failed) return;
  status outcome;
  if (s != UCS_OK) {
    outcome =
        ucx_error(errc::unavailable,
                  "transport: receiving a message from " + sender_name(r->from) + " failed", s);
  }
  owned->owner->finish_rendezvous(std::move(owned), std::move(outcome));
}

void inbound::finish_rendezvous(std::unique_ptr<receive> r, status outcome) {
  delivery& d = ready_.add(r->from, r->channel, r->sequence, r->header.data(), r->header.size());
  d.payload = std::move(r->payload);
  d.outcome = std::move(outcome);
}

bool inbound::after_progress() {
  if (ready_.deliveries.empty()) return false;
  // Handlers may call into the transport: deliver a stable batch.
  std::swap(delivering_, ready_);
  for (delivery& d : delivering_.deliveries)
    deliver(d, delivering_.headers);
  delivering_.clear();
  return true;
}

void inbound::deliver(delivery& d, const std::vector<std::byte>& headers) {
  if (departed(d.from)) {
    stats_counters::bump(stats_.dropped_unroutable);
    return;
  }
  if (!d.outcome.ok()) {
    report_failure(d.from, d.channel, d.outcome.err());
    return;
  }
  channel_state* state = d.state;
  if (!state) {
    const auto channel = channels_.find(d.channel);
    if (channel != channels_.end()) state = &channel->second;
  }
  if (!state || !state->options.on_message) {
    stats_counters::bump(stats_.dropped_unroutable);
    return;
  }
  stats_counters::bump(stats_.delivered_messages);
  stats_counters::bump(stats_.delivered_bytes, d.payload.size());
  received_message message;
  message.from = d.from;
  message.channel = d.channel;
  message.sequence = d.sequence;
  message.header = byte_view(headers.data() + d.header_offset, d.header_bytes);
  message.payload = std::move(d.payload);
  state->options.on_message(message);
}

void inbound::report_failure(peer_id from, channel_id channel, const error& why) {
  stats_counters::bump(stats_.failed_receives);
  const auto it = channels_.find(channel);
  if (it != channels_.end() && it->second.options.on_receive_error) {
    it->second.options.on_receive_error(from, channel, why);
  }
}

void inbound::depart(peer_id peer, const error& why) {
  remember_departure(peer);
  for (auto& entry : channels_)
    entry.second.windows.erase(peer);
  const auto in_flight = in_flight_.find(peer);
  if (in_flight == in_flight_.end()) return;
  std::vector<std::pair<channel_id, error>> failures;
  while (receive* r = in_flight->second.pop_front()) {
    r->failed = true;
    orphans_.push_back(r);
    failures.emplace_back(r->channel, why);
  }
  in_flight_.erase(in_flight);
  for (const auto& [channel, reason] : failures)
    report_failure(peer, channel, reason);
}

void inbound::release_requests() {
  const auto release = [](intrusive_list<receive>& list) {
    for (receive* r = list.front(); r; r = list.next(r)) {
      if (r->request) ucp_request_free(r->request);
      r->request = nullptr;
    }
  };
  for (auto& entry : in_flight_)
    release(entry.second);
  release(orphans_);
}

void inbound::admit(peer_id peer) {
  departed_.erase(peer);
  for (auto& entry : channels_)
    entry.second.windows.erase(peer);
}

void inbound::remember_departure(peer_id peer) {
  departed_[peer] = ++departures_;
  departure_order_.emplace_back(peer, departures_);
  while (departure_order_.size() > config_.max_departed_peers) {
    const auto [oldest, number] = departure_order_.front();
    departure_order_.pop_front();
    const auto it = departed_.find(oldest);
    if (it != departed_.end() && it->second == number) departed_.erase(it);
  }
}

}  // namespace brigade::transport
