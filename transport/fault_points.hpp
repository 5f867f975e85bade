// Named faults in the data plane that tests (and fault scenarios) switch on at run time.
//
// Each fault is a rule with a name chosen by whoever sets it: drop, delay by N ms, duplicate,
// reorder (hold some messages back so that later ones overtake them), or sever the link between
// two nodes, optionally narrowed to a sender, a receiver and a channel, to a share of the
// messages (drawn from the rule's own seeded generator, so that a seed replays the same
// choices), to a number of messages and to a time. The rules are process-wide, so two
// transports in one process see the same rules: severing 1<->2 fails both directions at once.
// Node agents switch rules at run time for their coordinator (fault injection from
// `brigade chaos` and POST /v1/admin/faults).
//
// When no fault is set, the send and receive paths pay one relaxed atomic load (armed()).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.hpp"
#include "transport/ids.hpp"

namespace brigade::transport {

enum class fault_kind : std::uint8_t {
  drop,       ///< The message is not sent; its sender still sees success (a lossy link).
  delay,      ///< The message is held back `delay_ms` before it is sent.
  duplicate,  ///< The message is sent twice with the same sequence number.
  sever,      ///< Sends between the two nodes fail and their messages are dropped on arrival.
  reorder,    ///< The message is held back a random 1..delay_ms, so later ones may overtake it.
};

const char* to_string(fault_kind kind);

struct fault_rule {
  fault_kind kind = fault_kind::drop;
  /// Sending node the rule applies to (for sever: one end of the link); any when empty.
  std::optional<peer_id> from;
  /// Receiving node the rule applies to (for sever: the other end); any when empty.
  std::optional<peer_id> to;
  /// Channel the rule applies to; any when empty. Sever ignores it: a link carries all channels.
  std::optional<channel_id> channel;
  /// How long `delay` holds a message.
  std::uint32_t delay_ms = 0;
  /// Messages the rule still applies to; negative means until it is cleared. Sever ignores it.
  std::int64_t count = -1;
  /// The share of matching messages the rule applies to, in (0, 1]. Sever ignores it.
  double rate = 1.0;
  /// Seeds the rule's choices (which messages `rate` picks, how long reorder holds them).
  std::uint64_t seed = 1;
  /// How long the rule lasts from when it is set; 0: until it is cleared.
  std::uint32_t for_ms = 0;
};

/// What the send path does with one message while faults are set.
struct fault_action {
  bool severed = false;
  bool drop = false;
  bool duplicate = false;
  std::uint32_t delay_ms = 0;
};

class fault_points {
 public:
  /// True while any fault is set. The hot path checks this and nothing else.
  static bool armed() noexcept { return armed_.load(std::memory_order_relaxed); }

  /// Sets (or replaces) the fault called `name`.
  static void set(const std::string& name, const fault_rule& rule);
  /// Sets a fault from its text form, e.g. "delay ms=50 to=2 channel=3 count=1" (see parse).
  static status set(const std::string& name, std::string_view spec);
  static void clear(const std::string& name);
  static void clear_all();

  /// Parses "<drop|delay|duplicate|reorder|sever> [from=N] [to=N] [channel=N] [ms=N] [count=N]
  /// [rate=X] [seed=N] [for_ms=N]".
  static result<fault_rule> parse(std::string_view spec);

  /// Decides the fate of one message from `from` to `to` on `channel`, using up one count of
  /// every counted rule that matches. Call only when armed().
  static fault_action on_send(peer_id from, peer_id to, channel_id channel);
  /// True when a sever rule covers the link between `a` and `b` (either direction).
  static bool severed(peer_id a, peer_id b);

 private:
  inline static std::atomic<bool> armed_{false};
};

/// Sets a fault for the lifetime of a scope (a test), clearing it on exit.
class scoped_fault {
 public:
  scoped_fault(std::string name, const fault_rule& rule) : name_(std::move(name)) {
    fault_points::set(name_, rule);
  }
  ~scoped_fault() { fault_points::clear(name_); }
  scoped_fault(const scoped_fault&) = delete;
  scoped_fault& operator=(const scoped_fault&) = delete;

 private:
  std::string name_;
};

}  // namespace brigade::transport
