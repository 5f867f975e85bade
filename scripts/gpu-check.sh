#!/usr/bin/env bash
# The CUDA backend's device check: runs every CUDA test case (each in its own process, so one
# crashed context cannot fail the rest), then `brigade generate --device cuda:0` against the CPU
# engine on a random checkpoint of every family (the same greedy tokens over 64 steps), and
# `brigade serve` with every role on cuda:0 (deploy/examples/one-gpu.yaml) against the CPU engine,
# printed as one table, then the matmul benchmark and `brigade bench engine --device cuda:0` on
# the benchmark model and on a model of hidden 2048, each figure beside the H200's bound (decode
# against 4.8 TB/s, prefill against 989 bf16 TFLOP/s); any mismatch or failed run fails it.
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
# compute-sanitizer; BENCH=0 skips the benchmarks, PROFILE=0 only the kernel profile; PARITY=0
# skips the generate and serve comparisons; BANDWIDTH_GBS and PEAK_TFLOPS replace the H200's
# bounds on another device; CASE_TIMEOUT and STEP_TIMEOUT (seconds) bound each test case and each
# generate or serve run; BUILD_DIR (default build-gpu); OUT, when set, receives the full log.
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
    # NCCL's cases run without the sanitizer: NCCL asks for kernel images of other devices while
    # it sets up, which memcheck reports as API errors (an H200, 2026-12-04), and one case makes
    # no CUDA call at all, which memcheck refuses.
    local case_runner=("${runner[@]}")
    [[ $name == nccl* ]] && case_runner=()
    # Catch2 reads commas in a test spec as separators.
    out=$(timeout "$case_timeout" "${case_runner[@]}" "$tests" "${name//,/\\,}" 2>&1) || rc=$?
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

families=(qwen3_moe mixtral olmoe qwen2_moe deepseek_v3 qwen3 qwen2 llama)
parity_steps=64
serve_requests=64
# Time limits, so that one hung kernel or server cannot take the whole lease: per test case, and
# per generate or serve run.
case_timeout=${CASE_TIMEOUT:-120}
step_timeout=${STEP_TIMEOUT:-180}

# The ids of a greedy `brigade generate --json` on `device`, one line; empty when it failed (its
# error is left in $carry/parity/<name>.err).
generate_ids() {
  local bin=$1 model=$2 device=$3 name=$4
  timeout "$step_timeout" "$bin/brigade" generate --model "$model" --prompt-ids 1,2,3,4,5,6,7,8 --ignore-eos \
    --max-tokens "$parity_steps" --json --device "$device" 2>"$carry/parity/$name.err" |
    python3 -c 'import json, sys; print(",".join(map(str, json.load(sys.stdin)["ids"])))' \
      2>>"$carry/parity/$name.err" || true
}

# "64 tok" for a list of ids, "301 ch" for a JSON string, "-" for nothing.
length() {
  if [ -z "$1" ]; then
    echo -
  elif [ "${1:0:1}" = '"' ]; then
    echo "${#1} ch"
  else
    echo "$(tr ',' ' ' <<<"$1" | wc -w) tok"
  fi
}

# One row of the table: what was compared, how long each side's answer is (tokens of an id list,
# characters of a text), and whether they agree.
row() {
  local what=$1 cpu=$2 cuda=$3 verdict
  if [ -z "$cuda" ] || [ -z "$cpu" ]; then
    verdict=ERROR
  elif [ "$cpu" = "$cuda" ]; then
    verdict=same
  else
    verdict=MISMATCH
  fi
  printf '%-34s %10s %10s  %s\n' "$what" "$(length "$cpu")" "$(length "$cuda")" "$verdict"
  [ "$verdict" = same ]
}

# `brigade serve MANIFEST --device DEVICE` answering serve_requests greedy completions at once
# (scripts/serve_answers.py), their texts as one JSON list in $carry/parity/serve-NAME.json;
# the server's log beside it. Returns non-zero when the server did not start in time.
serve_answers() {
  local bin=$1 manifest=$2 device=$3 name=$4 log=$carry/parity/serve-$4.log
  "$bin/brigade" serve "$manifest" --device "$device" --listen 127.0.0.1:0 >"$log" 2>&1 &
  local pid=$! url=""
  for _ in $(seq 1 240); do
    url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$log" | head -1 || true)
    [ -n "$url" ] || ! kill -0 "$pid" 2>/dev/null && break
    sleep 0.5
  done
  if [ -n "$url" ]; then
    timeout "$step_timeout" python3 scripts/serve_answers.py "$url" "$serve_requests" \
      "$parity_steps" >"$carry/parity/serve-$name.json" 2>>"$log" || true
  fi
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  [ -n "$url" ]
}

