#include "bench/benchmarks.hpp"

#include <string>

namespace brigade::bench {

// Declared here rather than in a shared header: each benchmark is one function in its own file.
int engine(int argc, char** argv);
int serve(int argc, char** argv);
int balance(int argc, char** argv);
int balance_live(int argc, char** argv);
int tokenizer(int argc, char** argv);
int transport(int argc, char** argv);
int cuda_matmul(int argc, char** argv);
int kv_tiers(int argc, char** argv);
int cache(int argc, char** argv);
int speculation(int argc, char** argv);
int attention(int argc, char** argv);

namespace {

// `bench balance --live` runs the chain on a live topology; without it, the planner offline.
int balance_or_live(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--live") return balance_live(argc, argv);
  }
  return balance(argc, argv);
}

}  // namespace

const bench_entry* registered_benchmarks(int* count) {
  static const bench_entry entries[] = {
      {"engine", engine, "prefill/decode tokens/s and expert FFN GFLOP/s beside OpenBLAS"},
      {"serve", serve, "HTTP requests/s, tokens/s, TTFT and TPOT at concurrency 1, 8, 32, 64"},
      {"balance", balance_or_live,
       "expert-placement planner beside DeepSeek's EPLB on drifting loads; --live: the whole "
       "chain on a running topology"},
      {"tokenizer", tokenizer, "tokenizer encode/decode MB/s on one core, cold and warm cache"},
      {"transport", transport, "UCX transport latency, rate and bandwidth beside ucx_perftest"},
      {"cuda-matmul", cuda_matmul, "CUDA matmul GFLOP/s on expert FFN shapes beside the CPU"},
      {"kvtiers", kv_tiers,
       "time to fetch one KV block from host memory, SSD and the tiered store"},
      {"cache", cache, "prefix KV cache: prefill tokens/s with and without it, TTFT per tier"},
      {"attention", attention,
       "decode tokens/s as the context grows: the CPU's keys stored by column beside by row"},
      {"speculation", speculation,
       "decode tokens/s with speculation (prompt lookup; the trained pair's draft model and "
       "confidence head) beside plain decoding, same output"},
  };
  *count = static_cast<int>(sizeof entries / sizeof entries[0]);
  return entries;
}

}  // namespace brigade::bench
