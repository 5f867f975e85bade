// A child process with pipes to its stdin and stdout: for tests and benchmarks that run a peer
// process (fork/exec), talk to it line by line, and kill it on purpose.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"

namespace brigade {

class subprocess {
 public:
  struct options {
    /// Program and arguments; argv[0] is looked up on PATH when it has no '/'.
    std::vector<std::string> argv;
    /// Variables set (or overridden) in the child's environment.
    std::vector<std::pair<std::string, std::string>> env;
    /// Send the child's stderr into the stdout pipe too (otherwise it is inherited).
    bool merge_stderr = false;
    /// Append the child's stderr to this file instead (a log a long-running child fills).
    std::string stderr_path;
    /// The child's working directory (default: the parent's).
    std::string working_dir;
  };

  static result<subprocess> spawn(const options& opts);
  /// Kills (SIGKILL) and reaps a child that is still running.
  ~subprocess();
  subprocess(subprocess&& other) noexcept;
  subprocess& operator=(subprocess&& other) noexcept;
  subprocess(const subprocess&) = delete;
  subprocess& operator=(const subprocess&) = delete;

  pid_t pid() const { return pid_; }

  /// Writes `line` and a newline to the child's stdin.
  status write_line(std::string_view line);
  /// Closes the child's stdin (it sees end of file).
  void close_stdin();
  /// The next line of the child's stdout, without the newline; an error on timeout or EOF.
  result<std::string> read_line(std::chrono::milliseconds timeout);
  /// Everything the child writes to stdout until it closes it; an error on timeout.
  result<std::string> read_all(std::chrono::milliseconds timeout);

  /// Sends `signal` to the child.
  status kill(int signal);
  /// Waits for the child to exit; returns its exit code (128 + signal if killed by one).
  result<int> wait(std::chrono::milliseconds timeout);

 private:
  subprocess() = default;
  /// Reads what is available into buffer_; false on EOF or timeout.
  status fill(std::chrono::steady_clock::time_point deadline);
  void release();

  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
  bool eof_ = false;
};

}  // namespace brigade
