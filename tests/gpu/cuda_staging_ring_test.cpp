// The staging ring on a real stream, with a capacity small enough that uploads wrap around it
// and outgrow it. The stream is held back by a host function at the start, so every copy is
// still queued when later uploads reuse the ring: a slice reused before its copy ran, or a
// remembered upload served from an older generation, reads back as the wrong bytes.
#include <cuda_runtime.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "gpu/cuda/staging_ring.hpp"
#include "tests/gpu/cuda_test_support.hpp"

using namespace brigade::gpu;

namespace {

void hold_stream(void*) {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

}  // namespace

TEST_CASE("cuda staging ring uploads survive wrapping and growing", "[cuda]") {
  BRIGADE_CUDA_DEVICE_OR_SKIP(dev);  // also makes the device current for this thread
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> sent;
  for (int i = 0; i < 80; ++i) {
    if (i > 0 && rng() % 4 == 0) {
      sent.push_back(sent.back());  // the same content again: the ring may serve its old copy
      continue;
    }
    // 4 to 800 bytes against a ring of 256: most uploads wrap it, some make it grow.
    std::vector<int32_t> v(1 + rng() % 200);
    for (size_t k = 0; k < v.size(); ++k)
      v[k] = i * 1000 + static_cast<int32_t>(k);
    sent.push_back(v);
  }
  size_t total = 0;
  for (const auto& v : sent)
    total += v.size();
  int32_t* back = nullptr;
  REQUIRE(cudaMallocHost(&back, total * sizeof(int32_t)) == cudaSuccess);
  {
    cuda::staging_ring ring(stream, 256);
    REQUIRE(cudaLaunchHostFunc(stream, hold_stream, nullptr) == cudaSuccess);
    size_t at = 0;
    for (const auto& v : sent) {
      const int32_t* d = ring.upload_array(v.data(), v.size());
      REQUIRE(cudaMemcpyAsync(back + at, d, v.size() * sizeof(int32_t), cudaMemcpyDeviceToHost,
                              stream) == cudaSuccess);
      at += v.size();
    }
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  }
  size_t at = 0;
  for (size_t i = 0; i < sent.size(); ++i) {
    INFO("upload " << i << " of " << sent[i].size() << " values");
    CHECK(std::memcmp(back + at, sent[i].data(), sent[i].size() * sizeof(int32_t)) == 0);
    at += sent[i].size();
  }
  cudaFreeHost(back);
  cudaStreamDestroy(stream);
}
