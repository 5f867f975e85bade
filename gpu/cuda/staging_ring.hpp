// Host-to-device copies of per-call metadata (positions, block tables, row ids, weights).
//
// Each upload takes the next slice of a pinned host buffer and the matching slice of a device
// buffer, and queues an asynchronous copy on the backend's stream. Slices are never reused
// while work may still read them: when the ring is full it waits for the stream once and starts
// over (a new generation). Recent uploads are remembered by content, so the same block tables
// sent once per layer are copied once per step.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace brigade::gpu::cuda {

class staging_ring {
 public:
  /// `capacity_bytes` is the initial size; it grows (after a wait) to fit the largest upload.
  staging_ring(cudaStream_t stream, size_t capacity_bytes);
  ~staging_ring();
  staging_ring(const staging_ring&) = delete;
  staging_ring& operator=(const staging_ring&) = delete;

  /// Device copy of `bytes` bytes at `host`, valid for work queued on the stream from now on.
  const void* upload(const void* host, size_t bytes);

  template <class T>
  const T* upload_array(const T* host, size_t count) {
    return static_cast<const T*>(upload(host, sizeof(T) * count));
  }

 private:
  // A previous upload whose device copy is still valid in this generation.
  struct recent {
    std::vector<unsigned char> content;
    const void* device = nullptr;
    uint64_t generation = 0;
  };

  /// Offset of a fresh slice of `bytes` bytes in both buffers.
  size_t slice(size_t bytes);
  void grow(size_t bytes);
  const void* find_recent(const void* host, size_t bytes) const;
  void remember(const void* host, size_t bytes, const void* device);

  // Uploads larger than this are not remembered: comparing them would cost more than copying.
  static constexpr size_t max_remembered_bytes = 64 * 1024;

  cudaStream_t stream_;
  unsigned char* host_ = nullptr;
  unsigned char* device_ = nullptr;
  size_t capacity_ = 0;
  size_t used_ = 0;
  uint64_t generation_ = 1;
  std::array<recent, 4> recent_;
  size_t next_recent_ = 0;
};

}  // namespace brigade::gpu::cuda
