#include "kvcache/hash_key.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace brigade::kvcache {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string key_hex(const hash_key_bytes& key) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (std::uint8_t b : key) {
    out += digits[b >> 4];
    out += digits[b & 0xf];
  }
  return out;
}

}  // namespace

hash_key_bytes random_hash_key() {
  hash_key_bytes key{};
  std::size_t got = 0;
  while (got < key.size()) {
    const ssize_t n = getrandom(key.data() + got, key.size() - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (errno != EINTR) {
      // getrandom cannot fail on Linux 3.17+ once the pool is initialised; stop rather than run
      // with a predictable key.
      std::perror("getrandom");
      std::abort();
    }
  }
  return key;
}

result<hash_key_bytes> load_or_create_hash_key(const std::string& dir) {
  const std::string path = dir + "/" + hash_key_file_name;
  std::ifstream in(path);
  if (in) {
    std::string text;
    std::getline(in, text);
    hash_key_bytes key{};
    bool ok = text.size() == 32;
    for (std::size_t i = 0; ok && i < key.size(); ++i) {
      const int h = hex_value(text[2 * i]);
      const int l = hex_value(text[2 * i + 1]);
      ok = h >= 0 && l >= 0;
      key[i] = static_cast<std::uint8_t>(h * 16 + l);
    }
    if (!ok) {
      return error(errc::bad_format,
                   path +
                       ": the prefix cache's block-hash key must be 32 hex digits; the file is "
                       "damaged. Remove it and the cache files beside it (they cannot be "
                       "trusted without it), and start again: a new key is made");
    }
    return key;
  }
  if (errno != ENOENT) {
    return error(errc::io_error,
                 path + ": cannot read the prefix cache's block-hash key: " + std::strerror(errno));
  }
  const hash_key_bytes key = random_hash_key();
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return error(errc::io_error, temp + ": cannot write the prefix cache's block-hash key: " +
                                     std::strerror(errno));
  }
  const std::string text = key_hex(key) + "\n";
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  const int write_errno = errno;
  ::close(fd);
  // link() publishes the whole file or nothing, and fails if another process was first: then
  // its key is the deployment's.
  const bool linked = written && ::link(temp.c_str(), path.c_str()) == 0;
  const int err = written ? errno : write_errno;
  ::unlink(temp.c_str());
  if (!linked && written && err == EEXIST) return load_or_create_hash_key(dir);
  if (!linked) {
    return error(errc::io_error,
                 path + ": cannot write the prefix cache's block-hash key: " + std::strerror(err));
  }
  return key;
}

}  // namespace brigade::kvcache
