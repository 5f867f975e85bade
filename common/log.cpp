#include "common/log.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

namespace brigade::log {
namespace {

level from_env() {
  const char* env = std::getenv("BRIGADE_LOG");
  if (!env) return level::info;
  if (!std::strcmp(env, "debug")) return level::debug;
  if (!std::strcmp(env, "warn")) return level::warn;
  if (!std::strcmp(env, "error")) return level::error;
  if (!std::strcmp(env, "off")) return level::off;
  return level::info;
}

std::atomic<int>& current() {
  static std::atomic<int> value{static_cast<int>(from_env())};
  return value;
}

const char* name(level l) {
  switch (l) {
    case level::debug:
      return "debug";
    case level::info:
      return "info";
    case level::warn:
      return "warn";
    case level::error:
      return "error";
    case level::off:
      break;
  }
  return "";
}

}  // namespace

level threshold() {
  return static_cast<level>(current().load());
}
void set_threshold(level l) {
  current().store(static_cast<int>(l));
}

void write(level l, std::string_view component, std::string_view message) {
  if (static_cast<int>(l) < current().load()) return;
  static std::mutex mutex;
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) %
                  std::chrono::milliseconds(1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "%s.%03d %-5s [%.*s] %.*s\n", stamp, static_cast<int>(ms.count()), name(l),
               static_cast<int>(component.size()), component.data(),
               static_cast<int>(message.size()), message.data());
}

}  // namespace brigade::log
