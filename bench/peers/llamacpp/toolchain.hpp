// Everything brigade needs to run llama.cpp beside itself, made once in a directory of its own
// (by default build/peers/llamacpp, beside the brigade binary):
//
//   1. `npm install` of the pinned package.json: node-llama-cpp and @node-llama-cpp/linux-x64,
//      whose bins/linux-x64 holds prebuilt libllama, libggml and one libggml-cpu-<variant>.so
//      per CPU generation (haswell = AVX2, zen4, sapphirerapids, ...);
//   2. llama.cpp's public headers of the same release, from the git bundle node-llama-cpp ships;
//   3. the driver, llama_driver.c (embedded in brigade), compiled by gcc against those.
//
// Each step is skipped when its result is already there. Nothing is downloaded but the npm
// packages, and npm's ordinary cache serves them when it has them.
#pragma once

#include <string>
#include <vector>

#include "common/result.hpp"

namespace brigade::bench::llamacpp {

struct toolchain {
  std::string dir;              ///< Where all of it lives.
  std::string lib_dir;          ///< The prebuilt libraries.
  std::string driver;           ///< The compiled driver.
  std::string avx2_cpu_lib;     ///< libggml-cpu-haswell.so, or empty when the package has none.
  std::string package_version;  ///< @node-llama-cpp/linux-x64's version.
  std::string llama_release;    ///< llama.cpp's release tag in node-llama-cpp.
};

/// The programs the setup runs; an error names the missing ones and how to install them.
status check_programs();

/// Prepares (or reuses) the toolchain in `dir`; progress goes to stderr.
result<toolchain> prepare_toolchain(const std::string& dir);

/// build/peers/llamacpp: "peers/llamacpp" beside the running brigade binary.
std::string default_toolchain_dir();

}  // namespace brigade::bench::llamacpp
