#include "actors/kv_store.hpp"

#include <caf/all.hpp>

#include <cstring>
#include <map>

#include "actors/retention_table.hpp"
#include "actors/sender_check.hpp"
#include "common/log.hpp"
#include "gpu/dtype.hpp"
#include "kvcache/tiered_store.hpp"
#include "model/kv_layout.hpp"

namespace brigade::actors {
namespace {

// Opening the SSD directory can race with the previous generation, which releases the
// directory's lock as it goes: retry for about a second before serving without tiers.
constexpr int open_attempts = 50;
constexpr std::chrono::milliseconds open_retry{20};
// How often expired blocks are swept from the tiers (lookups never serve them meanwhile).
constexpr std::chrono::seconds sweep_interval{10};
// Lookups waiting for SSD promotions at once; beyond it a lookup is answered from host memory.
constexpr size_t max_waiting_lookups = 64;

struct waiting_lookup {
  kv_lookup request;
  kvcache::prefix_lookup found;
  caf::typed_response_promise<kv_found> promise;
  std::chrono::steady_clock::time_point deadline;
};

struct kv_store_state {
  kv_store_config config;
  kvcache::retention retention;
  std::optional<kvcache::model_fingerprint> model;
  std::unique_ptr<kvcache::tiered_store> store;
  std::string open_error;
  int open_tries = 0;
  std::multimap<uint64_t, waiting_lookup> waiting;  // by ticket
  uint64_t done_ticket = 0;
  int64_t lookups = 0;
  int64_t demotions_received = 0;
  static inline const char* name = "kv_store";
};

/// The tiered store finished its jobs up to this ticket (0: a lookup's wait is over). A type that
/// never crosses nodes: no peer can tell the store its promotions are done.
struct promotions_done {
  uint64_t ticket = 0;
};

// Never registered: a message of this type cannot arrive from another node.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, promotions_done& x) {
  return f(caf::meta::type_name("promotions_done"), x.ticket);
}

// Private: the tiered store's completions, and its own timers (open the tiers again, sweep
// expired blocks).
using kv_store_impl =
    kv_store_actor::extend<caf::reacts_to<promotions_done>, caf::reacts_to<tick_atom>>;
using kv_store_pointer = kv_store_impl::stateful_pointer<kv_store_state>;

// Blocks arrive and leave as float32 (actors/kv_block_codec.hpp); the tiers keep them in the
// model's element type. A bf16 block's floats came from a bf16 KV storage, so rounding them is
// exact, and widening them back restores the same floats.
size_t wire_block_bytes(const kvcache::model_fingerprint& m) {
  return m.block_bytes() / kvcache::dtype_bytes(m.shape().dtype) * sizeof(float);
}

std::vector<uint8_t> stored_block(const kvcache::model_fingerprint& m, const uint8_t* wire) {
  if (m.shape().dtype == kvcache::kv_dtype::f32) return {wire, wire + m.block_bytes()};
  std::vector<uint8_t> out(m.block_bytes());
  for (size_t i = 0; i < out.size() / sizeof(uint16_t); ++i) {
    float f;
    std::memcpy(&f, wire + i * sizeof(float), sizeof f);
    const uint16_t h = gpu::f32_to_bf16(f);
    std::memcpy(out.data() + i * sizeof(uint16_t), &h, sizeof h);
  }
  return out;
}

void append_wire(const kvcache::model_fingerprint& m, const std::vector<uint8_t>& stored,
                 std::vector<uint8_t>& out) {
  if (m.shape().dtype == kvcache::kv_dtype::f32) {
    out.insert(out.end(), stored.begin(), stored.end());
    return;
  }
  const size_t at = out.size();
  out.resize(at + stored.size() / sizeof(uint16_t) * sizeof(float));
  for (size_t i = 0; i < stored.size() / sizeof(uint16_t); ++i) {
    uint16_t h;
    std::memcpy(&h, stored.data() + i * sizeof(uint16_t), sizeof h);
    const float f = gpu::bf16_to_f32(h);
    std::memcpy(out.data() + at + i * sizeof(float), &f, sizeof f);
  }
}

// Answers a lookup with the leading blocks now in host memory.
kv_found answer(kv_store_state& st, const kv_lookup& request, const kvcache::prefix_lookup& found) {
  kv_found out;
  if (!st.store) return out;
  std::vector<kvcache::payload_ptr> payloads;
  const size_t n = st.store->fetch(*st.model, request.hashes, request.scenario, payloads);
  out.blocks = static_cast<int32_t>(n);
  for (size_t i = 0; i < n; ++i) {
    const bool from_ssd = i < found.where.size() && found.where[i] == kvcache::tier_location::ssd;
    (from_ssd ? out.ssd_blocks : out.host_blocks) += 1;
    append_wire(*st.model, payloads[i]->bytes(), out.bytes);
  }
  return out;
}

void answer_ready(kv_store_pointer self) {
  auto& st = self->state;
  const auto now = std::chrono::steady_clock::now();
  for (auto it = st.waiting.begin(); it != st.waiting.end();) {
    if (it->first <= st.done_ticket || it->second.deadline <= now) {
      it->second.promise.deliver(answer(st, it->second.request, it->second.found));
      it = st.waiting.erase(it);
    } else {
      ++it;
    }
  }
}

void try_open(kv_store_pointer self) {
  auto& st = self->state;
  const auto& c = st.config;
  kvcache::tiered_store_config tc;
  tc.host_budget_bytes = c.host_bytes;
  tc.ssd_dir = c.ssd_bytes > 0 ? c.ssd_dir : std::string();
  tc.ssd_budget_bytes = c.ssd_bytes;
  tc.hash_key_id = c.hash_key_id;
  // The callback runs on the store's thread; it only posts a message, and a weak handle lets
  // the actor go while the store's last job finishes.
  caf::weak_actor_ptr weak = caf::actor_cast<caf::weak_actor_ptr>(self);
  tc.on_job_done = [weak](uint64_t ticket) {
    if (auto strong = caf::actor_cast<caf::strong_actor_ptr>(weak)) {
      caf::anon_send(caf::actor_cast<kv_store_impl>(strong), promotions_done{ticket});
    }
  };
  auto opened = kvcache::tiered_store::open(tc, *c.clock, st.retention);
  if (opened.ok()) {
    st.store = std::move(opened.value());
    st.open_error.clear();
    if (st.open_tries > 0)
      log::info(c.name, "tiers open after " + std::to_string(st.open_tries) + " retries");
    self->delayed_send(self, sweep_interval, tick_atom_v);
    return;
  }
  st.open_error = opened.err().message;
  if (++st.open_tries < open_attempts) {
    self->delayed_send(self, open_retry, tick_atom_v);
    return;
  }
  log::error(c.name, "cannot open the KV cache tiers, serving without them: " + st.open_error);
}

caf::result<kv_found> lookup(kv_store_pointer self, kv_lookup& request) {
  auto& st = self->state;
  ++st.lookups;
  if (!st.store || request.scenario >= st.retention.size()) return kv_found{};
  // Blocks promoted from SSD land in host memory and are fetched from there: a lookup asks for
  // no more than host memory holds, or its own promotions would evict its first blocks.
  const size_t host_blocks = st.config.host_bytes / st.model->block_bytes();
  if (host_blocks > 0 && request.hashes.size() > host_blocks) request.hashes.resize(host_blocks);
  kvcache::prefix_lookup found =
      st.store->lookup_prefix(*st.model, request.hashes, request.scenario);
  if (found.ticket == 0 || found.ticket <= st.done_ticket ||
      st.waiting.size() >= max_waiting_lookups) {
    return answer(st, request, found);
  }
  auto promise = self->make_response_promise<kv_found>();
  const uint64_t ticket = found.ticket;
  waiting_lookup w{std::move(request), std::move(found), promise,
                   std::chrono::steady_clock::now() + st.config.promotion_timeout};
  st.waiting.emplace(ticket, std::move(w));
  self->delayed_send(self, st.config.promotion_timeout, promotions_done{0});
  return promise;
}

void demote(kv_store_pointer self, const kv_demotion& d) {
  auto& st = self->state;
  ++st.demotions_received;
  if (!st.store) return;
  const size_t block_bytes = wire_block_bytes(*st.model);
  if (d.bytes.size() != d.hashes.size() * block_bytes || d.scenarios.size() != d.hashes.size()) {
    log::warn(st.config.name, "dropping a malformed demotion of " +
                                  std::to_string(d.hashes.size()) + " blocks in " +
                                  std::to_string(d.bytes.size()) + " bytes");
    return;
  }
  for (size_t i = 0; i < d.hashes.size(); ++i) {
    if (d.scenarios[i] >= st.retention.size()) continue;
    const auto* first = d.bytes.data() + i * block_bytes;
    auto payload =
        kvcache::block_payload::make(*st.model, d.hashes[i], stored_block(*st.model, first));
    if (payload.ok()) st.store->put(std::move(payload.value()), d.scenarios[i]);
  }
}

kv_store_status status_of(const kv_store_state& st) {
  kv_store_status out;
  out.load.name = st.config.name;
  out.load.role = "kv_store";
  out.load.in_flight = static_cast<int32_t>(st.waiting.size());
  out.load.steps = st.lookups;
  out.lookups = st.lookups;
  out.demotion_batches = st.demotions_received;
  out.open = st.store != nullptr;
  out.open_error = st.open_error;
  if (st.model) {
    out.block_bytes = st.model->block_bytes();
    out.block_tokens = st.model->shape().block_tokens;
  }
  if (st.store) {
    out.store = st.store->stats();
    out.load.queue_depth = static_cast<int32_t>(out.store.queue_depth);
  }
  return out;
}

kv_store_impl::behavior_type kv_store_behavior(kv_store_pointer self, kv_store_config config) {
  auto& st = self->state;
  st.config = std::move(config);
  st.retention = retention_table(st.config.scenarios);
  kvcache::kv_block_shape shape;
  shape.layers = st.config.layers;
  shape.block_tokens = st.config.block_tokens;
  shape.kv_heads = st.config.kv_heads;
  shape.head_dim = st.config.head_dim;
  shape.values_alias_keys = st.config.values_alias_keys;
  auto element = model::parse_kv_dtype(st.config.kv_dtype, "kv_dtype");
  if (element.ok() && element.value() == gpu::dtype::bf16) shape.dtype = kvcache::kv_dtype::bf16;
  auto model = element.ok()
                   ? kvcache::model_fingerprint::make(st.config.model_id, shape, st.config.numerics)
                   : result<kvcache::model_fingerprint>(element.err());
  if (model.ok()) {
    st.model = model.value();
    try_open(self);
  } else {
    st.open_error = model.err().message;
    log::error(st.config.name, "serving without tiers: " + st.open_error);
  }
  return {
      [=](kv_demotion& d) { demote(self, d); },
      [=](kv_lookup& request) { return lookup(self, request); },
      [=](promotions_done done) {
        auto& s = self->state;
        s.done_ticket = std::max(s.done_ticket, done.ticket);
        answer_ready(self);
      },
      [=](tick_atom) {
        auto& s = self->state;
        if (!sent_by(self->current_sender(), self)) return;  // its own timers: one chain of them
        if (!s.store) return try_open(self);
        s.store->expire();
        self->delayed_send(self, sweep_interval, tick_atom_v);
      },
      [=](status_atom) { return status_of(self->state); },
  };
}

}  // namespace

kv_store_actor spawn_kv_store(caf::actor_system& sys, kv_store_config config) {
  if (!config.clock) config.clock = std::make_shared<const kvcache::system_clock>();
  return sys.spawn<caf::detached>(kv_store_behavior, std::move(config));
}

void register_kv_store_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<kv_lookup>("brigade::kv_lookup");
  cfg.add_message_type<kv_found>("brigade::kv_found");
  cfg.add_message_type<kv_demotion>("brigade::kv_demotion");
  cfg.add_message_type<kv_store_config>("brigade::kv_store_config");
  cfg.add_message_type<kv_store_status>("brigade::kv_store_status");
  cfg.add_message_type<kv_store_actor>("brigade::kv_store_actor");
}

}  // namespace brigade::actors
