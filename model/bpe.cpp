#include "model/bpe.hpp"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "model/byte_level.hpp"
#include "model/utf8.hpp"

namespace brigade::model {
namespace {

// Ids past this bound would make the id-to-token table unreasonably large; real vocabularies
// stay under a million.
constexpr int32_t kMaxVocabId = 1 << 24;
// The word cache is cleared when it reaches this many words, which bounds its memory.
constexpr std::size_t kCacheWords = 1 << 16;
// Longer words are rare and not worth keeping.
constexpr std::size_t kCacheWordBytes = 128;

struct merge_rule {
  int32_t rank = 0;
  int32_t merged_id = 0;
};

// Open-addressing map from a pair of token ids to its merge: the merge loop's hot lookup, which
// std::unordered_map makes several times slower.
class merge_table {
 public:
  void build(const std::vector<std::pair<uint64_t, merge_rule>>& entries) {
    std::size_t capacity = 16;
    while (capacity < entries.size() * 2)
      capacity *= 2;
    keys_.assign(capacity, kEmpty);
    rules_.assign(capacity, merge_rule{});
    for (const auto& [key, rule] : entries) {
      std::size_t slot = hash(key) & (capacity - 1);
      while (keys_[slot] != kEmpty && keys_[slot] != key)
        slot = (slot + 1) & (capacity - 1);
      // A pair listed twice keeps its first (lowest) rank, as the Hugging Face library does.
      if (keys_[slot] == key) continue;
      keys_[slot] = key;
      rules_[slot] = rule;
    }
  }

  const merge_rule* find(int32_t left, int32_t right) const {
    const uint64_t key = pack(left, right);
    const std::size_t mask = keys_.size() - 1;
    for (std::size_t slot = hash(key) & mask;; slot = (slot + 1) & mask) {
      if (keys_[slot] == key) return &rules_[slot];
      if (keys_[slot] == kEmpty) return nullptr;
    }
  }

