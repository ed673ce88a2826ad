#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs tlsprof under $DESTDIR$PREFIX (PREFIX defaults to /usr/local): the binary, its man pages and bash, zsh
# and fish completions (written by GEN_DOCS, scripts/gen_docs.rs, from the command line's definition), the
# systemd unit for `tlsprof serve` and the Prometheus example. `make install` runs it; --uninstall removes what
# it installs.
set -euo pipefail

usage() { echo "usage: $0 BINARY GEN_DOCS | $0 --uninstall" >&2; exit 2; }
prefix=${PREFIX:-/usr/local}
root=${DESTDIR:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
base=$root$prefix
files=(bin/tlsprof share/bash-completion/completions/tlsprof share/zsh/vendor-completions/_tlsprof
       share/fish/vendor_completions.d/tlsprof.fish lib/systemd/system/tlsprof.service
       share/doc/tlsprof/examples/prometheus.yml)

if [[ ${1:-} == --uninstall ]]; then
  (($# == 1)) || usage
  for f in "${files[@]}"; do rm -f "$base/$f"; done
  rm -f "$base"/share/man/man1/tlsprof.1 "$base"/share/man/man1/tlsprof-*.1
  rmdir "$base/share/doc/tlsprof/examples" "$base/share/doc/tlsprof" 2>/dev/null || true
  exit 0
fi
(($# == 2)) || usage
binary=$1 gen_docs=$2
docs=$(mktemp -d)
trap 'rm -rf "$docs"' EXIT
"$gen_docs" "$docs"
install -Dm755 "$binary" "$base/bin/tlsprof"
install -d "$base/share/man/man1"
install -m644 "$docs"/man1/*.1 "$base/share/man/man1/"
install -Dm644 "$docs/completions/tlsprof.bash" "$base/share/bash-completion/completions/tlsprof"
install -Dm644 "$docs/completions/_tlsprof" "$base/share/zsh/vendor-completions/_tlsprof"
install -Dm644 "$docs/completions/tlsprof.fish" "$base/share/fish/vendor_completions.d/tlsprof.fish"
# The unit runs the binary where it is installed.
sed "s|/usr/local/bin/tlsprof|$prefix/bin/tlsprof|g" "$repo/examples/tlsprof.service" >"$docs/tlsprof.service"
install -Dm644 "$docs/tlsprof.service" "$base/lib/systemd/system/tlsprof.service"
install -Dm644 "$repo/examples/prometheus.yml" "$base/share/doc/tlsprof/examples/prometheus.yml"
