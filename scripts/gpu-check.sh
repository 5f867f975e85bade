#!/usr/bin/env bash
# The CUDA backend's device check: runs every CUDA test case (each in its own process, so one
# crashed context cannot fail the rest) and the matmul benchmark, and prints a short summary.
#
#   scripts/gpu-check.sh prepare     on a machine with brigade's build dependencies (no GPU
#                                    needed): builds the test binary and brigade with CUDA on and
#                                    puts them, with libcudart, in .gpu-carry/ (git-ignored).
#   scripts/gpu-check.sh collect     only the copying step of prepare, from an existing build.
#   scripts/gpu-check.sh run         on the GPU machine: runs the carried binaries when
#                                    .gpu-carry/ is there, else builds from source first (which
#                                    needs the dependencies there too).
#   scripts/gpu-check.sh             prepare (when needed) and run, on one machine.
#
# A device tool call carries the folder: run(command="scripts/gpu-check.sh run",
# carry=[".gpu-carry"]). Options through the environment: SANITIZE=1 runs each case under
# compute-sanitizer; BENCH=0 skips the benchmark; BUILD_DIR (default build-gpu); OUT, when set,
# receives the full log.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${BUILD_DIR:-build-gpu}
carry=$root/.gpu-carry
mode=${1:-all}

log() { printf '\n== %s\n' "$*"; }

prepare() {
  log "configuring $build with CUDA on"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRIGADE_WITH_CUDA=ON \
    -DBRIGADE_SANITIZER_TESTS=OFF -DBRIGADE_NATIVE=OFF \
    -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
  log "building cuda_tests and brigade"
  cmake --build "$build" --target cuda_tests brigade -j "$(nproc)"
  collect
}

# Copies the built binaries and the shared libraries they need that a bare CUDA machine may
# lack (not the C library, which it has, nor libnccl.so.2 and libcuda, which find_nccl and the
# driver provide) into .gpu-carry/.
collect() {
  rm -rf "$carry"
  mkdir -p "$carry/bin" "$carry/lib"
  cp "$build/tests/gpu/cuda_tests" "$build/brigade" "$carry/bin/"
  local system='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libnccl|libcuda)\.'
  ldd "$carry/bin/cuda_tests" "$carry/bin/brigade" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
    sort -u | while read -r name path; do
      if ! [[ $name =~ $system ]]; then cp -L "$path" "$carry/lib/$name"; fi
    done
  local exclude
  exclude=$(git rev-parse --git-path info/exclude)
  mkdir -p "$(dirname "$exclude")"
  grep -qx '/.gpu-carry/' "$exclude" 2>/dev/null || echo '/.gpu-carry/' >>"$exclude"
  ls "$carry/lib"
  # ICU's data and OpenBLAS alone pass the carry limit uncompressed: ship one xz archive.
  strip "$carry/bin/"*
  tar -C "$carry" -cf - bin lib | xz -6 -T2 >"$root/.gpu-carry.tar.xz"
  rm -rf "$carry/bin" "$carry/lib"
  mv "$root/.gpu-carry.tar.xz" "$carry/bundle.tar.xz"
  du -sh "$carry"
}

# Unpacks the archive collect made (with Python's tarfile: the GPU machine may lack xz).
unpack() {
  [ -f "$carry/bundle.tar.xz" ] && [ ! -x "$carry/bin/cuda_tests" ] || return 0
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$carry/bundle.tar.xz" "$carry"
}

# libnccl.so.2 is too large to carry: use the GPU machine's (the CUDA toolkit's or the one
# PyTorch's nvidia-nccl package installs).
find_nccl() {
  local dirs=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu)
  dirs+=($(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null || true))
  for d in "${dirs[@]}"; do
    local hit
    hit=$(find "$d" -maxdepth 4 -name 'libnccl.so.2*' 2>/dev/null | head -1)
    if [ -n "$hit" ]; then
      dirname "$hit"
      return
    fi
  done
}

# On the GPU machine every case must run: a skip there means the device could not be used (a
# driver older than the build's CUDA, say), and a binary that cannot even list its cases (a
# missing shared library) must not pass as "0 failed".
run_cases() {
  local tests=$1 passed=0 failed=0 skipped=0 failures=() names
  local runner=()
  # Catch2 exits with the number of cases it lists, so only an empty list tells a failure.
  names=$("$tests" --list-test-names-only 2>"$carry/list-errors") || true
  if [ -z "$names" ]; then
    printf 'FAIL: %s listed no test cases:\n' "$tests"
    cat "$carry/list-errors"
    return 1
  fi
  [ "${SANITIZE:-0}" = 1 ] && runner=(compute-sanitizer --error-exitcode 99 --tool memcheck)
  while IFS= read -r name; do
    [ -z "$name" ] && continue
    local out rc=0 start=$SECONDS
    # Catch2 reads commas in a test spec as separators.
    out=$(timeout 600 "${runner[@]}" "$tests" "${name//,/\\,}" 2>&1) || rc=$?
    if [ $rc -eq 0 ] && grep -q 'no CUDA device:' <<<"$out"; then
      skipped=$((skipped + 1))
      printf 'SKIP %4ss  %s: %s\n' $((SECONDS - start)) "$name" \
        "$(grep -m1 -o 'no CUDA device:.*' <<<"$out")"
    elif [ $rc -eq 0 ]; then
      passed=$((passed + 1))
      printf 'ok   %4ss  %s\n' $((SECONDS - start)) "$name"
    else
      failed=$((failed + 1))
      failures+=("$name")
      printf 'FAIL %4ss  %s (exit %s)\n%s\n' $((SECONDS - start)) "$name" "$rc" "$out"
    fi
  done <<<"$names"
  log "summary"
  for f in "${failures[@]}"; do echo "failed: $f"; done
  echo "$passed passed, $failed failed, $skipped skipped"
  if [ $skipped -gt 0 ]; then
    echo "FAIL: $skipped cases found no usable CUDA device (the reason is on their SKIP lines)"
  fi
  if [ $passed -eq 0 ]; then echo "FAIL: no case ran"; fi
  [ $failed -eq 0 ] && [ $skipped -eq 0 ] && [ $passed -gt 0 ]
}

run() {
  local tests bin
  unpack
  if [ -x "$carry/bin/cuda_tests" ]; then
    bin=$carry/bin
  else
    prepare
    bin=$carry/bin
  fi
  tests=$bin/cuda_tests
  local nccl
  nccl=$(find_nccl)
  export LD_LIBRARY_PATH="$carry/lib:${nccl:+$nccl:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  log "devices"
  nvidia-smi -L 2>&1 || echo "nvidia-smi is not available"
  echo "NCCL from: ${nccl:-not found}"
  log "CUDA test cases"
  local status=0
  run_cases "$tests" || status=1
  if [ "${BENCH:-1}" = 1 ]; then
    log "brigade bench cuda-matmul"
    "$bin/brigade" bench cuda-matmul || status=1
  fi
  return $status
}

main() {
  case "$mode" in
    prepare) prepare ;;
    collect) collect ;;
    run) run ;;
    all) run ;;
    *)
      echo "usage: $0 [prepare|run]" >&2
      exit 2
      ;;
  esac
}

if [ -n "${OUT:-}" ]; then
  main 2>&1 | tee "$OUT/gpu-check.log"
  exit "${PIPESTATUS[0]}"
fi
main
