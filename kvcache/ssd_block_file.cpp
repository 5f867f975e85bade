#include "kvcache/ssd_block_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "kvcache/disk_faults.hpp"

namespace brigade::kvcache::ssd_block_file {

namespace {

constexpr std::size_t checksum_offset = 72;

void put_u32(std::uint8_t* at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i)
    at[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void put_u64(std::uint8_t* at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i)
    at[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint32_t get_u32(const std::uint8_t* at) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<std::uint32_t>(at[i]) << (8 * i);
  return v;
}
std::uint64_t get_u64(const std::uint8_t* at) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<std::uint64_t>(at[i]) << (8 * i);
  return v;
}

struct state_deleter {
  void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
};

/// XXH3-64 of the header's first 72 bytes, then `fingerprint` and `payload`.
std::uint64_t checksum(const std::uint8_t* header, const std::string& fingerprint,
                       const std::uint8_t* payload, std::size_t payload_bytes) {
  std::unique_ptr<XXH3_state_t, state_deleter> state(XXH3_createState());
  XXH3_64bits_reset(state.get());
  XXH3_64bits_update(state.get(), header, checksum_offset);
  XXH3_64bits_update(state.get(), fingerprint.data(), fingerprint.size());
  XXH3_64bits_update(state.get(), payload, payload_bytes);
  return XXH3_64bits_digest(state.get());
}

/// Closes a descriptor when it goes out of scope.
class fd_guard {
 public:
  explicit fd_guard(int fd) : fd_(fd) {}
  ~fd_guard() {
    if (fd_ >= 0) ::close(fd_);
  }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  int get() const { return fd_; }
  /// Closes now and reports close's error, which on some file systems is the write's.
  int close_now() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

/// 0, or the errno of the failed write.
int write_fully(int fd, const std::uint8_t* data, std::size_t bytes) {
  while (bytes > 0) {
    const ssize_t n = ::write(fd, data, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return 0;
}

/// 0, the errno of the failed read, or -1 when the file ended first.
int read_fully(int fd, std::uint8_t* data, std::size_t bytes, off_t offset) {
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, data, bytes, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return -1;
    data += n;
    bytes -= static_cast<std::size_t>(n);
    offset += n;
  }
  return 0;
}

error write_error(const std::string& what, const std::string& path, int err_no) {
  if (is_disk_full(err_no)) {
    return error(errc::resource_exhausted, what + " " + path + ": " + std::strerror(err_no) +
                                               " (the SSD tier's disk or quota is full)");
  }
  return error(errc::io_error, what + " " + path + ": " + std::strerror(err_no));
}

timespec to_timespec(time_ns t) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(t / 1000000000);
  ts.tv_nsec = static_cast<long>(t % 1000000000);
  if (ts.tv_nsec < 0) {
    ts.tv_nsec += 1000000000;
    ts.tv_sec -= 1;
  }
  return ts;
}

status write_temp(int fd, const std::string& temp_path, const block_payload& payload,
                  std::uint64_t key_id, time_ns last_use_ns, bool drop_page_cache) {
  const std::string& fingerprint = payload.model().text();
  std::vector<std::uint8_t> head(header_bytes + fingerprint.size(), 0);
  std::memcpy(head.data(), magic, sizeof magic);
  put_u32(head.data() + 8, format_version);
  put_u32(head.data() + 12, static_cast<std::uint32_t>(fingerprint.size()));
  put_u64(head.data() + 16, payload.model().digest());
  put_u64(head.data() + 24, payload.hash().hi);
  put_u64(head.data() + 32, payload.hash().lo);
  put_u64(head.data() + 40, payload.size_bytes());
  put_u64(head.data() + 48, static_cast<std::uint64_t>(last_use_ns));
  put_u64(head.data() + 56, key_id);
  put_u64(head.data() + checksum_offset,
          checksum(head.data(), fingerprint, payload.bytes().data(), payload.size_bytes()));
  std::memcpy(head.data() + header_bytes, fingerprint.data(), fingerprint.size());
  int err_no = write_fully(fd, head.data(), head.size());
  if (err_no == 0) err_no = write_fully(fd, payload.bytes().data(), payload.size_bytes());
  if (err_no != 0) return write_error("cannot write", temp_path, err_no);
  if (::fsync(fd) != 0) return write_error("cannot flush", temp_path, errno);
  const timespec times[2] = {to_timespec(last_use_ns), to_timespec(last_use_ns)};
  if (::futimens(fd, times) != 0) return write_error("cannot set the time of", temp_path, errno);
  if (drop_page_cache) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  return ok_status();
}

}  // namespace

bool is_disk_full(int err_no) {
  return err_no == ENOSPC || err_no == EDQUOT || err_no == EFBIG;
}

std::uint64_t file_bytes(const block_payload& payload) {
  return header_bytes + payload.model().text().size() + payload.size_bytes();
}

status write(const std::string& temp_path, const std::string& final_path,
             const block_payload& payload, std::uint64_t key_id, time_ns last_use_ns,
             bool drop_page_cache) {
  if (disk_faults::armed()) {
    const disk_fault_action fault = disk_faults::current();
    if (fault.slow_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(fault.slow_ms));
    if (fault.full) {
      return error(errc::resource_exhausted,
                   "cannot write " + temp_path + ": No space left on device (a disk fault point)");
    }
  }
  if (payload.model().text().size() > max_fingerprint_chars) {
    return error(errc::invalid_argument, "model fingerprint of " +
                                             std::to_string(payload.model().text().size()) +
                                             " characters is too long for a block file");
  }
  fd_guard fd(::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return write_error("cannot create", temp_path, errno);
  status written = write_temp(fd.get(), temp_path, payload, key_id, last_use_ns, drop_page_cache);
  if (written.ok()) {
    const int err_no = fd.close_now();
    if (err_no != 0) written = write_error("cannot close", temp_path, err_no);
  }
  if (written.ok() && ::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    written = write_error("cannot rename into place", final_path, errno);
  }
  if (!written.ok()) ::unlink(temp_path.c_str());
  return written;
}

namespace {

/// Checks the fixed header against the file's length and the block the caller asked for.
status check_header(const std::uint8_t* head, std::uint64_t file_size,
                    const model_fingerprint& model, const block_hash& hash, std::uint64_t key_id,
                    const std::string& path) {
  auto bad = [&](const std::string& why) { return error(errc::bad_format, path + ": " + why); };
  if (std::memcmp(head, magic, sizeof magic) != 0) return bad("not a brigade KV block file");
  if (get_u32(head + 8) != format_version) {
    return bad("format version " + std::to_string(get_u32(head + 8)) + ", expected " +
               std::to_string(format_version));
  }
  const std::uint64_t fingerprint_chars = get_u32(head + 12);
  const std::uint64_t payload_bytes = get_u64(head + 40);
  // The caller checked file_size >= header_bytes; these comparisons cannot overflow.
  if (fingerprint_chars > max_fingerprint_chars || fingerprint_chars > file_size - header_bytes ||
      payload_bytes != file_size - header_bytes - fingerprint_chars) {
    return bad("length " + std::to_string(file_size) + " does not match its header (a torn write)");
  }
  if (get_u64(head + 16) != model.digest() || fingerprint_chars != model.text().size() ||
      payload_bytes != model.block_bytes()) {
    return bad("holds a block of another model or layout, not of " + model.text());
  }
  if (get_u64(head + 56) != key_id) {
    return bad("was written under another block-hash key (another deployment's cache)");
  }
  if (get_u64(head + 24) != hash.hi || get_u64(head + 32) != hash.lo) {
    return bad("holds another block than its name says");
  }
  return ok_status();
}

}  // namespace

result<payload_ptr> read(const std::string& path, const model_fingerprint& model,
                         const block_hash& hash, std::uint64_t key_id, bool drop_page_cache) {
  if (disk_faults::armed()) {
    const std::uint32_t slow_ms = disk_faults::current().slow_ms;
    if (slow_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
  }
  fd_guard fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err_no = errno;
    return error(err_no == ENOENT ? errc::not_found : errc::io_error,
                 "cannot open " + path + ": " + std::strerror(err_no));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return error(errc::io_error, "cannot stat " + path + ": " + std::strerror(errno));
  }
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  std::uint8_t head[header_bytes];
  if (file_size < header_bytes) {
    return error(errc::bad_format, path + ": " + std::to_string(file_size) +
                                       " bytes, shorter than a block header (a torn write)");
  }
  int err_no = read_fully(fd.get(), head, header_bytes, 0);
  if (err_no == 0) {
    status header_ok = check_header(head, file_size, model, hash, key_id, path);
    if (!header_ok.ok()) return header_ok.err();
  }
  std::string fingerprint(model.text().size(), '\0');
  std::vector<std::uint8_t> bytes(model.block_bytes());
  if (err_no == 0) {
    err_no = read_fully(fd.get(), reinterpret_cast<std::uint8_t*>(fingerprint.data()),
                        fingerprint.size(), header_bytes);
  }
  if (err_no == 0) {
    err_no = read_fully(fd.get(), bytes.data(), bytes.size(),
                        static_cast<off_t>(header_bytes + fingerprint.size()));
  }
  if (err_no == -1) return error(errc::bad_format, path + ": ended early (a torn write)");
  if (err_no != 0)
    return error(errc::io_error, "cannot read " + path + ": " + std::strerror(err_no));
  if (drop_page_cache) ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  if (fingerprint != model.text()) {
    return error(errc::bad_format,
                 path + ": holds a block of another model, not of " + model.text());
  }
  if (checksum(head, fingerprint, bytes.data(), bytes.size()) != get_u64(head + checksum_offset)) {
    return error(errc::bad_format, path + ": checksum mismatch (the file is damaged)");
  }
  return block_payload::make(model, hash, std::move(bytes));
}

status set_last_use(const std::string& path, time_ns last_use_ns) {
  const timespec times[2] = {to_timespec(last_use_ns), to_timespec(last_use_ns)};
  if (::utimensat(AT_FDCWD, path.c_str(), times, 0) != 0) {
    const int err_no = errno;
    return error(err_no == ENOENT ? errc::not_found : errc::io_error,
                 "cannot set the time of " + path + ": " + std::strerror(err_no));
  }
  return ok_status();
}

}  // namespace brigade::kvcache::ssd_block_file
