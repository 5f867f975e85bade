// The AMX kernel's loops (gpu/cpu/amx_block.hpp) on emulated tiles: each tile instruction done
// as Intel's pseudo-code for it says (SDM, LDTILECFG, TILELOADD, TILESTORED, TILEZERO,
// TDPBF16PS), so a machine without AMX tests the pair packing, the tiling, the row and column
// edges and the hand-over of the last k to the avx512_bf16 kernel. The outputs must be the
// bf16_dot chain's bits (bf16_pair_chain.hpp), which the hardware path is checked against on the
// CPU itself before it is offered (amx_availability.cpp). The AVX512-BF16 parts the kernel shares
// with the avx512_bf16 path run for real, so every case skips, saying why, without AVX512-BF16.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "bf16_pair_chain.hpp"
#include "engine_on_path.hpp"
#include "gemm_problem.hpp"
#include "gpu/cpu/amx_availability.hpp"
#include "gpu/cpu/gemm_kernels.hpp"
#include "gpu/cpu/kernel_path.hpp"
#include "model/model_writer.hpp"
#include "support/small_model_spec.hpp"
#include "support/temp_dir.hpp"
// After every header it needs, as amx_block.hpp asks.
#include "gpu/cpu/amx_block.hpp"

using namespace brigade;
using gpu::cpu::kernel_path;
using testing::problem;

namespace {

bool have_bf16_dot() {
  if (gpu::cpu::kernel_path_available(kernel_path::avx512_bf16)) return true;
  WARN("skipped: this CPU lacks AVX512-BF16, which the AMX kernel uses beside its tiles");
  return false;
}

// Eight tile registers of up to 16 rows of 64 bytes, and the instructions the kernel uses.
struct emulated_tiles {
  struct tile {
    int rows = 0;
    int colsb = 0;
    uint8_t bytes[16][64] = {};
  };
  tile t[8];
  bool configured = false;
  int products = 0;  // tdpbf16ps executed

  void configure() {
    const gpu::cpu::amx::tile_config cfg = gpu::cpu::amx::make_tile_config();
    REQUIRE(cfg.palette == 1);
    for (int i = 0; i < 8; ++i) {
      REQUIRE(cfg.rows[i] <= 16);
      REQUIRE(cfg.colsb[i] <= 64);
      t[i] = tile{};  // ldtilecfg zeroes every tile
      t[i].rows = cfg.rows[i];
      t[i].colsb = cfg.colsb[i];
    }
    configured = true;
  }
  void release() {
    for (auto& x : t)
      x = tile{};
    configured = false;
  }
  template <int T>
  void zero() {
    REQUIRE(configured);
    std::memset(t[T].bytes, 0, sizeof t[T].bytes);
  }
  template <int T>
  void load(const void* from, int stride) {
    REQUIRE(configured);
    for (int r = 0; r < t[T].rows; ++r)
      std::memcpy(t[T].bytes[r], static_cast<const uint8_t*>(from) + ptrdiff_t{r} * stride,
                  static_cast<size_t>(t[T].colsb));
  }
  template <int T>
  void store(void* to, int stride) {
    REQUIRE(configured);
    for (int r = 0; r < t[T].rows; ++r)
      std::memcpy(static_cast<uint8_t*>(to) + ptrdiff_t{r} * stride, t[T].bytes[r],
                  static_cast<size_t>(t[T].colsb));
  }
  static float bf16_at(const uint8_t* row, int i) {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    return testing::flush(gpu::bf16_to_f32(h));  // DAZ
  }
  // tmp.fp32[n] += a.bf16[2k] * b.bf16[2n]; tmp.fp32[n] += a.bf16[2k + 1] * b.bf16[2n + 1]:
  // low halves first, each add rounded to nearest even, denormals flushed.
  template <int C, int A, int B>
  void dp() {
    REQUIRE(configured);
    tile &c = t[C], &a = t[A], &b = t[B];
    REQUIRE(a.colsb / 4 == b.rows);
    REQUIRE(c.colsb == b.colsb);
    REQUIRE(c.rows == a.rows);
    ++products;
    for (int m = 0; m < c.rows; ++m) {
      float acc[16];
      std::memcpy(acc, c.bytes[m], sizeof acc);
      for (int k = 0; k < a.colsb / 4; ++k) {
        for (int n = 0; n < c.colsb / 4; ++n) {
          using testing::flush;
          acc[n] = flush(acc[n] + flush(bf16_at(a.bytes[m], 2 * k) * bf16_at(b.bytes[k], 2 * n)));
          acc[n] = flush(acc[n] +
                         flush(bf16_at(a.bytes[m], 2 * k + 1) * bf16_at(b.bytes[k], 2 * n + 1)));
        }
      }
      std::memcpy(c.bytes[m], acc, sizeof acc);
    }
  }
};

// y as gemm() would split it (rows in blocks of 72, panels in groups of 4) on emulated tiles.
std::vector<float> run_emulated(const problem& p, int* products = nullptr) {
  std::vector<float> y(static_cast<size_t>(p.m) * p.ldy, std::nanf(""));
  const gpu::cpu::gemm_operands op{
      p.x.data(), p.ldx, p.w.get(), p.bias.empty() ? nullptr : p.bias.data(), y.data(), p.ldy};
  emulated_tiles tiles;
  gpu::cpu::amx::scratch scratch;
  const int panels = p.w->panels();
  for (int r = 0; r < p.m; r += 72) {
    for (int q = 0; q < panels; q += 4)
      gpu::cpu::amx::gemm_block(tiles, scratch, op, r, std::min(p.m, r + 72), q,
                                std::min(panels, q + 4));
  }
  CHECK_FALSE(tiles.configured);  // every block released its tiles
  if (products) *products = tiles.products;
  return y;
}

void require_chain_bits(const problem& p, const std::vector<float>& y) {
  const std::vector<float> reference = testing::pair_chain(p);
  for (int r = 0; r < p.m; ++r) {
    INFO("row " << r);
    REQUIRE(testing::same_row(y, r, reference, r, p));
  }
}

}  // namespace

