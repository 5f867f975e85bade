#!/usr/bin/env bash
# The official `openai` npm client against `brigade serve` on a generated model: chat and
# completions, streamed and not, compared with `brigade generate`, plus bad requests.
#
# Tool calling runs on two scripted models (tests/serve/tools/make_scripted_model.py) whose greedy
# answers are fixed tool calls: one writes a whole call, one completes the call that
# tool_choice "required" opens.
#
# usage: run_node_test.sh BRIGADE SOURCE_DIR NPM_DIR WORK_DIR NODE NPM PYTHON
set -euo pipefail

brigade=$1 src=$2 npm_dir=$3 work=$4 node=$5 npm=$6 python=$7
mkdir -p "$npm_dir"
rm -rf "$work"
mkdir -p "$work"

# Install the pinned package once per lockfile: a stamp records the lock that last installed.
if ! cmp -s "$src/package-lock.json" "$npm_dir/.installed-lock.json"; then
  cp "$src/package.json" "$src/package-lock.json" "$npm_dir/"
  if ! (cd "$npm_dir" && "$npm" ci --no-audit --no-fund); then
    echo "serve_openai_node: 'npm ci' failed in $npm_dir." >&2
    echo "  The test installs the openai package from the npm registry; check that the registry" >&2
    echo "  is reachable (npm ping) and that npm's proxy settings are right, then rerun." >&2
    exit 1
  fi
  cp "$src/package-lock.json" "$npm_dir/.installed-lock.json"
fi

"$brigade" make-model --family qwen3_moe --out "$work/model" --seed 3 --max-positions 512 >/dev/null
scripted="$src/../tools/make_scripted_model.py"
"$python" "$scripted" "$brigade" "$work/calls" '<tool_call>' $'\n{"name": "get_weather", ' \
  '"arguments": {"city": ' '"Paris", "unit": "C"}}' $'\n</tool_call>' >/dev/null
"$python" "$scripted" "$brigade" "$work/completes" '{"name": "get_weather", ' \
  '"arguments": {"city": "Oslo"}}' $'\n</tool_call>' >/dev/null
# ES modules resolve packages from the importing file's folder, so the test runs from npm_dir.
cp "$src/openai_client_test.mjs" "$npm_dir/"
cd "$npm_dir"
BRIGADE="$brigade" MODEL_DIR="$work/model" CALLS_MODEL_DIR="$work/calls" \
  COMPLETES_MODEL_DIR="$work/completes" "$node" --test --test-reporter=tap \
  openai_client_test.mjs
