#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the Debian package target/debian/tlsprof_VERSION-1_amd64.deb with cargo-deb, from the files `make
# install` installs under /usr: scripts/install.sh stages them in target/deb-root, Cargo.toml's
# [package.metadata.deb] lists them; the binary is stripped. BINARY and GEN_DOCS must be built (`make deb`
# builds them). Prints the package's path.
set -euo pipefail

(($# == 2)) || { echo "usage: $0 BINARY GEN_DOCS" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
cargo=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
cd "$repo"
rm -rf target/deb-root
PREFIX=/usr DESTDIR=target/deb-root scripts/install.sh "$1" "$2"
"$cargo" deb --no-build --locked --quiet --strip
