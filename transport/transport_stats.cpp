#include "transport/transport_stats.hpp"

namespace brigade::transport {

transport_stats stats_counters::snapshot() const {
  constexpr auto relaxed = std::memory_order_relaxed;
  transport_stats s;
  s.sent_messages = sent_messages.load(relaxed);
  s.sent_bytes = sent_bytes.load(relaxed);
  s.failed_sends = failed_sends.load(relaxed);
  s.delivered_messages = delivered_messages.load(relaxed);
  s.delivered_bytes = delivered_bytes.load(relaxed);
  s.dropped_duplicates = dropped_duplicates.load(relaxed);
  s.dropped_malformed = dropped_malformed.load(relaxed);
  s.dropped_unroutable = dropped_unroutable.load(relaxed);
  s.failed_receives = failed_receives.load(relaxed);
  s.rendezvous_receives_started = rendezvous_receives_started.load(relaxed);
  s.faults_applied = faults_applied.load(relaxed);
  s.registration_hits = registration_hits.load(relaxed);
  s.registration_misses = registration_misses.load(relaxed);
  return s;
}

}  // namespace brigade::transport
