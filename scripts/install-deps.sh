#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what building, testing and the demo need on a fresh Debian 12 machine (chromium: the HTML
# report's browser test, tests/html.rs; cmake and g++: the boring crate's build of BoringSSL, for
# examples/rust/boring-server, and AWS-LC's, with libpcre2-dev for the nginx built against it,
# scripts/build-aws-lc.sh; apache2: a server whose handshakes mod_ssl drives with SSL_accept,
# scripts/apache-target.sh; postgresql: a server that forks a backend per connection, scripts/postgres-target.sh;
# apache2-utils: htpasswd, the bcrypt hashes of serve's web configuration in tests/live_parca.rs;
# tmux: a terminal for `tlsprof top`'s screen in tests/live_top.rs; man-db: the installed man pages, tests/install.rs
# and tests/package.rs; haproxy and a JDK: servers counted from the wire, tests/live_wire.rs; maven: Netty and
# netty-tcnative from Maven Central for examples/java, tests/live_java.rs).
# Idempotent.
set -euo pipefail

packages=(clang clang-format llvm libelf-dev zlib1g-dev pkg-config make gcc libssl-dev openssl linux-perf bpftrace
          nginx-light nodejs wrk python3 procps debuginfod binutils xz-utils curl prometheus
          chromium cmake g++ libpcre2-dev apache2 apache2-utils postgresql tmux man-db haproxy openjdk-17-jdk-headless
          maven)
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

# Go 1.21 or later builds the Go targets of the tests (examples/go); older releases are fetched by the tests
# through the Go module proxy (GOTOOLCHAIN). Found on PATH or in /usr/local/go; else Debian's golang-go is
# installed and, being older than 1.21, used only to fetch a newer toolchain module from the proxy.
go_ok() { "$1" version 2>/dev/null | grep -qE 'go1\.(2[1-9]|[3-9][0-9])'; }
go_bin=$(command -v go || echo /usr/local/go/bin/go)
if ! go_ok "$go_bin"; then
  go_toolchain=golang.org/toolchain@v0.0.1-go1.26.8.linux-amd64
  if ! command -v go >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "install-deps: Go 1.21 or later is missing: install it, or run as root" >&2
      exit 1
    fi
    apt-get install -y -qq --no-install-recommends golang-go >/dev/null
  fi
  go mod download "$go_toolchain"
  go_root="$(go env GOMODCACHE)/$go_toolchain"
  # Module zips keep no file modes: the toolchain's programs must be made executable again.
  find "$go_root/bin" "$go_root/pkg/tool" -type f -exec chmod 0755 {} +
  ln -sf "$go_root/bin/go" /usr/local/bin/go
  go_ok /usr/local/bin/go || { echo "install-deps: could not install Go 1.21 or later" >&2; exit 1; }
fi

# cargo-deb builds the Debian package (`make deb`, tests/package.rs).
cargo_deb_version=3.8.0
cargo=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
if ! "$cargo" deb --version 2>/dev/null | grep -qx "cargo-deb $cargo_deb_version"; then
  "$cargo" install --quiet --locked cargo-deb --version "$cargo_deb_version"
fi

# Debian's nginx, apache2, postgresql, debuginfod, prometheus and haproxy packages start services; tlsprof's examples and
# tests run their own instances.
for service in nginx apache2 postgresql debuginfod prometheus haproxy; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$service" 2>/dev/null; then
    systemctl stop "$service" || true
  fi
done