TEST_CASE("AMX tiles give the bf16_dot chain's bits at every edge of the tiling",
          "[kernel_path][amx]") {
  if (!have_bf16_dot()) return;
  std::mt19937 rng(7001);
  // Rows: one, a tile less one, a tile, a tile and one, two pairs of tiles and past a block of 72.
  // Features: a panel, a partial one, a pair, an odd panel count and past a group of four.
  // k: one tile, several, a tail of k for the avx512_bf16 kernel, and less than a tile.
  for (int m : {1, 15, 16, 17, 33, 64, 75}) {
    for (int n : {16, 23, 32, 40, 72, 100}) {
      for (int k : {32, 96, 256, 100, 31, 2}) {
        const problem p =
            testing::make_problem(rng, gpu::dtype::bf16, m, n, k, static_cast<int>(rng() % 3),
                                  static_cast<int>(rng() % 3), rng() % 2 != 0);
        INFO(p.describe());
        int products = 0;
        const std::vector<float> y = run_emulated(p, &products);
        require_chain_bits(p, y);
        // The tiles did the whole k that fills them: a tile product per 32 k, row tile and panel.
        const int row_tiles_per_block = [&] {
          int tiles = 0;
          for (int r = 0; r < m; r += 72)
            tiles += (std::min(m, r + 72) - r + 15) / 16;
          return tiles;
        }();
        CHECK(products == (k / 32) * row_tiles_per_block * p.w->panels());
      }
    }
  }
}

TEST_CASE("AMX tiles give the bf16_dot chain's bits on random products", "[kernel_path][amx]") {
  if (!have_bf16_dot()) return;
  const uint32_t seed = 7013;
  std::mt19937 rng(seed);
  int tried = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const problem p = testing::random_problem(rng);
    if (p.type != gpu::dtype::bf16) continue;  // f32 and f16 weights run the exact avx512 kernel
    ++tried;
    INFO("seed " << seed << " trial " << trial << " " << p.describe());
    require_chain_bits(p, run_emulated(p));
  }
  CHECK(tried > 25);
}

