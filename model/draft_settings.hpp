// A draft checkpoint's own settings for running it as a draft, kept beside its weights in
// draft_settings.json (brigade's file, as confidence_head.json is): what its trainer knows and a
// Hugging Face config has no field for.
//
//   {"attention_window": 256}
//
// attention_window: the positions the draft attends to, the most recent (0: all of them). The
// default pair's draft was trained on 512-token windows and guesses better, and costs less, with
// 256 at long contexts (docs/speculation.md, "The draft's attention window"); a draft without
// the file attends to its whole context unless the manifest says otherwise.
#pragma once

#include <string>

#include "common/result.hpp"

namespace brigade::model {

struct draft_settings {
  int attention_window = 0;

  static constexpr const char* file_name = "draft_settings.json";
  /// Reads `text` (from `origin`, named in errors): an object whose fields are all known.
  static result<draft_settings> parse(const std::string& text, const std::string& origin);
  /// The settings in DIR's draft_settings.json; the defaults where DIR has none.
  static result<draft_settings> for_draft(const std::string& dir);
};

}  // namespace brigade::model
