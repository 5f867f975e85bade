// One running llama.cpp driver (llama_driver.c): the GGUF model loaded once, one CPU variant,
// asked for greedy tokens and timings a line at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/peers/llamacpp/toolchain.hpp"
#include "common/result.hpp"
#include "common/subprocess.hpp"

namespace brigade::bench::llamacpp {

class llama_peer {
 public:
  /// Starts the driver on `gguf` with `threads` threads; `cpu_lib` names one libggml-cpu variant,
  /// empty lets llama.cpp pick the best one for this CPU.
  static result<llama_peer> start(const toolchain& tc, const std::string& gguf,
                                  const std::string& cpu_lib, int threads);
  ~llama_peer();
  llama_peer(llama_peer&&) = default;
  llama_peer& operator=(llama_peer&&) = default;

  /// The CPU variant llama.cpp loaded (haswell, zen4, sapphirerapids, ...).
  const std::string& variant() const { return variant_; }

  /// `tokens` tokens by argmax after `prompt`.
  result<std::vector<int32_t>> greedy(const std::vector<int32_t>& prompt, int tokens);
  /// One `tokens`-token prompt in a single step, best of `trials` after a warm-up.
  result<double> prefill_tokens_per_s(int tokens, int trials);
  /// `batch` sequences of `prompt_tokens`-token prompts, `steps` timed steps after a warm-up.
  result<double> decode_tokens_per_s(int batch, int steps, int prompt_tokens);

 private:
  explicit llama_peer(subprocess proc) : proc_(std::move(proc)) {}
  /// Sends one command; returns the rest of the reply line after `reply`.
  result<std::string> ask(const std::string& command, const std::string& reply);

  subprocess proc_;
  std::string variant_;
};

}  // namespace brigade::bench::llamacpp
