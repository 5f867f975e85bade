#include "gpu/cpu/amx_availability.hpp"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gpu/cpu/gemm_kernels.hpp"
#include "gpu/cpu/kernel_path.hpp"
#include "gpu/dtype.hpp"

namespace brigade::gpu::cpu {
namespace {

constexpr unsigned amx_bf16_bit = 1u << 22;  // CPUID.(7,0):EDX
constexpr unsigned amx_tile_bit = 1u << 24;
constexpr uint64_t xcr0_tile_state = (1ull << 17) | (1ull << 18);  // XTILECFG, XTILEDATA
constexpr int arch_req_xcomp_perm = 0x1023;
constexpr int xfeature_xtiledata = 18;

bool cpu_has_amx_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (d & amx_bf16_bit) && (d & amx_tile_bit);
}

bool os_saves_tile_state() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return false;
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const uint64_t xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
  return (xcr0 & xcr0_tile_state) == xcr0_tile_state;
}

// A product with whole tiles and a tail of k, rows over two tiles and a partial one, a partial
// last panel and a bias: every edge the kernel has. Values of a fixed generator, zeros and
// subnormals among them.
struct check_product {
  int m, n, k;
  std::vector<float> x, bias;
  std::unique_ptr<packed_matrix> w;

  check_product(int m_, int n_, int k_) : m(m_), n(n_), k(k_) {
    uint32_t state = 0x9e3779b9u ^ static_cast<uint32_t>(m * 131 + n * 17 + k);
    auto next = [&] {
      state = state * 1664525u + 1013904223u;
      const int kind = static_cast<int>(state >> 27);
      if (kind == 0) return 0.0f;
      const float v = static_cast<float>(static_cast<int32_t>(state)) * (1.0f / 2147483648.0f);
      return kind == 1 ? v * 1e-39f : v;
    };
    std::vector<uint16_t> bits(static_cast<size_t>(n) * k);
    for (auto& b : bits)
      b = f32_to_bf16(next());
    w = packed_matrix::pack({host_matrix{bits.data(), dtype::bf16, n, k}});
    x.resize(static_cast<size_t>(m) * k);
    for (auto& v : x)
      v = next();
    bias.resize(static_cast<size_t>(n));
    for (auto& v : bias)
      v = next();
  }

  std::vector<float> run(gemm_block_fn kernel) const {
    std::vector<float> y(static_cast<size_t>(m) * n, 0.0f);
    const gemm_operands op{x.data(), k, w.get(), bias.data(), y.data(), n};
    kernel(op, 0, m, 0, w->panels());
    return y;
  }
};

std::string tiles_agree() {
  for (const auto& [m, n, k] : {std::array<int, 3>{1, 40, 96}, std::array<int, 3>{37, 72, 112}}) {
    const check_product p(m, n, k);
    const std::vector<float> tiles = p.run(gemm_block_amx_bf16);
    const std::vector<float> vectors = p.run(gemm_block_avx512_bf16);
    for (size_t i = 0; i < tiles.size(); ++i) {
      if (std::memcmp(&tiles[i], &vectors[i], sizeof(float)) != 0) {
        return "the AMX tiles did not give the avx512_bf16 path's bits on a check product (" +
               std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k) +
               ", element " + std::to_string(i) + ": " + std::to_string(tiles[i]) + " against " +
               std::to_string(vectors[i]) + ")";
      }
    }
  }
  return {};
}

amx_status probe(bool avx512_bf16) {
  if (!cpu_has_amx_bf16()) return {false, "this CPU has no AMX-BF16 tiles"};
  if (!avx512_bf16) return {false, "this CPU has AMX but not AVX512-BF16, which the path uses too"};
  if (!os_saves_tile_state()) {
    return {false, "the operating system does not enable AMX tile state (XCR0)"};
  }
  if (syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) != 0) {
    return {false, std::string("Linux refused this process AMX tile state (arch_prctl "
                               "ARCH_REQ_XCOMP_PERM: ") +
                       std::strerror(errno) + "; Linux 5.16 or later grants it)"};
  }
  std::string disagreement = tiles_agree();
  if (!disagreement.empty()) return {false, std::move(disagreement)};
  return {true, {}};
}

}  // namespace

const amx_status& amx_process_status() {
  static const amx_status status = probe(kernel_path_available(kernel_path::avx512_bf16));
  return status;
}

}  // namespace brigade::gpu::cpu
