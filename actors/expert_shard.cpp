#include "actors/expert_shard.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <set>

#include "actors/expert_loader.hpp"
#include "actors/expert_share_index.hpp"
#include "actors/sender_check.hpp"
#include "common/log.hpp"
#include "model/transformer.hpp"

namespace brigade::actors {

using weights_ptr = std::shared_ptr<const model::ffn_weights>;

namespace {

struct held_slot {
  int32_t expert = 0;
  weights_ptr weights;
};

using slot_map = std::map<std::pair<int32_t, int32_t>, held_slot>;  // (layer, slot)

struct shard_state {
  std::shared_ptr<const model_context> ctx;
  expert_shard_config config;
  std::map<uint64_t, slot_map> epochs;  // the layouts this shard can serve
  std::map<uint64_t, shard_plan> preparing;
  std::map<uint64_t, caf::response_promise> prepare_replies;
  // Load sampling: steps are counted per calling worker from the step numbers it sends (keyed
  // by the sender and the caller it names: calls from other nodes share one sender).
  std::map<std::pair<caf::strong_actor_ptr, uint64_t>, uint64_t> last_step;
  int64_t steps = 0;
  uint64_t window = 0;
  std::vector<std::vector<int64_t>> tokens_per_expert;  // [layer][expert], this window
  gpu::activation in, out, gate_up, inter;
  expert_copy_counts copied;  // where this shard's new experts came from
  caf::actor loader;    // gathers the experts new epochs need; started by the first such epoch
  caf::actor exporter;  // copies experts for peers on other nodes; started by the first request
  int64_t exported = 0;
  int64_t requests = 0;
  int64_t rows = 0;
  double last_ms = 0.0;
  static inline const char* name = "expert_shard";
};

// The loader's answers are the shard's private message.
using expert_shard_impl = expert_shard_actor::extend_with<loaded_sink_actor>;
using shard_pointer = expert_shard_impl::stateful_pointer<shard_state>;

// Epochs are the supervisor's to prepare, release and abort.
bool from_supervisor(shard_pointer self) {
  return sent_by(self->current_sender(), self->state.config.load_sink);
}

void ensure_rows(shard_state& st, int rows) {
  if (st.in.capacity_rows() >= rows) return;
  const auto& c = st.ctx->config;
  const int capacity = std::max(rows, 2 * st.in.capacity_rows());
  st.in = st.ctx->dev->alloc(capacity, c.hidden_size);
  st.out = st.ctx->dev->alloc(capacity, c.hidden_size);
  st.gate_up = st.ctx->dev->alloc(capacity, 2 * c.expert_intermediate);
  st.inter = st.ctx->dev->alloc(capacity, c.expert_intermediate);
}

// The weights this shard already holds under any epoch, by (layer, expert).
std::map<std::pair<int32_t, int32_t>, weights_ptr> held_weights(const shard_state& st) {
  std::map<std::pair<int32_t, int32_t>, weights_ptr> out;
  for (const auto& [epoch, slots] : st.epochs) {
    for (const auto& [key, held] : slots)
      out[{key.first, held.expert}] = held.weights;
  }
  return out;
}

// Builds an epoch's slot map from held and freshly loaded weights; an error when an expert is in
// neither (an epoch holding it was released while this one was loading).
result<slot_map> assemble(const shard_plan& plan,
                          const std::map<std::pair<int32_t, int32_t>, weights_ptr>& held,
                          const loaded_experts& loaded) {
  slot_map out;
  for (const auto& a : plan.slots) {
    const std::pair<int32_t, int32_t> key{a.layer, a.expert};
    auto it = held.find(key);
    weights_ptr w;
    if (it != held.end()) {
      w = it->second;
    } else if (auto got = loaded.weights.find(key); got != loaded.weights.end()) {
      w = got->second;
    } else {
      return error(errc::not_found, "expert " + std::to_string(a.expert) + " of layer " +
                                        std::to_string(a.layer) + " was neither held nor loaded");
    }
    out[{a.layer, a.slot}] = held_slot{a.expert, std::move(w)};
  }
  return out;
}

// Counts each caller's steps and sends a load sample whenever a window completes. A worker's step
// numbers grow one at a time, with gaps where its steps routed nothing here; one request advances
// the count by at most a window, so a wild step number (a peer's bug or forgery) costs at most
// one early sample, never a flood of them or an overflow.
void count_steps(shard_pointer self, const expert_request& req) {
  auto& st = self->state;
  const auto interval =
      static_cast<uint64_t>(std::max<int64_t>(1, st.config.sample_interval_steps));
  uint64_t& last = st.last_step[{self->current_sender(), req.caller}];
  if (req.step > last) {
    const uint64_t advance = last == 0 ? 1 : req.step - last;
    st.steps += static_cast<int64_t>(std::min(advance, interval));
    last = req.step;
  }
  const uint64_t window = st.config.first_window + static_cast<uint64_t>(st.steps) / interval;
  while (st.window < window) {
    if (st.config.load_sink) {
      self->send(st.config.load_sink,
                 load_sample{st.config.index, st.window, st.tokens_per_expert});
    }
    for (auto& row : st.tokens_per_expert)
      std::fill(row.begin(), row.end(), 0);
    ++st.window;
  }
}

// Runs each slot's group of rows through its expert; rows keep their order in the reply.
result<expert_reply> compute(shard_state& st, const expert_request& req) {
  gpu::backend& dev = *st.ctx->serial_dev;
  const int hidden = st.ctx->config.hidden_size;
  const int n = static_cast<int>(req.slots.size());
  if (req.input.rows != n || req.input.cols != hidden ||
      req.input.data.size() != static_cast<size_t>(n) * static_cast<size_t>(hidden)) {
    return error(errc::invalid_argument, "expert request rows do not match its slots");
  }
  auto epoch = st.epochs.find(req.epoch);
  if (epoch == st.epochs.end()) {
    return error(errc::not_found,
                 st.config.name + " holds no layout of epoch " + std::to_string(req.epoch));
  }
  expert_reply reply;
  reply.step = req.step;
  reply.layer = req.layer;
  reply.output.rows = n;
  reply.output.cols = hidden;
  reply.output.data.resize(req.input.data.size());
  std::map<int32_t, std::vector<int32_t>> groups;  // slot -> row indices, in row order
  for (int i = 0; i < n; ++i)
    groups[req.slots[static_cast<size_t>(i)]].push_back(i);
  // Every slot's rows one after another (`order`), so that the slots' matmuls go to the device
  // together (model::run_ffn_group).
  std::vector<model::ffn_part> parts;
  std::vector<int32_t> order;
  std::vector<int32_t> experts;  // parts[i]'s expert, for the load counts
  order.reserve(static_cast<size_t>(n));
  for (const auto& [slot, rows] : groups) {
    auto it = epoch->second.find({req.layer, slot});
    if (it == epoch->second.end()) {
      return error(errc::not_found, st.config.name + " does not hold slot " + std::to_string(slot) +
                                        " of layer " + std::to_string(req.layer));
    }
    const model::ffn_weights& w = *it->second.weights;
    if (!parts.empty() && parts.front().weights->inter != w.inter) {
      return error(errc::invalid_argument,
                   st.config.name + " holds experts of different intermediate sizes in layer " +
                       std::to_string(req.layer));
    }
    parts.push_back({&w, static_cast<int>(rows.size())});
    order.insert(order.end(), rows.begin(), rows.end());
    experts.push_back(it->second.expert);
  }
  ensure_rows(st, n);
  const size_t row_floats = static_cast<size_t>(hidden);
  std::vector<float> staged(static_cast<size_t>(n) * row_floats);
  for (int r = 0; r < n; ++r) {
    std::copy_n(&req.input.data[static_cast<size_t>(order[static_cast<size_t>(r)]) * row_floats],
                hidden, &staged[static_cast<size_t>(r) * row_floats]);
  }
  if (n > 0) {
    const int width = parts.front().weights->inter;
    dev.upload(staged.data(), st.in.first(n));
    model::run_ffn_group(dev, parts, st.in.first(n), st.out.first(n),
                         st.gate_up.first(n).cols_view(0, 2 * width),
                         st.inter.first(n).cols_view(0, width));
    dev.download(st.out.first(n), staged.data());
  }
  for (int r = 0; r < n; ++r) {
    std::copy_n(
        &staged[static_cast<size_t>(r) * row_floats], hidden,
        &reply.output.data[static_cast<size_t>(order[static_cast<size_t>(r)]) * row_floats]);
  }
  std::vector<int64_t>& counts = st.tokens_per_expert[static_cast<size_t>(req.layer)];
  for (size_t i = 0; i < parts.size(); ++i)
    counts[static_cast<size_t>(experts[i])] += parts[i].rows;
  return reply;
}

// Starts one of the shard's background actors (loader, exporter) and stops it with the shard.
caf::actor& started(shard_pointer self, caf::actor& helper,
                    const std::function<caf::actor()>& spawn) {
  if (!helper) {
    helper = spawn();
    self->attach_functor([h = helper](const caf::error&) {
      caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
    });
  }
  return helper;
}

// Stores an epoch's slots and tells the process's share index which weights the shard holds.
void adopt_epoch(shard_state& st, uint64_t epoch, slot_map slots) {
  if (st.ctx->shares) {
    for (const auto& [key, held] : slots)
      st.ctx->shares->publish(key.first, held.expert, held.weights);
  }
  st.epochs[epoch] = std::move(slots);
}

// The experts of `plan` the shard does not hold, all shared from peers in this process through
// the share index; null when any of them is not to be found there.
std::unique_ptr<loaded_experts> shared_in_process(const shard_state& st, const shard_plan& plan,
                                                  const std::set<expert_key>& have) {
  auto out = std::make_unique<loaded_experts>();
  for (const auto& a : plan.slots) {
    const expert_key key{a.layer, a.expert};
    if (have.count(key) || out->weights.count(key)) continue;
    auto w = st.ctx->shares ? st.ctx->shares->find(a.layer, a.expert) : nullptr;
    if (!w) return nullptr;
    out->weights[key] = std::move(w);
    ++out->counts.same_node;
    ++out->counts.same_node_indexed;
  }
  return out;
}

// Prepares the epoch of `plan`: at once when the shard holds its experts already or peers in this
// process do (through the share index), otherwise by its loader in the background (then the
// reply waits in prepare_replies). Returns whether the epoch is ready.
bool start_prepare(shard_pointer self, shard_plan plan) {
  auto& st = self->state;
  const auto held = held_weights(st);
  std::set<expert_key> have;
  for (const auto& [key, w] : held)
    have.insert(key);
  if (auto shared = shared_in_process(st, plan, have)) {
    auto slots = assemble(plan, held, *shared);
    if (slots) {
      st.copied += shared->counts;
      adopt_epoch(st, plan.epoch, std::move(slots.value()));
      return true;
    }
  }
  st.preparing[plan.epoch] = plan;
  auto spawn = [&] {
    return spawn_expert_loader(self->system(), st.ctx, caf::actor_cast<loaded_sink_actor>(self),
                               std::chrono::milliseconds(st.config.copy_interval_ms));
  };
  caf::anon_send(started(self, st.loader, spawn), load_job{std::move(plan), std::move(have)});
  return false;
}

void on_loaded(shard_pointer self, uint64_t epoch, const std::shared_ptr<loaded_experts>& loaded) {
  auto& st = self->state;
  auto plan = st.preparing.find(epoch);
  auto reply = st.prepare_replies.find(epoch);
  if (plan == st.preparing.end() || reply == st.prepare_replies.end()) return;  // aborted
  st.copied += loaded->counts;
  std::string why = loaded->error;
  if (why.empty()) {
    auto slots = assemble(plan->second, held_weights(st), *loaded);
    if (slots) {
      adopt_epoch(st, epoch, std::move(slots.value()));
      reply->second.deliver(true);
    } else {
      why = slots.err().message;
    }
  }
  if (!why.empty()) {
    log::error(st.config.name,
               "cannot load experts for epoch " + std::to_string(epoch) + ": " + why);
    reply->second.deliver(caf::make_error(caf::sec::runtime_error, why));
  }
  st.preparing.erase(plan);
  st.prepare_replies.erase(reply);
}

// A peer asked for an expert this shard holds: the copy out of the backend runs beside serving.
caf::result<expert_weights> export_weights(shard_pointer self, int32_t layer, int32_t expert,
                                           bool same_process) {
  auto& st = self->state;
  const auto held = held_weights(st);
  auto it = held.find({layer, expert});
  if (it == held.end()) {
    return caf::make_error(caf::sec::runtime_error, st.config.name + " holds no copy of expert " +
                                                        std::to_string(expert) + " of layer " +
                                                        std::to_string(layer));
  }
  if (same_process) {
    expert_weights w;
    w.layer = layer;
    w.expert = expert;
    w.shared = it->second;
    ++st.exported;
    return w;
  }
  auto rp = self->make_response_promise<expert_weights>();
  auto spawn = [&] { return spawn_expert_exporter(self->system(), st.ctx); };
  self->request(started(self, st.exporter, spawn), caf::infinite, export_job{it->second, it->first})
      .then(
          [self, rp](expert_weights& w) mutable {
            ++self->state.exported;
            rp.deliver(std::move(w));
          },
          [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

expert_shard_impl::behavior_type shard_behavior(shard_pointer self,
                                                std::shared_ptr<const model_context> ctx,
                                                expert_shard_config config) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.config = std::move(config);
  const auto& c = st.ctx->config;
  st.tokens_per_expert.assign(static_cast<size_t>(c.num_layers),
                              std::vector<int64_t>(static_cast<size_t>(c.num_experts), 0));
  st.window = st.config.first_window;
  auto initial = load_from_checkpoint(*st.ctx, st.config.plan, {});
  auto first = initial->error.empty() ? assemble(st.config.plan, {}, *initial)
                                      : result<slot_map>(error(errc::internal, initial->error));
  if (!first) {
    // The shard cannot serve: it stops, and the supervisor sees why.
    log::error(st.config.name, first.err().message);
    self->quit(caf::make_error(caf::sec::runtime_error, first.err().message));
  } else {
    adopt_epoch(st, st.config.plan.epoch, std::move(first.value()));
  }
  return {
      [=](expert_request& req) -> caf::result<expert_reply> {
        const auto start = std::chrono::steady_clock::now();
        count_steps(self, req);
        auto reply = compute(self->state, req);
        if (!reply) return caf::make_error(caf::sec::invalid_argument, reply.err().message);
        auto& s = self->state;
        ++s.requests;
        s.rows += static_cast<int64_t>(req.slots.size());
        s.last_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        return std::move(reply.value());
      },
      [=](prepare_atom, shard_plan& plan) -> caf::result<bool> {
        auto& s = self->state;
        if (!from_supervisor(self)) {
          return caf::make_error(caf::sec::invalid_argument, "only the supervisor plans slots");
        }
        if (s.epochs.count(plan.epoch)) return true;
        const uint64_t epoch = plan.epoch;
        if (start_prepare(self, std::move(plan))) return true;
        auto rp = self->make_response_promise<bool>();
        s.prepare_replies[epoch] = rp;
        return rp;
      },
      [=](release_atom, uint64_t keep) {
        auto& s = self->state;
        // Epochs before the one kept are freed; one the shard does not hold keeps them all.
        if (!from_supervisor(self) || !s.epochs.count(keep)) return;
        s.epochs.erase(s.epochs.begin(), s.epochs.lower_bound(keep));
      },
      [=](abort_atom, uint64_t epoch) {
        auto& s = self->state;
        if (!from_supervisor(self)) return;
        // The last layout the shard holds is the one workers route with: it is never dropped.
        if (s.epochs.size() > 1 || !s.epochs.count(epoch)) s.epochs.erase(epoch);
        s.preparing.erase(epoch);
        if (s.loader) caf::anon_send(s.loader, abort_atom_v, epoch);
        auto reply = s.prepare_replies.find(epoch);
        if (reply != s.prepare_replies.end()) {
          reply->second.deliver(caf::make_error(caf::sec::runtime_error, "aborted"));
          s.prepare_replies.erase(reply);
        }
      },
      [=](rebind_atom, load_sink_actor& sink, uint64_t epoch) {
        auto& s = self->state;
        if (!from_supervisor(self)) return false;
        s.config.load_sink = std::move(sink);
        std::vector<uint64_t> later;
        for (const auto& [e, slots] : s.epochs) {
          if (e > epoch) later.push_back(e);
        }
        for (const auto& [e, reply] : s.prepare_replies) {
          if (e > epoch) later.push_back(e);
        }
        for (uint64_t e : later) {
          s.epochs.erase(e);
          s.preparing.erase(e);
          if (s.loader) caf::anon_send(s.loader, abort_atom_v, e);
          auto reply = s.prepare_replies.find(e);
          if (reply != s.prepare_replies.end()) {
            reply->second.deliver(caf::make_error(caf::sec::runtime_error, "aborted"));
            s.prepare_replies.erase(reply);
          }
        }
        return s.epochs.count(epoch) > 0;
      },
      [=](loaded_atom, uint64_t epoch, std::shared_ptr<loaded_experts>& loaded) {
        on_loaded(self, epoch, loaded);
      },
      [=](weights_atom, int32_t layer, int32_t expert,
          bool same_process) -> caf::result<expert_weights> {
        return export_weights(self, layer, expert, same_process);
      },
      [=](status_atom) {
        const auto& s = self->state;
        expert_shard_status out;
        out.load.name = s.config.name;
        out.load.role = "expert_shard";
        out.load.in_flight = static_cast<int32_t>(s.preparing.size());
        out.load.last_step_ms = s.last_ms;
        out.load.steps = s.steps;
        if (!s.epochs.empty()) out.slots = s.epochs.rbegin()->second.size();
        out.epochs = s.epochs.size();
        out.requests = s.requests;
        out.rows = s.rows;
        out.experts_sent = s.exported;
        out.experts_received = s.copied;
        return out;
      },
  };
}

}  // namespace

expert_shard_actor spawn_expert_shard(caf::actor_system& sys,
                                      std::shared_ptr<const model_context> ctx,
                                      expert_shard_config config) {
  return sys.spawn<caf::detached>(shard_behavior, std::move(ctx), std::move(config));
}

void register_expert_shard_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<slot_assignment>("brigade::slot_assignment");
  cfg.add_message_type<weight_source>("brigade::weight_source");
  cfg.add_message_type<shard_plan>("brigade::shard_plan");
  cfg.add_message_type<load_sample>("brigade::load_sample");
  cfg.add_message_type<expert_shard_config>("brigade::expert_shard_config");
  cfg.add_message_type<expert_shard_status>("brigade::expert_shard_status");
  cfg.add_message_type<expert_shard_actor>("brigade::expert_shard_actor");
  cfg.add_message_type<std::vector<expert_shard_actor>>("std::vector<brigade::expert_shard_actor>");
  cfg.add_message_type<load_sink_actor>("brigade::load_sink_actor");
}

}  // namespace brigade::actors
