// The AMX matmul kernel: bf16 weights by tdpbf16ps, 16 rows by 16 features by 32 k an
// instruction. The loops are amx_block.hpp's (shared with the emulator of the tests); this file
// gives them the tile instructions. Same chain, same bits as the avx512_bf16 path (amx_block.hpp
// says why), which amx_availability.cpp checks on the CPU itself before the path is offered.
// f32 and f16 weights run the exact avx512 kernel, as on avx512_bf16.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gpu/cpu/gemm_kernels.hpp"

// As in gemm_avx512.cpp: the target applies to the functions defined below only, after every
// header, so no inline function of a header is compiled for AMX or AVX-512.
#if defined(__clang__)
#pragma clang attribute push(                                                          \
    __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")
#endif

#include "gpu/cpu/amx_block.hpp"

namespace brigade::gpu::cpu {
namespace {

// The tile registers, by intrinsics. GCC's spell the tile number into their assembly text, so
// each needs a literal: hence one branch per tile that amx_block.hpp uses.
struct hardware_tiles {
  void configure() {
    static const amx::tile_config config = amx::make_tile_config();
    _tile_loadconfig(&config);
  }
  void release() { _tile_release(); }
  template <int T>
  void zero() {
    static_assert(T >= 0 && T <= 3, "C tiles are 0-3");
    if constexpr (T == 0) _tile_zero(0);
    if constexpr (T == 1) _tile_zero(1);
    if constexpr (T == 2) _tile_zero(2);
    if constexpr (T == 3) _tile_zero(3);
  }
  template <int T>
  void load(const void* from, int stride) {
    static_assert(T >= 4 && T <= 7, "A and B tiles are 4-7");
    if constexpr (T == 4) _tile_loadd(4, from, stride);
    if constexpr (T == 5) _tile_loadd(5, from, stride);
    if constexpr (T == 6) _tile_loadd(6, from, stride);
    if constexpr (T == 7) _tile_loadd(7, from, stride);
  }
  template <int T>
  void store(void* to, int stride) {
    static_assert(T >= 0 && T <= 3, "C tiles are 0-3");
    if constexpr (T == 0) _tile_stored(0, to, stride);
    if constexpr (T == 1) _tile_stored(1, to, stride);
    if constexpr (T == 2) _tile_stored(2, to, stride);
    if constexpr (T == 3) _tile_stored(3, to, stride);
  }
  // C tile c = 2 x (A tile - 4) + (B tile - 6): the four products of two row tiles by two panels.
  template <int C, int A, int B>
  void dp() {
    static_assert(C == 2 * (A - 4) + (B - 6), "the kernel's tile assignment");
    if constexpr (C == 0) _tile_dpbf16ps(0, 4, 6);
    if constexpr (C == 1) _tile_dpbf16ps(1, 4, 7);
    if constexpr (C == 2) _tile_dpbf16ps(2, 5, 6);
    if constexpr (C == 3) _tile_dpbf16ps(3, 5, 7);
  }
};

}  // namespace

void gemm_block_amx_bf16(const gemm_operands& op, int row_begin, int row_end, int panel_begin,
                         int panel_end) {
  if (op.w->type() != dtype::bf16) {
    gemm_block_avx512(op, row_begin, row_end, panel_begin, panel_end);
    return;
  }
  thread_local amx::scratch scratch;
  hardware_tiles tiles;
  amx::gemm_block(tiles, scratch, op, row_begin, row_end, panel_begin, panel_end);
}

}  // namespace brigade::gpu::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
