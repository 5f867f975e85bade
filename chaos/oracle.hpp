// The single-process engine's answers to a chaos run's requests: what every complete answer
// through the cluster must equal, token for token (compared as the text the API streams).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chaos/workload.hpp"
#include "common/result.hpp"

namespace brigade::chaos {

class oracle {
 public:
  /// Loads the model at `model_dir` on the CPU backend.
  static result<std::unique_ptr<oracle>> load(const std::string& model_dir);
  ~oracle();

  /// The text the engine generates for each request (greedy or seeded, end of sequence
  /// ignored), in the order given.
  result<std::vector<std::string>> answers(const std::vector<request_spec>& requests);
  /// Token ids of `text` with the model's tokenizer (prompt files that hold text).
  std::vector<int32_t> encode(const std::string& text) const;
  int vocab() const;
  int max_positions() const;

 private:
  struct impl;
  explicit oracle(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace brigade::chaos
