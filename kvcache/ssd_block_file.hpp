// The file format of one block in the SSD tier, and the system calls that write and read it.
//
// A block file is an 80-byte little-endian header, the model fingerprint text, then the payload:
//
//   offset  size  field
//        0     8  magic "BRGKVBLK"
//        8     4  format version (2; version 1 held 64-bit unkeyed hashes)
//       12     4  fingerprint characters F (at most 4096)
//       16     8  model digest (model_fingerprint::digest)
//       24    16  block chain hash (hi, then lo)
//       40     8  payload bytes P
//       48     8  written at (ns since the epoch)
//       56     8  key id: block_hasher::key_id() of the key that named the block
//       64     8  reserved, zero
//       72     8  checksum: XXH3-64 of bytes [0, 72), then the F + P bytes that follow the header
//       80     F  fingerprint text
//     80+F     P  payload
//
// A file is written under a temporary name, flushed with fsync, given its last-use time as its
// modification time, and only then renamed into place; a crash or a full disk leaves at most a
// temporary file, which the tier deletes when it opens. Reads check the length, the header and
// the checksum before returning a byte, so a torn or damaged file is reported, never served.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "kvcache/block_payload.hpp"
#include "kvcache/clock.hpp"

namespace brigade::kvcache::ssd_block_file {

inline constexpr char magic[8] = {'B', 'R', 'G', 'K', 'V', 'B', 'L', 'K'};
inline constexpr std::uint32_t format_version = 2;
inline constexpr std::size_t header_bytes = 80;
inline constexpr std::size_t max_fingerprint_chars = 4096;

/// The size of the file that holds `payload`.
std::uint64_t file_bytes(const block_payload& payload);

/// Writes `payload` to `temp_path`, flushes it, sets its modification time to `last_use_ns` and
/// renames it to `final_path`. On failure nothing is left at either path (a file already at
/// `final_path` stays as it was) and the error is resource_exhausted when the disk or quota is
/// full (ENOSPC, EDQUOT, EFBIG), io_error otherwise. With `drop_page_cache` the written pages are
/// dropped from the page cache (posix_fadvise DONTNEED): the block was just evicted from host
/// memory, and keeping a second copy there would undo the host budget.
status write(const std::string& temp_path, const std::string& final_path,
             const block_payload& payload, std::uint64_t key_id, time_ns last_use_ns,
             bool drop_page_cache);

/// Reads and verifies the block file at `path`, which must hold block `hash` of `model`, named
/// under the key `key_id` names. Errors:
/// not_found when the file is gone, bad_format when its length, header, fingerprint, hash or
/// checksum is wrong (the message says which), io_error when the read itself failed.
result<payload_ptr> read(const std::string& path, const model_fingerprint& model,
                         const block_hash& hash, std::uint64_t key_id, bool drop_page_cache);

/// Sets the file's modification time, which records the block's last use across restarts.
status set_last_use(const std::string& path, time_ns last_use_ns);

/// Whether `err_no` means the disk or the quota is full.
bool is_disk_full(int err_no);

}  // namespace brigade::kvcache::ssd_block_file
