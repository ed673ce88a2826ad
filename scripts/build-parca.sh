#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds Parca from examples/parca's module into target/go-examples/parca, once (its modules come through the
# Go module proxy; minutes cold): tests/live_parca.rs runs it against `tlsprof serve`. `make test` starts it
# beside the tests' compilation; the test runs it too, and waits for a build under way.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/go-examples/parca
fresh() { [[ -x $out && $out -nt examples/parca/go.mod && $out -nt examples/parca/go.sum ]]; }
fresh && exit 0
mkdir -p target/go-examples
exec 9>"$out.lock"
flock 9
fresh && exit 0
go=$(command -v go || echo /usr/local/go/bin/go)
(cd examples/parca && "$go" build -o "../../$out.tmp" github.com/parca-dev/parca/cmd/parca)
mv "$out.tmp" "$out"
