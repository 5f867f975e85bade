#include "model/tokenizer.hpp"

#include <sys/stat.h>
#include <algorithm>

#include "model/tokenizer_json.hpp"
#include "model/utf8.hpp"

namespace brigade::model {

struct tokenizer::impl {
  tokenizer_json::parts parts;
  int32_t size = 0;
  /// For each id below `size`, the index of its added token, or -1.
  std::vector<int32_t> added_index_of_id;
  bool has_normalized_added = false;

  explicit impl(tokenizer_json::parts p) : parts(std::move(p)) {
    size = parts.model.id_limit();
    const auto& added = parts.added.tokens();
    for (const added_token& t : added)
      size = std::max(size, t.id + 1);
    added_index_of_id.assign(static_cast<std::size_t>(size), -1);
    for (std::size_t i = 0; i < added.size(); ++i) {
      added_index_of_id[added[i].id] = static_cast<int32_t>(i);
      has_normalized_added = has_normalized_added || added[i].normalized;
    }
  }

  const added_token* added_of(int32_t id) const {
    if (id < 0 || id >= size || added_index_of_id[id] < 0) return nullptr;
    return &parts.added.tokens()[added_index_of_id[id]];
  }

  // As the Hugging Face library decodes: the token strings (added tokens as their content,
  // unknown ids left out) go through the decoder's steps.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special, bool* incomplete) const {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (int32_t id : ids) {
      if (const added_token* t = added_of(id)) {
        if (!(skip_special && t->special)) tokens.push_back(t->content);
      } else if (const std::string* token = parts.model.token_of(id)) {
        tokens.push_back(*token);
      }
    }
    return parts.dec.decode(std::move(tokens), incomplete);
  }

  void encode_pieces(std::string_view text, bool at_start, std::vector<int32_t>& ids,
                     std::vector<std::string>& pieces) const {
    pieces.clear();
    parts.pre.split(text, pieces, at_start);
    for (const std::string& piece : pieces)
      parts.model.encode_word(piece, ids);
  }

  // Normalizes one run of text between raw-matched added tokens, then splits it on the added
  // tokens that match normalized text, as the Hugging Face library does. `at_start`: the run
  // begins the input.
  void encode_run(std::string_view text, bool at_start, std::vector<int32_t>& ids,
                  std::vector<std::string>& pieces) const {
    const std::string normalized = parts.norm.apply(text);
    if (!has_normalized_added) {
      encode_pieces(normalized, at_start, ids, pieces);
      return;
    }
    std::vector<added_vocabulary::segment> segments;
    parts.added.split(normalized, /*normalized=*/true, segments);
    for (const auto& seg : segments) {
      if (seg.id >= 0) {
        ids.push_back(seg.id);
      } else {
        encode_pieces(seg.text, at_start && seg.text.data() == normalized.data(), ids, pieces);
      }
    }
  }
};

tokenizer::tokenizer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
tokenizer::tokenizer(tokenizer&&) noexcept = default;
tokenizer& tokenizer::operator=(tokenizer&&) noexcept = default;
tokenizer::~tokenizer() = default;

result<tokenizer> tokenizer::load_files(const std::string& tokenizer_json,
                                        const std::string& tokenizer_config_json) {
  auto parts = tokenizer_json::read(tokenizer_json, tokenizer_config_json);
  if (!parts) return parts.err();
  return tokenizer(std::make_unique<impl>(std::move(*parts)));
}

result<tokenizer> tokenizer::load(const std::string& dir) {
  const std::string config = dir + "/tokenizer_config.json";
  struct stat info {};
  const bool has_config = ::stat(config.c_str(), &info) == 0;
  return load_files(dir + "/tokenizer.json", has_config ? config : std::string());
}

// Invalid UTF-8 is repaired to U+FFFD first: every later stage works on Unicode text.
std::vector<int32_t> tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::string repaired;
  if (!utf8::is_valid(text)) {
    repaired = utf8::repair(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  std::vector<std::string> pieces;
  std::vector<added_vocabulary::segment> segments;
  impl_->parts.added.split(text, /*normalized=*/false, segments);
  for (const auto& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
    } else {
      impl_->encode_run(seg.text, seg.text.data() == text.data(), ids, pieces);
    }
  }
  if (add_special_tokens) return impl_->parts.post.apply(std::move(ids));
  return ids;
}

std::vector<int32_t> tokenizer::encode(std::string_view text) const {
  return encode(text, /*add_special_tokens=*/false);
}

std::string tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  return impl_->decode(ids, skip_special, nullptr);
}

int32_t tokenizer::size() const {
  return impl_->size;
}

std::optional<int32_t> tokenizer::token_id(std::string_view token) const {
  if (const added_token* t = impl_->parts.added.find_content(token)) return t->id;
  return impl_->parts.model.id_of(token);
}

std::optional<std::string> tokenizer::token_text(int32_t id) const {
  if (const added_token* t = impl_->added_of(id)) return t->content;
  if (const std::string* token = impl_->parts.model.token_of(id)) return *token;
  return std::nullopt;
}

bool tokenizer::is_special(int32_t id) const {
  const added_token* t = impl_->added_of(id);
  return t != nullptr && t->special;
}

std::optional<int32_t> tokenizer::bos_id() const {
  return impl_->parts.bos_id;
}
std::optional<int32_t> tokenizer::eos_id() const {
  return impl_->parts.eos_id;
}

incremental_decoder::incremental_decoder(const tokenizer& tok, bool skip_special)
    : tok_(&tok), skip_special_(skip_special) {}

// Special tokens to skip are left out of the window, as decode() leaves them out of the list
// its decoder sees.
std::string incremental_decoder::push(int32_t id) {
  if (skip_special_ && tok_->is_special(id)) return {};
  window_.push_back(id);
  bool incomplete = false;
  std::string text = tok_->impl_->decode(window_, false, &incomplete);
  if (incomplete && window_.size() - context_ <= kMaxPendingTokens) return {};
  return emit_from(std::move(text));
}

// The window's text normally extends the context's; a decoder that trims the end of the text
// can break that, and then the pending ids wait (up to the bound).
std::string incremental_decoder::emit_from(std::string text) {
  const bool extends = text.compare(0, context_text_.size(), context_text_) == 0;
  if (!extends && window_.size() - context_ <= kMaxPendingTokens) return {};
  std::string out = text.substr(std::min(context_text_.size(), text.size()));
  window_.erase(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(context_));
  context_ = window_.size();
  context_text_ = tok_->impl_->decode(window_, false, nullptr);
  return out;
}

std::string incremental_decoder::finish() {
  const std::string text = tok_->impl_->decode(window_, false, nullptr);
  std::string out = text.substr(std::min(context_text_.size(), text.size()));
  window_.clear();
  context_ = 0;
  context_text_.clear();
  return out;
}

}  // namespace brigade::model
