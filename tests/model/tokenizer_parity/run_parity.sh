#!/usr/bin/env bash
# Tokenizer parity: brigade against the Hugging Face library (its own Node binding, the
# reference) on the real Qwen3, DeepSeek-V3 and Mixtral tokenizer.json files, a Metaspace form
# of Mixtral's, and tokenizers brigade generates. See README.md beside this file.
#
# usage: run_parity.sh BRIGADE PARITY_TOOL SOURCE_DIR NPM_DIR WORK_DIR NODE NPM
# BRIGADE_TOKENIZER_SEED overrides the seed of the generated strings (to reproduce a failure).
set -euo pipefail

brigade=$1 tool=$2 src=$3 npm_dir=$4 work=$5 node=$6 npm=$7
seed=${BRIGADE_TOKENIZER_SEED:-20240615}
mkdir -p "$npm_dir" "$work"

# Install the pinned packages once per lockfile: a stamp records the lock that last installed.
if ! cmp -s "$src/package-lock.json" "$npm_dir/.installed-lock.json"; then
  cp "$src/package.json" "$src/package-lock.json" "$npm_dir/"
  if ! (cd "$npm_dir" && "$npm" ci --no-audit --no-fund); then
    echo "tokenizer_parity: 'npm ci' failed in $npm_dir." >&2
    echo "  The test installs the tokenizers' binding and @lenml/tokenizers from the npm" >&2
    echo "  registry; check that the registry is reachable (npm ping) and that npm's proxy" >&2
    echo "  settings are right, then rerun." >&2
    exit 1
  fi
  cp "$src/package-lock.json" "$npm_dir/.installed-lock.json"
fi
export NODE_PATH="$npm_dir/node_modules"
models="$npm_dir/node_modules/@lenml"

check() {  # check LABEL TOKENIZER_DIR SEED COUNT
  "$node" "$src/parity.js" "$brigade" "$2" "$1" "$3" "$4" "$work" &&
    "$tool" stream "$2" "$work/$1-cases.json"
}

status=0
check qwen3 "$models/tokenizer-qwen3/models" "$seed" 10000 || status=1
check deepseek_v3 "$models/tokenizer-deepseek_v3/models" "$seed" 10000 || status=1
check mixtral "$models/tokenizer-llama2/models" "$seed" 10000 || status=1
"$node" "$src/metaspace_variant.js" "$models/tokenizer-llama2/models" "$work/mixtral-metaspace"
check mixtral-metaspace "$work/mixtral-metaspace" "$((seed + 1))" 2000 || status=1
for family in "qwen3_moe 1024" "mixtral 600" "olmoe 2048"; do
  set -- $family
  "$tool" write "$work/generated-$1" "$1" "$2"
  check "generated-$1" "$work/generated-$1" "$((seed + 2))" 2000 || status=1
done
if [ "$status" -ne 0 ]; then
  echo "tokenizer_parity: FAILED (seed $seed; rerun with BRIGADE_TOKENIZER_SEED=$seed)" >&2
fi
exit "$status"
