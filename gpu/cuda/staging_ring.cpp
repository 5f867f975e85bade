#include "gpu/cuda/staging_ring.hpp"

#include <algorithm>
#include <cstring>

#include "gpu/cuda/check.hpp"

namespace brigade::gpu::cuda {
namespace {

// Slices start on 256-byte boundaries, the alignment cudaMalloc gives.
constexpr size_t slice_alignment = 256;

size_t round_up(size_t bytes) {
  return (std::max<size_t>(bytes, 1) + slice_alignment - 1) / slice_alignment * slice_alignment;
}

}  // namespace

staging_ring::staging_ring(cudaStream_t stream, size_t capacity_bytes) : stream_(stream) {
  grow(capacity_bytes);
}

staging_ring::~staging_ring() {
  // The owner synchronises its stream before destroying the ring.
  cudaFreeHost(host_);
  cudaFree(device_);
}

void staging_ring::grow(size_t bytes) {
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (staging ring grow)");
  cudaFreeHost(host_);
  cudaFree(device_);
  host_ = nullptr;
  device_ = nullptr;
  capacity_ = round_up(bytes);
  check(cudaMallocHost(&host_, capacity_), "cudaMallocHost (staging ring)");
  check(cudaMalloc(&device_, capacity_), "cudaMalloc (staging ring)");
  used_ = 0;
  ++generation_;
}

size_t staging_ring::slice(size_t bytes) {
  const size_t rounded = round_up(bytes);
  if (rounded > capacity_) {
    grow(std::max(rounded, 2 * capacity_));
  } else if (used_ + rounded > capacity_) {
    // Every earlier slice may still be read by queued work: wait for it, then start over.
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (staging ring wrap)");
    used_ = 0;
    ++generation_;
  }
  const size_t at = used_;
  used_ += rounded;
  return at;
}

const void* staging_ring::upload(const void* host, size_t bytes) {
  if (const void* hit = find_recent(host, bytes)) return hit;
  const size_t at = slice(bytes);
  if (bytes > 0) {
    std::memcpy(host_ + at, host, bytes);
    check(cudaMemcpyAsync(device_ + at, host_ + at, bytes, cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync (staging upload)");
  }
  remember(host, bytes, device_ + at);
  return device_ + at;
}

const void* staging_ring::find_recent(const void* host, size_t bytes) const {
  if (bytes == 0 || bytes > max_remembered_bytes) return nullptr;
  for (const recent& r : recent_) {
    if (r.generation == generation_ && r.content.size() == bytes &&
        std::memcmp(r.content.data(), host, bytes) == 0) {
      return r.device;
    }
  }
  return nullptr;
}

void staging_ring::remember(const void* host, size_t bytes, const void* device) {
  if (bytes == 0 || bytes > max_remembered_bytes) return;
  recent& r = recent_[next_recent_];
  next_recent_ = (next_recent_ + 1) % recent_.size();
  const auto* p = static_cast<const unsigned char*>(host);
  r.content.assign(p, p + bytes);
  r.device = device;
  r.generation = generation_;
}

}  // namespace brigade::gpu::cuda
