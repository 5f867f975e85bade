#!/usr/bin/env bash
# Installs the Debian packages brigade needs to build, run and test. Idempotent and quick when
# everything is present: it asks dpkg first and runs apt-get only for what is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libcaf-dev libucx-dev ucx-utils libboost-dev catch2
  nlohmann-json3-dev libyaml-cpp-dev libfmt-dev libcli11-dev libpcre2-dev libxxhash-dev
  libopenblas-dev libicu-dev libssl-dev python3 python3-numpy curl iproute2 procps
  python3-jinja2  # renders the real chat templates for the chat format parity test
  chromium  # Debian's browser, for the dashboard's browser test (serve_dashboard_browser)
)
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "brigade needs these Debian packages: ${missing[*]}" >&2
  echo "Run 'sudo $0' (or as root) to install them." >&2
  exit 1
fi
echo "Installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
