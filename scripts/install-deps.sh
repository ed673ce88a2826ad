#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what building, testing and the demo need on a fresh Debian 12 machine. Idempotent.
set -euo pipefail

packages=(clang clang-format llvm libelf-dev zlib1g-dev pkg-config make gcc libssl-dev openssl linux-perf bpftrace
          nginx-light nodejs wrk python3 procps debuginfod binutils xz-utils curl)
# go tool pprof reads tlsprof's pprof exports in the tests: Debian's Go unless a Go distribution is installed.
if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
  packages+=(golang-go)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages ${missing[*]}: run as root or install them with apt-get" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
  echo "install-deps: cargo not found: install Rust (https://rustup.rs) and re-run" >&2
  exit 1
fi

# Debian's nginx and debuginfod packages start services; tlsprof's examples and tests run their own instances.
for service in nginx debuginfod; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$service" 2>/dev/null; then
    systemctl stop "$service" || true
  fi
done
