# The two commands: `make demo` and `make test`. Everything else is a helper.
CARGO ?= cargo
LOOM_TARGET := target/loom

.PHONY: demo test test-rust test-loom lint bench setup clean

# Rust toolchain components the checks need (rustup is the platform's installer).
setup:
	@command -v cargo >/dev/null || { echo "cargo not found: install Rust from https://rustup.rs"; exit 1; }
	@rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
	@rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt

demo: setup
	$(CARGO) run --release -p stampede --example pipeline -- 5

test: setup lint test-rust test-loom

test-rust:
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc

# loom model-checks the concurrent core; it rebuilds the crate with --cfg loom, so it gets
# its own target directory.
test-loom:
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=$(LOOM_TARGET) \
		$(CARGO) test -p stampede-core --release --test 'loom_*'
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=$(LOOM_TARGET) \
		$(CARGO) clippy -p stampede-core --release --tests -- -D warnings

lint: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps

bench:
	$(CARGO) run --release -p stampede-bench -- --out bench-results/core.json

clean:
	$(CARGO) clean
