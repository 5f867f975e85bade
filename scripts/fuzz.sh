#!/usr/bin/env bash
# Fuzzes what brigade reads from users, disks and peers with libFuzzer (clang), ASan and UBSan.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Targets: fuzz_http_api (any HTTP request to the API), fuzz_manifest (cluster manifests),
# fuzz_files (model config, safetensors, tokenizer.json, traces, layouts, load matrices, SSD cache
# blocks, transport headers, confidence heads, draft settings). Each starts from its saved corpus in tests/fuzz/corpus/TARGET and
# grows a working copy in build-fuzz/corpus/TARGET. A crash leaves its input in build-fuzz/; to
# keep it fixed, copy it into tests/fuzz/corpus/TARGET/ as crash-WHAT: every build then runs it
# under ASan and UBSan (ctest -R fuzz_corpus).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_http_api fuzz_manifest fuzz_files)
build="${BRIGADE_FUZZ_BUILD:-$root/build-fuzz}"

if ! command -v clang++ > /dev/null; then
  echo "scripts/fuzz.sh needs clang (apt-get install clang); without it, ctest -R fuzz_corpus" \
       "replays the saved inputs" >&2
  exit 1
fi
if [ ! -f "$build/build.ninja" ]; then
  echo "configuring $build with clang and libFuzzer"
  mkdir -p "$build"
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DBRIGADE_FUZZ=ON -DBRIGADE_WERROR=OFF -DBRIGADE_SANITIZER_TESTS=OFF > "$build/configure.log"
fi
cmake --build "$build" --target "${targets[@]}"

status=0
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  mkdir -p "$corpus"
  echo "== $t for ${seconds}s"
  if (cd "$build" && "$build/tests/fuzz/$t" -max_total_time="$seconds" -max_len=8192 \
        -rss_limit_mb=4096 -print_final_stats=1 "$corpus" "$root/tests/fuzz/corpus/$t" \
        > "$build/$t.log" 2>&1); then
    grep -E "^Done|stat::number_of_executed_units" "$build/$t.log" | head -1
  else
    status=1
    echo "$t found a fault: see $build/$t.log and the crash-* input in $build" >&2
    grep -E "ERROR|runtime error|what\(\)|answered 5" "$build/$t.log" | head -5 >&2
  fi
done
exit $status