  static uint64_t pack(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static std::size_t hash(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return static_cast<std::size_t>(key);
  }
  std::vector<uint64_t> keys_;
  std::vector<merge_rule> rules_;
};

struct symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
};

struct candidate {
  int32_t rank;
  int32_t pos;
  int32_t left_id;
  int32_t right_id;
  int32_t merged_id;
  // std heaps are max-heaps: the "greatest" candidate is the lowest rank, then leftmost.
  bool operator<(const candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

std::string quote(std::string_view s) {
  return "'" + std::string(s) + "'";
}

// The ids a word starts from besides its characters: byte tokens and the unknown token.
status find_special_ids(const bpe::options& opts,
                        const std::unordered_map<std::string, int32_t>& vocab,
                        std::array<int32_t, 256>& byte_id, int32_t& unk_id) {
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", b);
    if (!opts.byte_level) {
      const auto it = vocab.find(std::string("<") + hex + ">");
      byte_id[b] = it == vocab.end() ? -1 : it->second;
      continue;
    }
    const auto it = vocab.find(std::string(byte_level::char_of(static_cast<uint8_t>(b))));
    if (it == vocab.end()) {
      return error{errc::bad_format,
                   std::string("model.vocab has no token for byte ") + hex + " (" +
                       quote(byte_level::char_of(static_cast<uint8_t>(b))) +
                       "); a byte-level BPE vocabulary needs all 256 byte tokens"};
    }
    byte_id[b] = it->second;
  }
  // A byte-level word never meets an unknown character, so its unk_token is never looked up.
  if (opts.byte_level || opts.unk_token.empty()) return ok_status();
  const auto unk = vocab.find(opts.unk_token);
  if (unk == vocab.end()) {
    return error{errc::bad_format,
                 "model.unk_token " + quote(opts.unk_token) + " is not in model.vocab"};
  }
  unk_id = unk->second;
  return ok_status();
}

// The single-character tokens of `vocab` by code point.
void index_characters(const std::unordered_map<std::string, int32_t>& vocab,
                      std::unordered_map<char32_t, int32_t>& out) {
  for (const auto& [token, id] : vocab) {
    if (token.empty() || token.size() > 4 || !utf8::is_valid(token)) continue;
    std::size_t pos = 0;
    const char32_t c = utf8::next(token, pos);
    if (pos == token.size()) out.emplace(c, id);
  }
}

}  // namespace

struct bpe::state {
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> token_of_id;
  std::vector<bool> has_id;
  bool byte_level = true;
  /// Byte-level models: the id of each byte's character. Otherwise, when byte_fallback is on,
  /// the id of each byte's <0xNN> token, or -1 where the vocabulary has none.
  std::array<int32_t, 256> byte_id{};
  bool byte_fallback = false;
  int32_t unk_id = -1;
  bool fuse_unk = false;
  /// Character-level models: the id of each single-character token, by code point, which
  /// spares a string lookup per character.
  std::unordered_map<char32_t, int32_t> char_id;
  merge_table merges;
  bool ignore_merges = false;
  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;
};

bpe::bpe(std::unique_ptr<state> s) : s_(std::move(s)) {}
bpe::bpe(bpe&&) noexcept = default;
bpe& bpe::operator=(bpe&&) noexcept = default;
bpe::~bpe() = default;

result<bpe> bpe::create(std::vector<std::pair<std::string, int32_t>> vocab,
                        const std::vector<merge_pair>& merges, const options& opts) {
  auto s = std::make_unique<state>();
  s->byte_level = opts.byte_level;
  s->byte_fallback = opts.byte_fallback;
  s->fuse_unk = opts.fuse_unk;
  s->ignore_merges = opts.ignore_merges;
  int32_t limit = 0;
  for (const auto& [token, id] : vocab) {
    if (id < 0 || id >= kMaxVocabId) {
      return error{errc::bad_format, "model.vocab[" + quote(token) + "]: id " + std::to_string(id) +
                                         " is outside [0, 2^24)"};
    }
    limit = std::max(limit, id + 1);
  }
  s->token_of_id.resize(static_cast<std::size_t>(limit));
  s->has_id.assign(static_cast<std::size_t>(limit), false);
  s->vocab.reserve(vocab.size());
  for (auto& [token, id] : vocab) {
    if (s->has_id[id]) {
      return error{errc::bad_format, "model.vocab: tokens " + quote(s->token_of_id[id]) + " and " +
                                         quote(token) + " share id " + std::to_string(id)};
    }
    s->has_id[id] = true;
    s->token_of_id[id] = token;
    s->vocab.emplace(std::move(token), id);
  }
  if (auto st = find_special_ids(opts, s->vocab, s->byte_id, s->unk_id); !st) return st.err();
  if (!opts.byte_level) index_characters(s->vocab, s->char_id);
  std::vector<std::pair<uint64_t, merge_rule>> rules;
  rules.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const auto& [left, right] = merges[i];
    const std::string where = "model.merges[" + std::to_string(i) + "]: ";
    const auto l = s->vocab.find(left);
    const auto r = s->vocab.find(right);
    const auto m = s->vocab.find(left + right);
    if (l == s->vocab.end()) {
      return error{errc::bad_format, where + "token " + quote(left) + " is not in model.vocab"};
    }
    if (r == s->vocab.end()) {
      return error{errc::bad_format, where + "token " + quote(right) + " is not in model.vocab"};
    }
    if (m == s->vocab.end()) {
      return error{errc::bad_format,
                   where + "merged token " + quote(left + right) + " is not in model.vocab"};
    }
    rules.emplace_back(merge_table::pack(l->second, r->second),
                       merge_rule{static_cast<int32_t>(i), m->second});
  }
  s->merges.build(rules);
  return bpe(std::move(s));
}

void bpe::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1 && s_->byte_level) {
    out.push_back(s_->byte_id[static_cast<uint8_t>(word[0])]);
    return;
  }
  const bool cacheable = word.size() <= kCacheWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(s_->cache_mutex);
    const auto it = s_->cache.find(std::string(word));
    if (it != s_->cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const std::size_t first = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::vector<int32_t> ids(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
    std::lock_guard<std::mutex> lock(s_->cache_mutex);
    if (s_->cache.size() >= kCacheWords) s_->cache.clear();
    s_->cache.emplace(std::string(word), std::move(ids));
  }
}

