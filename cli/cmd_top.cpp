// `brigade top`: a terminal view of a running `brigade serve`, redrawn in place every interval:
// roles, shard load, balancedness per window and expert-balancing events. cli/top_view.hpp
// draws the frame; this file owns the terminal: plain ANSI escapes only (cursor home, clear to
// the end of the line and of the screen, hide and show the cursor), so it works over SSH.
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/top_events.hpp"
#include "cli/top_source.hpp"
#include "cli/top_view.hpp"

namespace brigade::cli {

namespace {

// What the signal handler needs, set before it is installed.
volatile std::sig_atomic_t g_signal = 0;
std::atomic<top_poller*> g_poller{nullptr};
bool g_tty_out = false;
bool g_tty_in = false;
termios g_saved_termios{};

constexpr char hide_cursor[] = "\x1b[?25l";
constexpr char show_cursor[] = "\x1b[?25h";

void write_all(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(STDOUT_FILENO, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Async-signal-safe, so that the handler gives the terminal back at once.
void restore_terminal() {
  if (g_tty_out && ::write(STDOUT_FILENO, show_cursor, sizeof show_cursor - 1) < 0) return;
  if (g_tty_in) tcsetattr(STDIN_FILENO, TCSANOW, &g_saved_termios);
}

// The first SIGINT or SIGTERM ends the poll in progress and the main loop; a second one, for a
// server that holds a request, exits at once.
void on_signal(int sig) {
  if (g_signal != 0) _exit(128 + sig);
  g_signal = sig;
  restore_terminal();
  if (top_poller* poller = g_poller.load()) poller->interrupt();
}

/// The terminal for as long as top runs: the cursor hidden, keys read one by one without echo,
/// SIGINT and SIGTERM caught; all of it restored on destruction.
class terminal {
 public:
  terminal() {
    g_tty_out = isatty(STDOUT_FILENO) != 0;
    g_tty_in = isatty(STDIN_FILENO) != 0 && tcgetattr(STDIN_FILENO, &g_saved_termios) == 0;
    watch_keys_ = g_tty_in;
    if (g_tty_in) {
      termios keys = g_saved_termios;
      keys.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
      keys.c_cc[VMIN] = 0;
      keys.c_cc[VTIME] = 0;
      tcsetattr(STDIN_FILENO, TCSANOW, &keys);
    }
    if (g_tty_out) write_all(hide_cursor);
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // No SA_RESTART: a signal ends the wait for a key at once.
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }

  ~terminal() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    restore_terminal();
    if (g_tty_out) write_all("\r\n");
  }

  terminal(const terminal&) = delete;
  terminal& operator=(const terminal&) = delete;

  /// The window's size, or 80x24 when the output is not a terminal.
  frame_size size() const {
    winsize ws{};
    if (g_tty_out && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0)
      return {ws.ws_col, ws.ws_row};
    return {};
  }

  /// Draws over the last frame: home, each line cleared to its end, the rest of the screen
  /// cleared, in one write. Not on a terminal, frames follow each other, a blank line apart.
  void draw(const std::vector<std::string>& lines) const {
    std::string out = g_tty_out ? "\x1b[H" : "";
    for (size_t i = 0; i < lines.size(); ++i) {
      out += lines[i];
      if (g_tty_out) out += "\x1b[K";
      if (i + 1 < lines.size()) out += g_tty_out ? "\r\n" : "\n";
    }
    out += g_tty_out ? "\x1b[J" : "\n\n";
    write_all(out);
  }

  /// Waits `ms`, less when q is pressed or a signal came: false when top should end.
  bool wait(int64_t ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (g_signal == 0) {
      const auto left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               deadline - std::chrono::steady_clock::now())
                               .count();
      if (left_ms <= 0) return true;
      pollfd in{STDIN_FILENO, POLLIN, 0};
      const int ready = ::poll(&in, watch_keys_ ? 1 : 0, static_cast<int>(left_ms));
      if (ready <= 0 || (in.revents & (POLLIN | POLLHUP)) == 0) continue;
      char keys[64];
      const ssize_t n = ::read(STDIN_FILENO, keys, sizeof keys);
      if (n <= 0) watch_keys_ = false;  // The terminal hung up: Ctrl-C and --frames remain.
      for (ssize_t i = 0; i < n; ++i) {
        if (keys[i] == 'q' || keys[i] == 'Q') return false;
      }
    }
    return false;
  }

 private:
  bool watch_keys_ = false;
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

struct top_args {
  std::string url = "http://127.0.0.1:8000";
  std::string api_key;
  int64_t interval_ms = 1000;
  int64_t frames = 0;
};

void add_options(CLI::App& app, top_args& args) {
  app.add_option("--url", args.url, "the server, http://HOST:PORT")->capture_default_str();
  app.add_option("--api-key", args.api_key, "a key the server was started with, when it has any");
  app.add_option("--interval-ms", args.interval_ms, "time between polls and frames")
      ->check(CLI::Range(int64_t{50}, int64_t{3600000}))
      ->capture_default_str();
  app.add_option("--frames", args.frames, "exit after this many frames (0: until q or Ctrl-C)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
}

// Events kept for the frame: more than any terminal shows.
constexpr size_t kept_events = 64;

}  // namespace

int top(int argc, char** argv) {
  CLI::App app{
      "Watch a running brigade serve in the terminal: roles, shard load of the last window, "
      "balancedness per window and expert-balancing events, redrawn in place. q or Ctrl-C "
      "quits."};
  top_args args;
  add_options(app, args);
  CLI11_PARSE(app, argc, argv);
  auto target = parse_url(args.url);
  if (!target) return std::fprintf(stderr, "brigade top: %s\n", target.err().message.c_str()), 2;

  top_poller poller(*target, args.api_key);
  top_events events(*target, args.api_key, kept_events, args.interval_ms);
  step_means means;
  top_snapshot snapshot;
  snapshot.url = target->url;
  snapshot.interval_ms = args.interval_ms;
  terminal term;
  g_poller = &poller;
  for (int64_t frame = 1; g_signal == 0; ++frame) {
    poller.poll(snapshot);
    if (g_signal != 0) break;
    if (snapshot.error.empty()) means.observe(snapshot.status);
    snapshot.frame = frame;
    snapshot.events = events.last();
    snapshot.events_error = events.error();
    term.draw(render_top(snapshot, means, term.size()));
    if (args.frames > 0 && frame >= args.frames) break;
    if (!term.wait(args.interval_ms)) break;
  }
  g_poller = nullptr;
  return 0;
}

}  // namespace brigade::cli
