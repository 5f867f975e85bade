// Runs the brigade binary the way a user does, for the tests of its command line.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "tests/support/text.hpp"

namespace brigade::testing {

struct brigade_run {
  int exit_code = -1;
  std::string out;  ///< stdout
  std::string err;  ///< stderr
  std::string all() const { return out + err; }
};

/// `brigade ARGS`, from the build tree; stdout and stderr kept apart.
inline brigade_run run_brigade(const std::string& args) {
  // A file per run: ctest runs test cases as processes of their own, side by side.
  static int runs = 0;
  const std::string err_path = std::string(BRIGADE_BINARY_DIR) + "/run_brigade." +
                               std::to_string(::getpid()) + "." + std::to_string(++runs) +
                               ".stderr";
  const std::string command =
      std::string(BRIGADE_BINARY_DIR) + "/brigade " + args + " 2>" + err_path;
  brigade_run r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    r.err = "could not start: " + command;
    return r;
  }
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0)
    r.out.append(buffer, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_text(err_path);
  std::remove(err_path.c_str());
  return r;
}

}  // namespace brigade::testing