// A byte-level word starts as its bytes. Otherwise each character is its token; one the
// vocabulary lacks becomes its <0xNN> byte tokens (byte_fallback, when all exist) or the
// unknown token, which fuse_unk writes once for a run. As in the Hugging Face library, an
// unknown token waits until the next known character or the end of the word.
void bpe::initial_symbols(std::string_view word, std::vector<int32_t>& ids) const {
  if (s_->byte_level) {
    for (char c : word)
      ids.push_back(s_->byte_id[static_cast<uint8_t>(c)]);
    return;
  }
  bool unk_pending = false;
  for (std::size_t pos = 0; pos < word.size();) {
    const std::size_t start = pos;
    const char32_t code_point = utf8::next(word, pos);
    const std::string_view character = word.substr(start, pos - start);
    if (const auto it = s_->char_id.find(code_point); it != s_->char_id.end()) {
      if (unk_pending) ids.push_back(s_->unk_id);
      unk_pending = false;
      ids.push_back(it->second);
      continue;
    }
    const bool has_bytes =
        s_->byte_fallback && std::all_of(character.begin(), character.end(), [this](char c) {
          return s_->byte_id[static_cast<uint8_t>(c)] >= 0;
        });
    if (has_bytes) {
      for (char c : character)
        ids.push_back(s_->byte_id[static_cast<uint8_t>(c)]);
      continue;
    }
    if (s_->unk_id < 0) continue;
    if (unk_pending && !s_->fuse_unk) ids.push_back(s_->unk_id);
    unk_pending = true;
  }
  if (unk_pending) ids.push_back(s_->unk_id);
}

// Applies merges lowest rank first, leftmost first among equal ranks, which is the order the
// Hugging Face library applies them in. A heap of candidate pairs over a linked list of symbols
// keeps a long word at O(n log n); stale candidates are recognised by their ids and dropped.
void bpe::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  if (s_->ignore_merges) {
    const auto it = s_->vocab.find(s_->byte_level ? byte_level::encode(word) : std::string(word));
    if (it != s_->vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  thread_local std::vector<int32_t> ids;
  thread_local std::vector<symbol> symbols;
  thread_local std::vector<candidate> heap;
  ids.clear();
  symbols.clear();
  heap.clear();
  initial_symbols(word, ids);
  const auto n = static_cast<int32_t>(ids.size());
  if (n == 0) return;
  for (int32_t i = 0; i < n; ++i)
    symbols.push_back({ids[i], i - 1, i + 1 < n ? i + 1 : -1});
  const auto push_candidate = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    const merge_rule* rule = s_->merges.find(symbols[pos].id, symbols[next].id);
    if (rule == nullptr) return;
    heap.push_back({rule->rank, pos, symbols[pos].id, symbols[next].id, rule->merged_id});
    std::push_heap(heap.begin(), heap.end());
  };
  for (int32_t i = 0; i + 1 < n; ++i)
    push_candidate(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const candidate c = heap.back();
    heap.pop_back();
    symbol& left = symbols[c.pos];
    if (left.id != c.left_id || left.next < 0 || symbols[left.next].id != c.right_id) continue;
    symbol& right = symbols[left.next];
    left.id = c.merged_id;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.pos;
    right.id = -1;
    if (left.prev >= 0) push_candidate(left.prev);
    push_candidate(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next)
    out.push_back(symbols[i].id);
}

const std::string* bpe::token_of(int32_t id) const {
  if (id < 0 || id >= id_limit() || !s_->has_id[id]) return nullptr;
  return &s_->token_of_id[id];
}

std::optional<int32_t> bpe::id_of(std::string_view token) const {
  const auto it = s_->vocab.find(std::string(token));
  if (it == s_->vocab.end()) return std::nullopt;
  return it->second;
}

int32_t bpe::id_limit() const {
  return static_cast<int32_t>(s_->token_of_id.size());
}

}  // namespace brigade::model
