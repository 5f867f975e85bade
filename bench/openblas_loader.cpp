#include "bench/openblas_loader.hpp"

#include <dlfcn.h>

namespace brigade::bench {
namespace {

// cblas.h's enum values, fixed by the CBLAS standard.
constexpr int cblas_row_major = 101;
constexpr int cblas_no_trans = 111;
constexpr int cblas_trans = 112;

using cblas_sgemm_fn = void (*)(int, int, int, int, int, int, float, const float*, int,
                                const float*, int, float, float*, int);
using set_threads_fn = void (*)(int);

}  // namespace

void openblas::sgemm_nt(int m, int n, int k, const float* a, const float* b, float* c) const {
  reinterpret_cast<cblas_sgemm_fn>(sgemm)(cblas_row_major, cblas_no_trans, cblas_trans, m, n, k,
                                          1.0f, a, k, b, k, 0.0f, c, n);
}

void openblas::set_threads(int threads) const {
  reinterpret_cast<set_threads_fn>(set_num_threads)(threads);
}

result<openblas> load_openblas() {
  for (const char* name : {"libopenblas.so.0", "libopenblas.so",
                           "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0"}) {
    void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) continue;
    openblas out;
    out.sgemm = dlsym(lib, "cblas_sgemm");
    out.set_num_threads = dlsym(lib, "openblas_set_num_threads");
    if (out.sgemm && out.set_num_threads) return out;
  }
  return error(errc::not_found,
               "cannot load OpenBLAS (libopenblas.so.0): install Debian's libopenblas0-pthread");
}

}  // namespace brigade::bench
