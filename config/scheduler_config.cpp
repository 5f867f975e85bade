#include "config/scheduler_config.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/thread_hook.hpp>

#include <cstddef>
#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <sched.h>
#endif

namespace brigade::config {
namespace {

bool batch_policy_wanted() {
  const char* env = std::getenv("BRIGADE_SCHED_BATCH");
  return env == nullptr || std::strcmp(env, "0") != 0;
}

class batch_policy final : public caf::thread_hook {
 public:
  void init(caf::actor_system&) override {}
  void thread_started() override {
#if defined(__linux__)
    // Pid 0 is the calling thread; SCHED_BATCH has priority 0 only. Lowering a thread's policy
    // needs no privilege; where it is refused anyway the thread keeps the default.
    sched_param param{};
    param.sched_priority = 0;
    sched_setscheduler(0, SCHED_BATCH, &param);
#endif
  }
  void thread_terminates() override {}
};

}  // namespace

void configure_scheduler(caf::actor_system_config& cfg) {
  cfg.set("scheduler.max-threads", size_t{2});
  // A few aggressive polls stay (CAF's default 100, a few microseconds); the moderate phase goes,
  // so an idle worker waits on its condition variable, which a new job notifies.
  cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
  if (batch_policy_wanted()) cfg.add_thread_hook<batch_policy>();
}

}  // namespace brigade::config