# generate on cuda:0 against the CPU engine for every family, and serve with every role on
# cuda:0 against generate on the CPU: one table, non-zero on any mismatch. Without a device the
# first generate says why, and the check fails with it.
parity() {
  local bin=$1 status=0 models=$carry/parity/models
  rm -rf "$carry/parity"
  mkdir -p "$models"
  if ! timeout "$step_timeout" "$bin/brigade" generate --model models/default/target \
    --prompt-ids 1,2 --max-tokens 1 --device cuda:0 >/dev/null 2>"$carry/parity/probe.err"; then
    echo "FAIL: brigade generate --device cuda:0 cannot run here:"
    cat "$carry/parity/probe.err"
    return 1
  fi
  printf '%-34s %10s %10s  %s\n' "comparison" "cpu" "cuda:0" "verdict"
  for family in "${families[@]}"; do
    "$bin/brigade" make-model --family "$family" --out "$models/$family" \
      >"$carry/parity/make-$family.log" 2>&1 || {
      echo "FAIL: make-model --family $family:"
      cat "$carry/parity/make-$family.log"
      status=1
      continue
    }
    local cpu cuda
    cpu=$(generate_ids "$bin" "$models/$family" cpu "$family-cpu")
    cuda=$(generate_ids "$bin" "$models/$family" cuda:0 "$family-cuda")
    row "generate $family ($parity_steps steps)" "$cpu" "$cuda" || {
      status=1
      cat "$carry/parity/$family-cpu.err" "$carry/parity/$family-cuda.err"
    }
  done
  # Every role on cuda:0 (two decode workers, four shards) against every role on the CPU,
  # serve_requests requests in flight at once; and the CPU's first answer against the CPU
  # engine's (generate), which ties both to the engine.
  local first cpu_text
  first=$(python3 -c 'import sys; sys.path.insert(0, "scripts"); import serve_answers; print(serve_answers.prompt(0))')
  cpu_text=$(timeout "$step_timeout" "$bin/brigade" generate --model models/default/target \
    --prompt "$first" --ignore-eos --max-tokens "$parity_steps" --json \
    2>"$carry/parity/serve-generate.err" |
    python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["text"]))' || true)
  serve_answers "$bin" deploy/examples/one-gpu.yaml cpu cpu || echo "serve --device cpu did not start"
  serve_answers "$bin" deploy/examples/one-gpu.yaml cuda:0 cuda || echo "serve --device cuda:0 did not start"
  python3 - "$carry/parity/serve-cpu.json" "$carry/parity/serve-cuda.json" "$cpu_text" \
    "$serve_requests" <<'PY' || {
import json, sys
def load(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return []
cpu, cuda, engine, n = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3], int(sys.argv[4])
ok_cpu = sum(t is not None for t in cpu)
ok_cuda = sum(t is not None for t in cuda)
same = sum(1 for a, b in zip(cpu, cuda) if a is not None and a == b)
anchor = bool(cpu) and engine != "" and json.dumps(cpu[0]) == engine
good = len(cpu) == n and len(cuda) == n and same == n and anchor
print("%-34s %10s %10s  %s" % ("serve one-gpu.yaml, %d at once" % n, "%d ok" % ok_cpu,
                                "%d ok" % ok_cuda,
                                "same" if good else "MISMATCH (%d of %d same)" % (same, n)))
print("%-34s %10s %10s  %s" % ("  cpu serve's first = generate", "", "",
                                "same" if anchor else "MISMATCH"))
for i, (a, b) in enumerate(zip(cpu, cuda)):
    if a != b:
        print("  prompt %d: cpu %s" % (i, json.dumps(a)))
        print("  prompt %d: cuda %s" % (i, json.dumps(b)))
        break
sys.exit(0 if good else 1)
PY
    status=1
    tail -20 "$carry/parity/serve-cpu.log" "$carry/parity/serve-cuda.log"
  }
  return $status
}

# A model of Qwen3-30B-A3B's width (hidden 2048, 32 heads of 128, 4 KV heads, experts of 768) in
# 4 layers of 16 experts, top-4: prefill's matmuls at a realistic width, in 0.85 GB of bf16.
wide_model=(--family qwen3_moe --layers 4 --hidden 2048 --heads 32 --kv-heads 4 --head-dim 128
  --experts 16 --top-k 4 --moe-inter 768 --vocab 16384 --seed 3)
# The share of the bf16 FLOP bound that prefill on the hidden-2048 model is to reach.
prefill_target=0.30

