#include "common/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace brigade {
namespace {

error os_error(const std::string& what) {
  return error(errc::io_error, what + ": " + std::strerror(errno));
}

/// The child's environment: ours with `overrides` applied, as "NAME=value" strings.
std::vector<std::string> child_environment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& o : overrides)
      overridden |= o.first == name;
    if (!overridden) env.push_back(entry);
  }
  for (const auto& [name, value] : overrides)
    env.push_back(name + "=" + value);
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

/// In the child after fork: only async-signal-safe calls (the parent may have threads holding
/// locks), so everything was prepared before fork. Never returns.
[[noreturn]] void exec_child(char** argv, char** envp, bool merge_stderr, int in_read,
                             int out_write, int err_fd, const char* dir) {
  if (dir && ::chdir(dir) != 0) _exit(126);
  dup2(in_read, STDIN_FILENO);
  dup2(out_write, STDOUT_FILENO);
  if (merge_stderr) dup2(out_write, STDERR_FILENO);
  if (err_fd >= 0) dup2(err_fd, STDERR_FILENO);
  execvpe(argv[0], argv, envp);
  static const char message[] = "subprocess: exec failed\n";
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, message, sizeof message - 1);
  _exit(127);
}

}  // namespace

result<subprocess> subprocess::spawn(const options& opts) {
  if (opts.argv.empty()) return error(errc::invalid_argument, "subprocess: empty argv");
  int in_pipe[2];
  int out_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) return os_error("subprocess: pipe");
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    ::close(in_pipe[0]);
    ::close(in_pipe[1]);
    return os_error("subprocess: pipe");
  }
  std::vector<std::string> args = opts.argv;
  std::vector<std::string> env = child_environment(opts.env);
  std::vector<char*> argv = pointers(args);
  std::vector<char*> envp = pointers(env);
  int err_fd = -1;
  if (!opts.stderr_path.empty()) {
    err_fd = ::open(opts.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (err_fd < 0) {
      for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]})
        ::close(fd);
      return os_error("subprocess: cannot open " + opts.stderr_path);
    }
  }
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_fd}) {
      if (fd >= 0) ::close(fd);
    }
    return os_error("subprocess: fork");
  }
  if (pid == 0) {
    exec_child(argv.data(), envp.data(), opts.merge_stderr, in_pipe[0], out_pipe[1], err_fd,
               opts.working_dir.empty() ? nullptr : opts.working_dir.c_str());
  }
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  if (err_fd >= 0) ::close(err_fd);
  subprocess child;
  child.pid_ = pid;
  child.stdin_fd_ = in_pipe[1];
  child.stdout_fd_ = out_pipe[0];
  return child;
}

subprocess::~subprocess() {
  release();
}

subprocess::subprocess(subprocess&& other) noexcept {
  *this = std::move(other);
}

subprocess& subprocess::operator=(subprocess&& other) noexcept {
  if (this == &other) return *this;
  release();
  pid_ = std::exchange(other.pid_, -1);
  stdin_fd_ = std::exchange(other.stdin_fd_, -1);
  stdout_fd_ = std::exchange(other.stdout_fd_, -1);
  buffer_ = std::move(other.buffer_);
  eof_ = other.eof_;
  return *this;
}

void subprocess::release() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int wstatus = 0;
    waitpid(pid_, &wstatus, 0);
    pid_ = -1;
  }
  close_stdin();
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  stdout_fd_ = -1;
}

status subprocess::write_line(std::string_view line) {
  std::string text(line);
  text.push_back('\n');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(stdin_fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return os_error("subprocess: write to child");
    done += static_cast<size_t>(n);
  }
  return ok_status();
}

void subprocess::close_stdin() {
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  stdin_fd_ = -1;
}

status subprocess::fill(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return error(errc::unavailable, "subprocess: timed out reading");
  pollfd p{stdout_fd_, POLLIN, 0};
  const int ready = poll(&p, 1, static_cast<int>(left.count()));
  if (ready < 0 && errno == EINTR) return ok_status();
  if (ready < 0) return os_error("subprocess: poll");
  if (ready == 0) return error(errc::unavailable, "subprocess: timed out reading");
  char chunk[4096];
  const ssize_t n = ::read(stdout_fd_, chunk, sizeof chunk);
  if (n < 0 && errno == EINTR) return ok_status();
  if (n < 0) return os_error("subprocess: read from child");
  if (n == 0) eof_ = true;
  buffer_.append(chunk, static_cast<size_t>(n));
  return ok_status();
}

result<std::string> subprocess::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const size_t newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    if (eof_) return error(errc::unavailable, "subprocess: the child closed its output");
    if (status s = fill(deadline); !s) return s.err();
  }
}

result<std::string> subprocess::read_all(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!eof_) {
    if (status s = fill(deadline); !s) return s.err();
  }
  return std::exchange(buffer_, std::string());
}

status subprocess::kill(int signal) {
  if (pid_ <= 0) return error(errc::invalid_argument, "subprocess: no child to signal");
  if (::kill(pid_, signal) != 0) return os_error("subprocess: kill");
  return ok_status();
}

result<int> subprocess::wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return error(errc::invalid_argument, "subprocess: no child to wait for");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int wstatus = 0;
    const pid_t done = waitpid(pid_, &wstatus, WNOHANG);
    if (done == pid_) {
      pid_ = -1;
      if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
      return WEXITSTATUS(wstatus);
    }
    if (done < 0) return os_error("subprocess: waitpid");
    if (std::chrono::steady_clock::now() >= deadline) {
      return error(errc::unavailable, "subprocess: the child did not exit in time");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace brigade
