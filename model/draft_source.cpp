#include "model/draft_source.hpp"

#include <stdexcept>

#include "model/draft_model.hpp"
#include "model/prompt_lookup.hpp"

namespace brigade::model {

std::unique_ptr<draft_source> make_draft_source(const speculation_options& options,
                                                std::shared_ptr<const loaded_model> draft,
                                                const draft_source_limits& limits,
                                                std::shared_ptr<const confidence_head> head) {
  if (!options.enabled()) return nullptr;
  switch (options.draft) {
    case draft_kind::none:
      return nullptr;
    case draft_kind::lookup:
      return std::make_unique<prompt_lookup>(options);
    case draft_kind::model:
      // The caller loads the draft (draft_model::load), where a bad checkpoint is an error
      // value; asking for a draft model without one is a bug of the caller.
      if (!draft) throw std::logic_error("a draft model source needs the draft's weights");
      draft_source_limits windowed = limits;
      windowed.attention_window = draft_model::attention_window_for(options, *draft);
      return std::make_unique<draft_model>(std::move(draft), windowed, std::move(head));
  }
  return nullptr;
}

}  // namespace brigade::model
