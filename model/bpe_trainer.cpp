#include "model/bpe_trainer.hpp"

#include <unordered_map>

#include "model/byte_level.hpp"

namespace brigade::model {
namespace {

uint64_t pack(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct word {
  std::vector<int32_t> symbols;
  int64_t count = 0;
};

using pair_counts = std::unordered_map<uint64_t, int64_t>;

void count_pairs(const word& w, int64_t sign, pair_counts& counts) {
  for (std::size_t i = 0; i + 1 < w.symbols.size(); ++i) {
    counts[pack(w.symbols[i], w.symbols[i + 1])] += sign * w.count;
  }
}

bool contains_pair(const word& w, int32_t left, int32_t right) {
  for (std::size_t i = 0; i + 1 < w.symbols.size(); ++i) {
    if (w.symbols[i] == left && w.symbols[i + 1] == right) return true;
  }
  return false;
}

// Replaces each occurrence of (left, right), scanning left to right without overlap.
void merge_pair(word& w, int32_t left, int32_t right, int32_t merged) {
  std::size_t out = 0;
  for (std::size_t i = 0; i < w.symbols.size(); ++i) {
    if (i + 1 < w.symbols.size() && w.symbols[i] == left && w.symbols[i + 1] == right) {
      w.symbols[out++] = merged;
      ++i;
    } else {
      w.symbols[out++] = w.symbols[i];
    }
  }
  w.symbols.resize(out);
}

// The most frequent pair; among equals the smallest (left, right), whatever the map's order.
bool best_pair(const pair_counts& counts, uint64_t& best) {
  int64_t best_count = 0;
  for (const auto& [key, count] : counts) {
    if (count > best_count || (count == best_count && count > 0 && key < best)) {
      best_count = count;
      best = key;
    }
  }
  return best_count > 0;
}

}  // namespace

void bpe_trainer::add_word(std::string_view w) {
  if (!w.empty()) ++word_counts_[std::string(w)];
}

std::vector<bpe::merge_pair> bpe_trainer::train(std::size_t new_tokens) const {
  std::vector<std::string> tokens;
  std::unordered_map<std::string, int32_t> id_of;
  for (int b = 0; b < 256; ++b) {
    tokens.emplace_back(byte_level::char_of(static_cast<uint8_t>(b)));
    id_of.emplace(tokens.back(), b);
  }
  std::vector<word> words;
  pair_counts counts;
  for (const auto& [text, count] : word_counts_) {
    word w;
    w.count = count;
    for (char c : text)
      w.symbols.push_back(static_cast<uint8_t>(c));
    count_pairs(w, +1, counts);
    words.push_back(std::move(w));
  }
  std::vector<bpe::merge_pair> merges;
  uint64_t best = 0;
  while (tokens.size() < 256 + new_tokens && best_pair(counts, best)) {
    const auto left = static_cast<int32_t>(best >> 32);
    const auto right = static_cast<int32_t>(best & 0xFFFFFFFFu);
    const std::string text = tokens[left] + tokens[right];
    auto [it, inserted] = id_of.emplace(text, static_cast<int32_t>(tokens.size()));
    if (inserted) tokens.push_back(text);
    merges.emplace_back(tokens[left], tokens[right]);
    for (word& w : words) {
      if (!contains_pair(w, left, right)) continue;
      count_pairs(w, -1, counts);
      merge_pair(w, left, right, it->second);
      count_pairs(w, +1, counts);
    }
    counts.erase(best);
  }
  return merges;
}

}  // namespace brigade::model
