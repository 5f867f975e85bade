#include "model/tokenizer.hpp"

#include <sys/stat.h>
#include <algorithm>

#include "model/byte_level.hpp"
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

  // The bytes `id` stands for; added tokens are written as their content.
  void append_bytes(int32_t id, bool skip_special, std::string& out) const {
    if (const added_token* t = added_of(id)) {
      if (!(skip_special && t->special)) out += t->content;
      return;
    }
    if (const std::string* token = parts.model.token_of(id)) {
      byte_level::decode_append(*token, out);
    }
  }

  void encode_normalized(std::string_view text, std::vector<int32_t>& ids,
                         std::vector<std::string>& pieces) const {
    pieces.clear();
    parts.pre.split(text, pieces);
    for (const std::string& piece : pieces)
      parts.model.encode_word(piece, ids);
  }

  // Normalizes one run of text between raw-matched added tokens, then splits it on the
  // added tokens that match normalized text, as the Hugging Face library does.
  void encode_run(std::string_view text, std::vector<int32_t>& ids,
                  std::vector<std::string>& pieces) const {
    const std::string normalized = parts.norm.apply(text);
    if (!has_normalized_added) {
      encode_normalized(normalized, ids, pieces);
      return;
    }
    std::vector<added_vocabulary::segment> segments;
    parts.added.split(normalized, /*normalized=*/true, segments);
    for (const auto& seg : segments) {
      if (seg.id >= 0) {
        ids.push_back(seg.id);
      } else {
        encode_normalized(seg.text, ids, pieces);
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
std::vector<int32_t> tokenizer::encode(std::string_view text) const {
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
      impl_->encode_run(seg.text, ids, pieces);
    }
  }
  return ids;
}

// Ids outside the vocabulary are skipped, as the Hugging Face library does.
std::string tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids)
    impl_->append_bytes(id, skip_special, bytes);
  if (utf8::is_valid(bytes)) return bytes;
  return utf8::repair(bytes);
}

int32_t tokenizer::size() const {
  return impl_->size;
}

std::optional<int32_t> tokenizer::token_id(std::string_view token) const {
  if (const added_token* t = impl_->parts.added.find_content(token)) return t->id;
  return impl_->parts.model.id_of(token);
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

std::string incremental_decoder::push(int32_t id) {
  tok_->impl_->append_bytes(id, skip_special_, pending_);
  const std::size_t complete = utf8::complete_prefix_size(pending_);
  if (complete == 0) return {};
  std::string out = utf8::repair(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string incremental_decoder::finish() {
  std::string out = utf8::repair(pending_);
  pending_.clear();
  return out;
}

}  // namespace brigade::model
