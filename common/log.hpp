// Minimal leveled logging to stderr. Kept free of heavy headers: callers format their own text.
#pragma once

#include <string_view>

namespace brigade::log {

enum class level { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

/// Lines below this level are dropped; set from BRIGADE_LOG (debug|info|warn|error|off).
level threshold();
void set_threshold(level l);

void write(level l, std::string_view component, std::string_view message);

inline void debug(std::string_view c, std::string_view m) {
  write(level::debug, c, m);
}
inline void info(std::string_view c, std::string_view m) {
  write(level::info, c, m);
}
inline void warn(std::string_view c, std::string_view m) {
  write(level::warn, c, m);
}
inline void error(std::string_view c, std::string_view m) {
  write(level::error, c, m);
}

}  // namespace brigade::log
