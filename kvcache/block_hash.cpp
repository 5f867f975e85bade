#include "kvcache/block_hash.hpp"

#include <cassert>
#include <cstring>

namespace brigade::kvcache {

namespace {

inline std::uint64_t rotl(std::uint64_t x, int b) {
  return (x << b) | (x >> (64 - b));
}

inline std::uint64_t load_le(const unsigned char* p) {
  std::uint64_t w;
  std::memcpy(&w, p, 8);  // x86-64 and aarch64 Linux: little-endian, as SipHash reads words
  return w;
}

struct sip_state {
  std::uint64_t v0, v1, v2, v3;

  void round() {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  }
  void absorb(std::uint64_t m) {
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
  std::uint64_t squeeze() {
    for (int i = 0; i < 4; ++i)
      round();
    return v0 ^ v1 ^ v2 ^ v3;
  }
};

// Domain labels: the root of a chain and the key's name never share an input with a block.
constexpr std::uint64_t root_label[2] = {0x2d65646167697262ULL, 0x31762d746f6f722dULL};
constexpr std::uint64_t key_id_label[2] = {0x2d65646167697262ULL, 0x31762d646979656bULL};

const char hex_digits[] = "0123456789abcdef";

}  // namespace

block_hash siphash128(std::uint64_t k0, std::uint64_t k1, const std::uint64_t prefix[2],
                      const void* data, std::size_t bytes) {
  sip_state s{k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL ^ 0xeeULL,
              k0 ^ 0x6c7967656e657261ULL, k1 ^ 0x7465646279746573ULL};
  s.absorb(prefix[0]);
  s.absorb(prefix[1]);
  const auto* p = static_cast<const unsigned char*>(data);
  const std::size_t whole = bytes / 8 * 8;
  for (std::size_t i = 0; i < whole; i += 8)
    s.absorb(load_le(p + i));
  std::uint64_t last = static_cast<std::uint64_t>((16 + bytes) & 0xff) << 56;
  for (std::size_t i = whole; i < bytes; ++i)
    last |= static_cast<std::uint64_t>(p[i]) << (8 * (i - whole));
  s.absorb(last);
  s.v2 ^= 0xee;
  const std::uint64_t first = s.squeeze();
  s.v1 ^= 0xdd;
  const std::uint64_t second = s.squeeze();
  return {second, first};
}

std::string to_hex(const block_hash& h) {
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[static_cast<std::size_t>(15 - i)] = hex_digits[(h.hi >> (4 * i)) & 0xf];
    out[static_cast<std::size_t>(31 - i)] = hex_digits[(h.lo >> (4 * i)) & 0xf];
  }
  return out;
}

block_hasher::block_hasher(const hash_key_bytes& key) {
  std::memcpy(&k0_, key.data(), 8);
  std::memcpy(&k1_, key.data() + 8, 8);
  key_id_ = siphash128(k0_, k1_, key_id_label, nullptr, 0).lo;
}

void block_hasher::truncate_for_test(int bits) {
  assert(bits >= 1 && bits <= 128);
  bits_ = bits;
}

block_hash block_hasher::finish(block_hash h) const {
  if (bits_ >= 128) return h;
  if (bits_ > 64) {
    h.hi &= (1ULL << (bits_ - 64)) - 1;
    return h;
  }
  h.hi = 0;
  if (bits_ < 64) h.lo &= (1ULL << bits_) - 1;
  return h;
}

block_hash block_hasher::root(std::string_view salt) const {
  return finish(siphash128(k0_, k1_, root_label, salt.data(), salt.size()));
}

block_hash block_hasher::hash_block(const block_hash& parent, const std::int32_t* tokens,
                                    std::size_t block_size) const {
  const std::uint64_t prefix[2] = {parent.lo, parent.hi};
  return finish(siphash128(k0_, k1_, prefix, tokens, block_size * sizeof(std::int32_t)));
}

std::vector<block_hash> block_hasher::chain(const std::int32_t* tokens, std::size_t token_count,
                                            std::size_t block_size, std::string_view salt) const {
  std::vector<block_hash> out;
  extend(out, tokens, token_count, block_size, salt);
  return out;
}

std::size_t block_hasher::extend(std::vector<block_hash>& chain, const std::int32_t* tokens,
                                 std::size_t token_count, std::size_t block_size,
                                 std::string_view salt) const {
  assert(block_size > 0);
  const std::size_t full_blocks = token_count / block_size;
  const std::size_t before = chain.size();
  if (full_blocks <= before) return 0;
  chain.reserve(full_blocks);
  block_hash parent = chain.empty() ? root(salt) : chain.back();
  for (std::size_t b = before; b < full_blocks; ++b) {
    parent = hash_block(parent, tokens + b * block_size, block_size);
    chain.push_back(parent);
  }
  return full_blocks - before;
}

}  // namespace brigade::kvcache
