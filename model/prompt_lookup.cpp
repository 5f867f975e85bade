#include "model/prompt_lookup.hpp"

namespace brigade::model {

void prompt_lookup::propose(const std::vector<draft_sequence>& sequences,
                            std::vector<draft_proposal>& out) {
  out.assign(sequences.size(), {});
  for (size_t i = 0; i < sequences.size(); ++i)
    out[i].tokens = draft_tokens(*sequences[i].tokens, sequences[i].limit, options_);
}

}  // namespace brigade::model
