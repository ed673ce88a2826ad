# SPDX-License-Identifier: Apache-2.0
# Thin wrapper over cargo and scripts/. `make test` and `make demo` install what they need first.
CARGO ?= $(shell command -v cargo 2>/dev/null || echo $(HOME)/.cargo/bin/cargo)

.PHONY: deps build test fuzz demo bench lint golden clean install uninstall deb

deps:
	scripts/install-deps.sh

build: deps
	$(CARGO) build --release --locked

# Live tests start servers and profile them one at a time: they measure CPU, so they must not overlap.
# Parca, a test target that takes minutes to build cold, builds while the tests compile (its test waits for
# it, and says why if it failed). --no-fail-fast: a failing test binary does not hide what the others would say.
test: build
	scripts/build-parca.sh > target/build-parca.log 2>&1 & \
	$(CARGO) test --release --locked --no-run; built=$$?; wait; exit $$built
	$(CARGO) test --release --locked --no-fail-fast -- --test-threads=1

# The property tests of parsers of target-controlled input and of recordings (fuzz_*), at length: make test
# tries 256 cases of each.
FUZZ_CASES ?= 100000
fuzz:
	PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test --release --locked --lib fuzz_

demo: build
	scripts/demo.sh

# The binary, man pages, shell completions, the systemd unit and the Prometheus example under $(DESTDIR)$(PREFIX).
PREFIX ?= /usr/local
install: build
	$(CARGO) build --release --locked --example gen-docs
	PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) scripts/install.sh target/release/tlsprof target/release/examples/gen-docs

uninstall:
	PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) scripts/install.sh --uninstall

# The Debian package of what `make install` installs under /usr (cargo-deb): target/debian/*.deb.
deb: build
	$(CARGO) build --release --locked --example gen-docs
	scripts/build-deb.sh target/release/tlsprof target/release/examples/gen-docs

# Overhead and accuracy against bpftrace and perf in interleaved rounds (nginx, Go, rustls and BoringSSL servers), a
# 10-minute recording and a 30-minute serve run; writes BENCHMARKS.md.
bench: build
	python3 scripts/bench.py --go --rustls --boring --aws-lc --java

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --release --all-targets -- -D warnings
	clang-format --dry-run -Werror bpf/tlsprof.bpf.c bpf/tlsprof.h bpf/wire.bpf.h

clean:
	$(CARGO) clean
	rm -rf out

# Rewrites tests/golden/ from the checked-in recordings after an intended output change: review its diff.
golden: build
	TLSPROF_BLESS=1 $(CARGO) test --release --locked --test golden