# `bench engine --device cuda:0 --json --quick` on the benchmark model and on the hidden-2048
# one, each run in its own time limit so that the whole check keeps its budget; one table of
# every figure, its bound and its share. Non-zero when a run fails, not when a share is low.
engine_bench() {
  local bin=$1 dir=$carry/engine-bench status=0
  local bounds=(--bandwidth-gbs "${BANDWIDTH_GBS:-4800}" --peak-tflops "${PEAK_TFLOPS:-989}")
  rm -rf "$dir"
  mkdir -p "$dir"
  timeout 90 "$bin/brigade" bench engine --device cuda:0 --json --quick "${bounds[@]}" \
    --work-dir "$dir" >"$dir/bench-model.json" 2>"$dir/bench-model.err" || {
    echo "FAIL: bench engine --device cuda:0 on the benchmark model:"
    tail -20 "$dir/bench-model.err"
    status=1
  }
  if timeout 60 "$bin/brigade" make-model "${wide_model[@]}" --out "$dir/hidden-2048" \
    >"$dir/make-model.log" 2>&1; then
    timeout 120 "$bin/brigade" bench engine --device cuda:0 --json --quick "${bounds[@]}" \
      --model "$dir/hidden-2048" >"$dir/hidden-2048.json" 2>"$dir/hidden-2048.err" || {
      echo "FAIL: bench engine --device cuda:0 --model hidden-2048:"
      tail -20 "$dir/hidden-2048.err"
      status=1
    }
  else
    echo "FAIL: make-model ${wide_model[*]}:"
    tail -20 "$dir/make-model.log"
    status=1
  fi
  python3 - "$prefill_target" "bench model=$dir/bench-model.json" \
    "hidden 2048=$dir/hidden-2048.json" <<'PY'
import json, sys
target = float(sys.argv[1])
print("%-30s %12s %14s %8s  %s" % ("engine on cuda:0", "tokens/s", "bound tokens/s", "share",
                                     "bound by"))
for arg in sys.argv[2:]:
    name, path = arg.split("=", 1)
    try:
        doc = json.load(open(path))
    except (OSError, ValueError):
        print("%-30s %12s" % (name, "-"))
        continue
    p = doc["prefill"]
    rows = [("%s prefill %d" % (name, p["prompt_tokens"]), p["tokens_per_s"],
             p["flop_bound_tokens_per_s"], p["share"], "bf16 FLOPs")]
    for d in doc["decode"]:
        rows.append(("%s decode b%d" % (name, d["batch"]), d["tokens_per_s"],
                     d["bound_tokens_per_s"], d["share"], d["bound_by"]))
    for what, tps, bound, share, by in rows:
        print("%-30s %12.1f %14.1f %7.1f%%  %s" % (what, tps, bound, 100 * share, by))
    b = doc["bounds"]
    print("%-30s %.0f GB/s (--bandwidth-gbs), %.0f TFLOP/s (--peak-tflops), %.1f MB/token" %
          ("", b["bandwidth_gb_per_s"], b["bf16_tflop_per_s"],
           doc["active_weight_bytes_per_token"] / 1e6))
    if name == "hidden 2048":
        verdict = "met" if p["share"] >= target else "NOT MET"
        print("prefill on hidden 2048 at %.1f%% of the FLOP bound (target %.0f%%): %s" %
              (100 * p["share"], 100 * target, verdict))
PY
  return $status
}

# Where a decode step's time goes: every kernel of a 16-token greedy generation on the hidden-2048
# model under ncu (one metric, the kernel's duration), summed by kernel name. Set beside the
# benchmark's step time it tells kernel time from launch and synchronisation overhead. Skipped,
# saying why, without ncu or the model; never fails the check.
profile() {
  local bin=$1 model=$carry/engine-bench/hidden-2048 ncu
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null |
    head -1 || true)
  if [ -z "$ncu" ] || [ ! -d "$model" ]; then
    echo "no profile: ${ncu:-ncu not found}, model ${model}$([ -d "$model" ] || echo ' missing')"
    return 0
  fi
  timeout 150 "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv \
    --log-file "$carry/profile.csv" "$bin/brigade" generate --model "$model" \
    --prompt-ids 1,2,3,4 --max-tokens 16 --ignore-eos --device cuda:0 >/dev/null \
    2>"$carry/profile.err" || {
    echo "ncu failed or ran out of time:"
    tail -5 "$carry/profile.err"
  }
  python3 - "$carry/profile.csv" <<'PY' || true
import collections, csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r]
head = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
names = rows[head]
name_at, value_at, unit_at = (names.index("Kernel Name"), names.index("Metric Value"),
                              names.index("Metric Unit"))
scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
         "second": 1e6, "s": 1e6}
total = collections.Counter()
count = collections.Counter()
for r in rows[head + 1:]:
    if len(r) <= value_at:
        continue
    name = r[name_at].split("(")[0].split("<")[0]
    total[name] += float(r[value_at].replace(",", "")) * scale.get(r[unit_at], 1.0)
    count[name] += 1
print("%-40s %8s %12s %10s" % ("kernel (16-token generate, hidden 2048)", "launches", "total us",
                               "mean us"))
for name, us in total.most_common():
    print("%-40s %8d %12.1f %10.2f" % (name[:40], count[name], us, us / count[name]))
print("%-40s %8d %12.1f" % ("all kernels", sum(count.values()), sum(total.values())))
PY
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
  if [ "${PARITY:-1}" = 1 ]; then
    log "generate and serve on cuda:0 against the CPU engine"
    parity "$bin" || status=1
  fi
  if [ "${BENCH:-1}" = 1 ]; then
    log "brigade bench cuda-matmul"
    "$bin/brigade" bench cuda-matmul || status=1
    log "brigade bench engine --device cuda:0 against the device's bounds"
    engine_bench "$bin" || status=1
    if [ "${PROFILE:-1}" = 1 ]; then
      log "kernel time of a decode under ncu"
      profile "$bin"
    fi
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
