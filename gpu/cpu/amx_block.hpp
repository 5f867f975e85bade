// The AMX matmul kernel's body, written once over the tile operations it uses, so that the same
// loops run on the hardware (gemm_amx_bf16.cpp, tiles by intrinsics) and on the emulator of the
// tests (tests/gpu/amx_emulation_test.cpp, tiles by Intel's pseudo-code): a machine without AMX
// still tests the packing, the tiling and the edges. Private to gpu/cpu.
//
// Include it after a file's target pragma (it defines the functions that must carry the target)
// and after every header it needs: <algorithm>, <cstdint>, <cstring>, <vector>, gemm_kernels.hpp.
// Everything here is in an unnamed namespace: each file gets its own copies, so the AMX-targeted
// ones never stand in for the emulator's baseline ones at link time.
//
// The chain: tdpbf16ps adds, for each pair of k in order, the low half's product and then the high
// half's, each add rounded, denormals flushed (Intel SDM, TDPBF16PS). Pairs packed with the odd k
// in the low half therefore add exactly as vdpbf16ps does on the avx512_bf16 path (odd product,
// then even), so both paths give the same bits: one numerics class, bf16_dot. A product of two
// bf16 is exact in float32, so whether the hardware fuses the add does not change a bit.
#pragma once

namespace brigade::gpu::cpu::amx {
namespace {

constexpr int tile_rows = 16;   // rows of every tile used
constexpr int tile_pairs = 16;  // pairs of k in a row of an A tile: 64 bytes
constexpr int tile_k = 2 * tile_pairs;

// ldtilecfg's 64-byte operand, palette 1.
struct tile_config {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(tile_config) == 64, "ldtilecfg reads 64 bytes");

// Tiles 0-3 accumulate C (two row tiles by two panels), 4-5 hold A (activation pairs), 6-7 hold B
// (a panel's weight pairs). All 16 rows of 64 bytes.
inline tile_config make_tile_config() {
  tile_config cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = tile_rows;
  }
  return cfg;
}

// What one call keeps between its tiles. One per thread, grown, never shrunk.
struct scratch {
  std::vector<uint32_t> a;  // activation pairs: rows padded to whole tiles, `pairs` per row
  std::vector<uint32_t> b;  // weight pairs: per panel, per pair of k, 16 features
  alignas(64) float c[tile_rows * 16];
};

// Panel `panel` (k-major, 16 bf16 per k) as B tiles: word [p][n] = W[n][2p + 1] | W[n][2p] << 16,
// for the first `pairs` pairs of k.
inline void stage_weight_pairs(const uint16_t* panel, int pairs, uint32_t* out) {
  for (int p = 0; p < pairs; ++p) {
    const uint16_t* even = panel + static_cast<ptrdiff_t>(2 * p) * panel_width;
    const uint16_t* odd = even + panel_width;
    uint32_t* row = out + static_cast<ptrdiff_t>(p) * panel_width;
    for (int n = 0; n < panel_width; ++n)
      row[n] = static_cast<uint32_t>(odd[n]) | static_cast<uint32_t>(even[n]) << 16;
  }
}

// C tile `valid_rows` x `valid_cols` from scratch to y, the bias added when this is the chain's
// end (a separate rounded add, as on every path).
inline void write_tile(const scratch& s, float* y, int ldy, int valid_rows, int valid_cols,
                       const float* bias) {
  for (int r = 0; r < valid_rows; ++r) {
    float* out = y + static_cast<ptrdiff_t>(r) * ldy;
    const float* c = s.c + r * 16;
    for (int n = 0; n < valid_cols; ++n)
      out[n] = bias ? c[n] + bias[n] : c[n];
  }
}

// Tiles provides: configure(), release(), zero<T>(), load<T>(ptr, stride bytes),
// store<T>(ptr, stride bytes), dp<C, A, B>() (tdpbf16ps).
template <int C, class Tiles>
void write_c(Tiles& t, scratch& s, float* y, int ldy, int valid_rows, int valid_cols,
             const float* bias) {
  t.template store<C>(s.c, 16 * static_cast<int>(sizeof(float)));
  write_tile(s, y, ldy, valid_rows, valid_cols, bias);
}

// Rows [row_begin, row_end) of y, panels [panel_begin, panel_end), for the k that fill whole
// tiles; the rest of k continues on the avx512_bf16 kernel from what this leaves in y.
template <class Tiles>
void gemm_block(Tiles& t, scratch& s, const gemm_operands& op, int row_begin, int row_end,
                int panel_begin, int panel_end) {
  const packed_matrix& w = *op.w;
  const int k_total = w.cols();
  const int k_tiles = k_total / tile_k * tile_k;
  if (k_tiles == 0) {
    gemm_block_avx512_bf16_from(op, row_begin, row_end, panel_begin, panel_end, 0);
    return;
  }
  const int pairs = k_tiles / 2;
  const int rows = row_end - row_begin;
  const int row_tiles = (rows + tile_rows - 1) / tile_rows;
  const int panels = panel_end - panel_begin;

  // A: each row's pairs, then zero rows up to whole tiles (their results are never written).
  s.a.assign(static_cast<size_t>(row_tiles) * tile_rows * pairs, 0u);
  for (int r = 0; r < rows; ++r) {
    gemm_bf16_pairs_odd_low(op.x + static_cast<ptrdiff_t>(row_begin + r) * op.ldx, k_tiles,
                            s.a.data() + static_cast<ptrdiff_t>(r) * pairs);
  }
  // B: every panel of the block once, reused by every row tile.
  const size_t panel_words = static_cast<size_t>(pairs) * panel_width;
  s.b.resize(panel_words * static_cast<size_t>(panels));
  for (int q = 0; q < panels; ++q) {
    stage_weight_pairs(static_cast<const uint16_t*>(w.panel(panel_begin + q)), pairs,
                       s.b.data() + panel_words * static_cast<size_t>(q));
  }

  const bool chain_ends = k_tiles == k_total;
  const int a_stride = pairs * static_cast<int>(sizeof(uint32_t));
  constexpr int b_stride = panel_width * static_cast<int>(sizeof(uint32_t));
  t.configure();
  for (int rt = 0; rt < row_tiles; rt += 2) {
    const bool two_rows = rt + 1 < row_tiles;
    const uint32_t* a0 = s.a.data() + static_cast<ptrdiff_t>(rt) * tile_rows * pairs;
    const uint32_t* a1 = a0 + static_cast<ptrdiff_t>(tile_rows) * pairs;
    for (int q = 0; q < panels; q += 2) {
      const bool two_panels = q + 1 < panels;
      const uint32_t* b0 = s.b.data() + panel_words * static_cast<size_t>(q);
      const uint32_t* b1 = b0 + panel_words;
      t.template zero<0>();
      t.template zero<1>();
      t.template zero<2>();
      t.template zero<3>();
      for (int p = 0; p < pairs; p += tile_pairs) {
        t.template load<4>(a0 + p, a_stride);
        t.template load<6>(b0 + static_cast<ptrdiff_t>(p) * panel_width, b_stride);
        t.template dp<0, 4, 6>();
        if (two_panels) {
          t.template load<7>(b1 + static_cast<ptrdiff_t>(p) * panel_width, b_stride);
          t.template dp<1, 4, 7>();
        }
        if (two_rows) {
          t.template load<5>(a1 + p, a_stride);
          t.template dp<2, 5, 6>();
          if (two_panels) t.template dp<3, 5, 7>();
        }
      }
      // Out: the rows and columns that exist.
      const int r0 = row_begin + rt * tile_rows;
      for (int half = 0; half < (two_panels ? 2 : 1); ++half) {
        const int col = (panel_begin + q + half) * panel_width;
        const int cols = std::min(panel_width, w.rows() - col);
        const float* bias = chain_ends && op.bias ? op.bias + col : nullptr;
        float* y0 = op.y + static_cast<ptrdiff_t>(r0) * op.ldy + col;
        const int rows0 = std::min(tile_rows, row_end - r0);
        if (half == 0) {
          write_c<0>(t, s, y0, op.ldy, rows0, cols, bias);
        } else {
          write_c<1>(t, s, y0, op.ldy, rows0, cols, bias);
        }
        if (!two_rows) continue;
        float* y1 = y0 + static_cast<ptrdiff_t>(tile_rows) * op.ldy;
        const int rows1 = std::min(tile_rows, row_end - r0 - tile_rows);
        if (half == 0) {
          write_c<2>(t, s, y1, op.ldy, rows1, cols, bias);
        } else {
          write_c<3>(t, s, y1, op.ldy, rows1, cols, bias);
        }
      }
    }
  }
  t.release();
  if (!chain_ends) {
    gemm_block_avx512_bf16_from(op, row_begin, row_end, panel_begin, panel_end, k_tiles);
  }
}

}  // namespace
}  // namespace brigade::gpu::cpu::amx
