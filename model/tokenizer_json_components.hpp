// Readers of a tokenizer.json's pipeline sections: "normalizer", "pre_tokenizer", "decoder" and
// "post_processor". Each builds brigade's component from the section, or refuses a type or
// field value it cannot honour with an error naming its path; nothing is silently ignored.
#pragma once

#include <string>

#include "common/result.hpp"
#include "model/decoder.hpp"
#include "model/normalizer.hpp"
#include "model/post_processor.hpp"
#include "model/pre_tokenizer.hpp"
#include "model/tokenizer_json_fields.hpp"

namespace brigade::model::tokenizer_json {

/// NFC, NFD, NFKC, NFKD, Prepend, Replace and Sequence.
status read_normalizer(const json& n, const std::string& path, normalizer& out);

/// ByteLevel, Split, Metaspace and Sequence; nothing may follow ByteLevel, whose byte mapping
/// brigade leaves to the BPE model.
status read_pre_tokenizer(const json& p, const std::string& path, pre_tokenizer& out);

/// ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip and Sequence.
status read_decoder(const json& d, const std::string& path, decoder& out);

/// TemplateProcessing (its "single" template), ByteLevel (adds nothing) and Sequence.
status read_post_processor(const json& p, const std::string& path, post_processor& out);

}  // namespace brigade::model::tokenizer_json
