// OpenBLAS, loaded only when a benchmark compares against it. Linking it into the brigade binary
// would start its thread pool in every command (serve, node, tests), where an idle OpenBLAS
// thread spins in sched_yield and takes a core away from brigade.
#pragma once

#include <string>

#include "common/result.hpp"

namespace brigade::bench {

/// cblas_sgemm(RowMajor, NoTrans, Trans, ...): c[m, n] = a[m, k] * b[n, k]^T.
using sgemm_nt_fn = void (*)(int m, int n, int k, const float* a, const float* b, float* c);

struct openblas {
  /// Runs C = A * B^T with OpenBLAS's sgemm.
  void sgemm_nt(int m, int n, int k, const float* a, const float* b, float* c) const;
  void set_threads(int threads) const;

  void* sgemm = nullptr;
  void* set_num_threads = nullptr;
};

/// dlopen()s OpenBLAS; an error names the library it looked for.
result<openblas> load_openblas();

}  // namespace brigade::bench