TEST_CASE("activation pairs put the odd k in the low half, rounded as the avx512_bf16 path rounds",
          "[kernel_path][amx]") {
  if (!have_bf16_dot()) return;
  std::mt19937 rng(7027);
  std::vector<float> x(96);
  for (auto& v : x)
    v = testing::random_value(rng);
  x[5] = 1.0f + 1.0f / 256.0f;  // a tie: rounds to even (1.0)
  x[6] = 1.0f + 3.0f / 256.0f;  // a tie: rounds to even (1 + 1/64)
  std::vector<uint32_t> pairs(48);
  gpu::cpu::gemm_bf16_pairs_odd_low(x.data(), 96, pairs.data());
  for (int p = 0; p < 48; ++p) {
    INFO("pair " << p);
    const auto low = static_cast<uint16_t>(pairs[static_cast<size_t>(p)] & 0xffffu);
    const auto high = static_cast<uint16_t>(pairs[static_cast<size_t>(p)] >> 16);
    CHECK(gpu::bf16_to_f32(low) == testing::to_bf16(x[static_cast<size_t>(2 * p + 1)]));
    CHECK(gpu::bf16_to_f32(high) == testing::to_bf16(x[static_cast<size_t>(2 * p)]));
  }
  CHECK(gpu::bf16_to_f32(static_cast<uint16_t>(pairs[2] & 0xffffu)) == 1.0f);
  CHECK(gpu::bf16_to_f32(static_cast<uint16_t>(pairs[3] >> 16)) == 1.0f + 1.0f / 64.0f);
}

TEST_CASE("the AMX path is offered only where the CPU, the OS and a check product agree",
          "[kernel_path][amx]") {
  const gpu::cpu::amx_status& status = gpu::cpu::amx_process_status();
  CHECK(status.usable == gpu::cpu::kernel_path_available(kernel_path::amx_bf16));
  CHECK(status.usable == status.why.empty());
  CHECK(gpu::cpu::numerics_of(kernel_path::amx_bf16) ==
        gpu::cpu::numerics_of(kernel_path::avx512_bf16));
  CHECK(gpu::cpu::best_kernel_path() != kernel_path::amx_bf16);  // "auto" stays exact
  const auto chosen = gpu::cpu::choose_kernel_path("amx_bf16");
  CHECK(chosen.ok() == status.usable);
  if (!status.usable) {
    // The refusal says why, and which paths this machine has.
    CHECK_THAT(chosen.err().message, Catch::Contains(status.why) && Catch::Contains("available:"));
    WARN("amx_bf16 not offered here: " << status.why);
    return;
  }
  // On AMX hardware: the real tiles through gemm(), threads and all, give the avx512_bf16 bits.
  thread_pool pool(2);
  std::mt19937 rng(7039);
  for (int trial = 0; trial < 60; ++trial) {
    const problem p = testing::random_problem(rng);
    INFO("trial " << trial << " " << p.describe());
    const std::vector<float> tiles = testing::run(p, 0, p.m, kernel_path::amx_bf16, pool);
    const std::vector<float> vectors = testing::run(p, 0, p.m, kernel_path::avx512_bf16, pool);
    for (int r = 0; r < p.m; ++r)
      REQUIRE(testing::same_row(tiles, r, vectors, r, p));
  }
}

TEST_CASE("on AMX hardware the engine's tokens and logits are the avx512_bf16 path's",
          "[kernel_path][amx]") {
  if (!gpu::cpu::kernel_path_available(kernel_path::amx_bf16)) {
    WARN("skipped: amx_bf16 not offered here: " << gpu::cpu::amx_process_status().why);
    return;
  }
  for (const char* family : {"qwen3_moe", "deepseek_v3"}) {
    INFO("family " << family);
    testing::temp_dir dir("amx-engine");
    model::model_spec spec = testing::small_model_spec(33, family);
    spec.hidden = 96;  // three tiles of k and a tail in the expert FFN (moe_inter 40)
    spec.moe_inter = 40;
    spec.vocab = 500;
    REQUIRE(model::write_random_model(spec, dir.path()).ok());
    std::vector<int32_t> prompt;
    for (int i = 0; i < 40; ++i)
      prompt.push_back((i * 37 + 11) % spec.vocab);
    const testing::engine_run vectors =
        testing::run_engine_on_path(dir.path(), kernel_path::avx512_bf16, prompt);
    const testing::engine_run tiles =
        testing::run_engine_on_path(dir.path(), kernel_path::amx_bf16, prompt);
    CHECK(tiles.tokens == vectors.tokens);
    REQUIRE(tiles.logits.size() == vectors.logits.size());
    CHECK(std::memcmp(tiles.logits.data(), vectors.logits.data(),
                      sizeof(float) * tiles.logits.size()) == 0);
  }
}
