#include "common/progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace brigade {

progress_bar::progress_bar(std::string label)
    : label_(std::move(label)),
      tty_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void progress_bar::update(size_t done, size_t total) {
  if (!tty_ || total == 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int width = 30;
  const int filled = static_cast<int>(width * done / total);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '.');
  std::fprintf(stderr, "\r%s [%s] %3d%%", label_.c_str(), bar.c_str(),
               static_cast<int>(100 * done / total));
  std::fflush(stderr);
}

void progress_bar::finish(const std::string& summary) {
  if (finished_) return;
  finished_ = true;
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (tty_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%s: done in %.1f s%s%s\n", label_.c_str(), secs,
               summary.empty() ? "" : ", ", summary.c_str());
}

}  // namespace brigade
