// Prompt lookup as a draft source: each sequence drafts from its own context with draft_tokens
// (model/speculation.hpp). It keeps no state between steps, so accepting and releasing cost
// nothing.
#pragma once

#include "model/draft_source.hpp"
#include "model/speculation.hpp"

namespace brigade::model {

class prompt_lookup final : public draft_source {
 public:
  explicit prompt_lookup(const speculation_options& options) : options_(options) {}

  void propose(const std::vector<draft_sequence>& sequences,
               std::vector<draft_proposal>& out) override;
  void accepted(int64_t, int) override {}
  void release(int64_t) override {}

 private:
  speculation_options options_;
};

}  // namespace brigade::model
