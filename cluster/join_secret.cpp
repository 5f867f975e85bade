#include "cluster/join_secret.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/hex.hpp"

namespace brigade::cluster {

result<std::string> read_join_secret(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return error(errc::invalid_argument,
                 path +
                     ": is a directory; the join secret file must be a file holding the "
                     "secret (create one with, e.g., `head -c 32 /dev/urandom | base64 > "
                     "FILE`)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return error(errc::not_found, path +
                                      ": cannot read the join secret file (create one with, "
                                      "e.g., `head -c 32 /dev/urandom | base64 > FILE`)");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string secret = ss.str();
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r'))
    secret.pop_back();
  if (secret.size() < 16) {
    return error(errc::invalid_argument,
                 path + ": the join secret must be at least 16 bytes (it has " +
                     std::to_string(secret.size()) + ")");
  }
  return secret;
}

std::string random_nonce() {
  unsigned char bytes[nonce_chars / 2];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    // RAND_bytes fails only without an entropy source; refuse to run with a guessable nonce.
    throw std::runtime_error("no random source for join nonces");
  }
  return to_hex(bytes, sizeof bytes);
}

std::string join_proof(const std::string& secret, const std::string& role, const std::string& first,
                       const std::string& second) {
  const std::string message = "brigade-join|" + role + "|" + first + "|" + second;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
  return to_hex(mac, len);
}

kvcache::hash_key_bytes block_hash_key(const std::string& secret) {
  static const std::string label = "brigade-kv-block-hash-key|v1";
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(label.data()), label.size(), mac, &len);
  kvcache::hash_key_bytes key{};
  std::memcpy(key.data(), mac, key.size());
  return key;
}

bool proofs_equal(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace brigade::cluster
