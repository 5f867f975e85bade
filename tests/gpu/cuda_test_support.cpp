#include "tests/gpu/cuda_test_support.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

namespace brigade::gpu::test {

std::unique_ptr<backend> cuda_or_skip(int device) {
  const device_report report = probe_cuda();
  if (report.devices.empty()) {
    WARN("no CUDA device: " << report.reason);
    return nullptr;
  }
  auto dev = make_cuda_backend(device);
  INFO(report.describe() << ": " << (dev.ok() ? std::string("ok") : dev.err().describe()));
  REQUIRE(dev.ok());
  return std::move(dev.value());
}

std::vector<std::unique_ptr<backend>> all_cuda_or_skip() {
  const device_report report = probe_cuda();
  std::vector<std::unique_ptr<backend>> out;
  if (report.devices.empty()) {
    WARN("no CUDA device: " << report.reason);
    return out;
  }
  for (const device_info& d : report.devices) {
    auto dev = make_cuda_backend(d.index);
    INFO(report.describe() << ": " << (dev.ok() ? std::string("ok") : dev.err().describe()));
    REQUIRE(dev.ok());
    out.push_back(std::move(dev.value()));
  }
  return out;
}

std::vector<float> random_floats(std::mt19937& rng, size_t count, float low, float high) {
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> v(count);
  for (float& x : v)
    x = dist(rng);
  return v;
}

activation to_device(backend& dev, const std::vector<float>& host, int rows, int cols) {
  REQUIRE(host.size() == static_cast<size_t>(rows) * static_cast<size_t>(cols));
  activation a = dev.alloc(rows, cols);
  dev.upload(host.data(), a.view());
  return a;
}

std::vector<float> to_host(backend& dev, const tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.rows) * static_cast<size_t>(t.cols));
  dev.download(t, out.data());
  return out;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  float worst = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    const float d = std::fabs(a[i] - b[i]);
    // std::max would drop a NaN; a NaN is as far off as a result can be.
    if (std::isnan(d)) return INFINITY;
    worst = std::max(worst, d);
  }
  return worst;
}

random_weights make_weights(std::mt19937& rng, dtype type, int rows, int cols) {
  const size_t count = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  const std::vector<float> values = random_floats(rng, count, -0.5f, 0.5f);
  random_weights w;
  w.bytes.resize(count * dtype_size(type));
  for (size_t i = 0; i < count; ++i) {
    if (type == dtype::f32) {
      std::memcpy(w.bytes.data() + 4 * i, &values[i], 4);
    } else {
      const uint16_t bits = type == dtype::bf16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
      std::memcpy(w.bytes.data() + 2 * i, &bits, 2);
    }
  }
  w.widened.resize(count);
  to_f32(type, w.bytes.data(), w.widened.data(), count);
  w.view = host_matrix{w.bytes.data(), type, rows, cols};
  return w;
}

}  // namespace brigade::gpu::test
