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
#include "actors/shard_core.hpp"
#include "common/log.hpp"
#include "model/transformer.hpp"

namespace brigade::actors {

using weights_ptr = std::shared_ptr<const model::ffn_weights>;

namespace {

struct shard_state {
  std::shared_ptr<const model_context> ctx;
  expert_shard_config config;
  // Its slots per epoch and its load accounting, shared with the workers of this process
  // (actors/shard_core.hpp). Only this actor writes core->epochs, under core->mutex; it reads
  // them without the lock.
  std::shared_ptr<shard_core> core;
  ffn_scratch scratch;  // for the calls that come as messages
  std::map<uint64_t, shard_plan> preparing;
  std::map<uint64_t, caf::response_promise> prepare_replies;
  expert_copy_counts copied;  // where this shard's new experts came from
  caf::actor loader;    // gathers the experts new epochs need; started by the first such epoch
  caf::actor exporter;  // copies experts for peers on other nodes; started by the first request
  int64_t exported = 0;
  static inline const char* name = "expert_shard";
};

// The loader's answers are the shard's private message.
using expert_shard_impl = expert_shard_actor::extend_with<loaded_sink_actor>;
using shard_pointer = expert_shard_impl::stateful_pointer<shard_state>;

// Epochs are the supervisor's to prepare, release and abort.
bool from_supervisor(shard_pointer self) {
  return sent_by(self->current_sender(), self->state.config.load_sink);
}

// The weights this shard already holds under any epoch, by (layer, expert).
std::map<std::pair<int32_t, int32_t>, weights_ptr> held_weights(const shard_state& st) {
  std::map<std::pair<int32_t, int32_t>, weights_ptr> out;
  for (const auto& [epoch, slots] : st.core->epochs) {
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

// Serves rows sent as a message: from a worker on another node, or from one of this process
// that has not found the shard's core (it was not started yet).
result<expert_reply> serve(shard_pointer self, const expert_request& req) {
  auto& st = self->state;
  const int hidden = st.ctx->config.hidden_size;
  const size_t n = req.slots.size();
  if (req.input.rows != static_cast<int32_t>(n) || req.input.cols != hidden ||
      req.input.data.size() != n * static_cast<size_t>(hidden)) {
    return error(errc::invalid_argument, "expert request rows do not match its slots");
  }
  due_samples due;
  auto groups = st.core->take_rows({req.step, req.caller, req.epoch, req.layer, &req.slots},
                                   self->current_sender(), due);
  for (load_sample& sample : due.samples) {
    if (due.sink) self->send(due.sink, std::move(sample));
  }
  if (!groups) return groups.err();
  expert_reply reply;
  reply.step = req.step;
  reply.layer = req.layer;
  reply.output.rows = static_cast<int32_t>(n);
  reply.output.cols = hidden;
  reply.output.data.resize(req.input.data.size());
  run_slot_rows(*st.ctx->serial_dev, st.scratch, st.ctx->config, groups.value(),
                req.input.data.data(), reply.output.data.data());
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
  std::lock_guard<std::mutex> lock(st.core->mutex);
  st.core->epochs[epoch] = std::move(slots);
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
  st.core = std::make_shared<shard_core>();
  shard_core& fresh = *st.core;
  fresh.ctx = st.ctx;
  fresh.name = st.config.name;
  fresh.index = st.config.index;
  fresh.sample_interval_steps = st.config.sample_interval_steps;
  fresh.first_window = st.config.first_window;
  fresh.window = st.config.first_window;
  fresh.load_sink = st.config.load_sink;
  fresh.tokens_per_expert.assign(static_cast<size_t>(c.num_layers),
                                 std::vector<int64_t>(static_cast<size_t>(c.num_experts), 0));
  auto initial = load_from_checkpoint(*st.ctx, st.config.plan, {});
  auto first = initial->error.empty() ? assemble(st.config.plan, {}, *initial)
                                      : result<slot_map>(error(errc::internal, initial->error));
  if (!first) {
    // The shard cannot serve: it stops, and the supervisor sees why.
    log::error(st.config.name, first.err().message);
    self->quit(caf::make_error(caf::sec::runtime_error, first.err().message));
  } else {
    adopt_epoch(st, st.config.plan.epoch, std::move(first.value()));
    // Workers of this process compute its rows themselves from here on; once the shard is gone,
    // its core refuses them as a dead actor refuses a message.
    local_shard_cores::add(self->ctrl(), st.core);
    self->attach_functor(
        [block = self->ctrl()](const caf::error&) { local_shard_cores::remove(block); });
  }
  return {
      [=](expert_request& req) -> caf::result<expert_reply> {
        const auto start = std::chrono::steady_clock::now();
        auto reply = serve(self, req);
        if (!reply) return caf::make_error(caf::sec::invalid_argument, reply.err().message);
        self->state.core->finished(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count());
        return std::move(reply.value());
      },
      [=](prepare_atom, shard_plan& plan) -> caf::result<bool> {
        auto& s = self->state;
        if (!from_supervisor(self)) {
          return caf::make_error(caf::sec::invalid_argument, "only the supervisor plans slots");
        }
        if (s.core->epochs.count(plan.epoch)) return true;
        const uint64_t epoch = plan.epoch;
        if (start_prepare(self, std::move(plan))) return true;
        auto rp = self->make_response_promise<bool>();
        s.prepare_replies[epoch] = rp;
        return rp;
      },
      [=](release_atom, uint64_t keep) {
        auto& s = self->state;
        // Epochs before the one kept are freed; one the shard does not hold keeps them all.
        if (!from_supervisor(self) || !s.core->epochs.count(keep)) return;
        std::lock_guard<std::mutex> lock(s.core->mutex);
        s.core->epochs.erase(s.core->epochs.begin(), s.core->epochs.lower_bound(keep));
      },
      [=](abort_atom, uint64_t epoch) {
        auto& s = self->state;
        if (!from_supervisor(self)) return;
        // The last layout the shard holds is the one workers route with: it is never dropped.
        if (s.core->epochs.size() > 1 || !s.core->epochs.count(epoch)) {
          std::lock_guard<std::mutex> lock(s.core->mutex);
          s.core->epochs.erase(epoch);
        }
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
        s.config.load_sink = sink;
        {
          std::lock_guard<std::mutex> lock(s.core->mutex);
          s.core->load_sink = std::move(sink);
        }
        std::vector<uint64_t> later;
        for (const auto& [e, slots] : s.core->epochs) {
          if (e > epoch) later.push_back(e);
        }
        for (const auto& [e, reply] : s.prepare_replies) {
          if (e > epoch) later.push_back(e);
        }
        for (uint64_t e : later) {
          {
            std::lock_guard<std::mutex> lock(s.core->mutex);
            s.core->epochs.erase(e);
          }
          s.preparing.erase(e);
          if (s.loader) caf::anon_send(s.loader, abort_atom_v, e);
          auto reply = s.prepare_replies.find(e);
          if (reply != s.prepare_replies.end()) {
            reply->second.deliver(caf::make_error(caf::sec::runtime_error, "aborted"));
            s.prepare_replies.erase(reply);
          }
        }
        return s.core->epochs.count(epoch) > 0;
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
        {
          const shard_core& core = *s.core;
          std::lock_guard<std::mutex> lock(core.mutex);
          out.load.last_step_ms = core.last_ms;
          out.load.steps = core.steps;
          if (!core.epochs.empty()) out.slots = core.epochs.rbegin()->second.size();
          out.epochs = core.epochs.size();
          out.requests = core.requests;
          out.rows = core.rows;
        }
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
