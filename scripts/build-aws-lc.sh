#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds AWS-LC's libssl and libcrypto, then nginx against them, linked in with their symbols, as nginx's AWS-LC
# users build it, and the AWS-LC ground-truth fixture (tests/fixtures/bssl_handshakes.c): nginx's source from
# Debian's archive (the release Debian 12 ships, checked against the archive's checksum), AWS-LC's from the
# aws-lc-sys crate that examples/rust/rustls-server locks (its vendored tree holds libssl too). Writes OUT_DIR/nginx
# and OUT_DIR/bssl_handshakes and prints their paths; a second run with the same sources reuses AWS-LC and nginx.
set -euo pipefail

die() { echo "build-aws-lc: $*" >&2; exit 1; }
(($# == 1)) || { echo "usage: $0 OUT_DIR" >&2; exit 2; }

nginx_version=1.22.1
nginx_sha256=9ebb333a9e82b952acd3e2b4aeb1d4ff6406f72491bab6cd9fe69f0dea737f31
nginx_url=http://deb.debian.org/debian/pool/main/n/nginx/nginx_${nginx_version}.orig.tar.gz

repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)

manifest=$(cargo metadata --locked --format-version 1 \
  --manifest-path "$repo/examples/rust/rustls-server/Cargo.toml" 2>"$out/metadata.log" \
  | python3 -c 'import json, sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == "aws-lc-sys"))') \
  || die "cannot find the aws-lc-sys crate's source: $(tail -n 3 "$out/metadata.log")"
aws_lc=$(dirname "$manifest")/aws-lc
[[ -f $aws_lc/ssl/CMakeLists.txt ]] || die "no AWS-LC libssl source in $aws_lc"

# The fixture is one file, built each time: its source changes more often than the libraries.
fixture() {
  cc -O2 -Wall -Wextra -I"$aws_lc/include" -o "$out/bssl_handshakes" "$repo/tests/fixtures/bssl_handshakes.c" \
    "$out/aws-lc/ssl/libssl.a" "$out/aws-lc/crypto/libcrypto.a" -lstdc++ -lpthread 2>"$out/fixture.log" \
    || die "the fixture did not build: $(tail -n 5 "$out/fixture.log")"
  echo "$out/nginx"
  echo "$out/bssl_handshakes"
}

stamp="nginx $nginx_version with $(basename "$(dirname "$manifest")")"
if [[ -x $out/nginx && $(cat "$out/stamp" 2>/dev/null) == "$stamp" ]]; then
  fixture
  exit 0
fi
rm -f "$out/nginx" "$out/stamp"

# AWS-LC: only what nginx links (ssl, and crypto under it); no tools, tests, Go or Perl code generation.
cmake -S "$aws_lc" -B "$out/aws-lc" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DBUILD_TOOL=OFF \
  -DDISABLE_GO=ON -DDISABLE_PERL=ON -DBUILD_SHARED_LIBS=OFF >"$out/aws-lc.log" 2>&1 \
  && cmake --build "$out/aws-lc" --target ssl -j "$(nproc)" >>"$out/aws-lc.log" 2>&1 \
  || die "AWS-LC did not build: $(tail -n 5 "$out/aws-lc.log")"

tarball=$out/nginx-$nginx_version.tar.gz
if ! echo "$nginx_sha256  $tarball" | sha256sum -c --quiet >/dev/null 2>&1; then
  curl -fsS --max-time 120 -o "$tarball.part" "$nginx_url" || die "cannot fetch $nginx_url"
  echo "$nginx_sha256  $tarball.part" | sha256sum -c --quiet >/dev/null 2>&1 || die "$nginx_url: checksum mismatch"
  mv "$tarball.part" "$tarball"
fi
rm -rf "$out/nginx-$nginx_version"
tar -xzf "$tarball" -C "$out"
(
  cd "$out/nginx-$nginx_version"
  ./configure --with-http_ssl_module --with-cc-opt="-I$aws_lc/include" \
    --with-ld-opt="-L$out/aws-lc/ssl -L$out/aws-lc/crypto -lstdc++ -lpthread" >"$out/nginx.log" 2>&1 \
    && make -j "$(nproc)" >>"$out/nginx.log" 2>&1
) || die "nginx did not build against AWS-LC: $(grep -m3 -iE 'error' "$out/nginx.log" || tail -n 5 "$out/nginx.log")"
cp "$out/nginx-$nginx_version/objs/nginx" "$out/nginx"
echo "$stamp" >"$out/stamp"
fixture
