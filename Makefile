# The two commands: `make demo` and `make test`. Everything else is a helper.
CARGO ?= cargo
LOOM_TARGET := target/loom

.PHONY: demo test test-rust test-loom test-python lint lint-python bench setup python clean

# The Python package lives in .venv, built by maturin into the workspace's target directory
# (release profile, shared with `cargo build --release`).
VENV := .venv
PY := $(VENV)/bin/python
PY_STAMP := $(VENV)/.installed

# Rust toolchain components the checks need (rustup is the platform's installer).
setup:
	@command -v cargo >/dev/null || { echo "cargo not found: install Rust from https://rustup.rs"; exit 1; }
	@rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
	@rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt

$(PY_STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q 'maturin>=1.7,<2'
	touch $@

# Rebuilds the extension (cargo decides what changed) and installs the package with its extras.
python: setup $(PY_STAMP)
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release -q -E dev

demo: python
	$(PY) -m stampede.demo

# The same pipeline in three address spaces (processes) on this host.
.PHONY: demo-distributed
demo-distributed: python
	$(PY) -m stampede.demo --distributed

test: setup lint test-rust test-loom test-python

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

test-python: python lint-python
	$(PY) -m pytest -q

lint-python: python
	$(PY) -m mypy
	$(PY) -m mypy.stubtest stampede._stampede --allowlist python/stubtest-allowlist.txt

lint: setup lint-python
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps

bench: python
	$(CARGO) run --release -p stampede-bench -- --out bench-results/core.json
	$(CARGO) run --release -p stampede-net-bench -- --out bench-results/net.json
	$(PY) bench/python_bench.py --out bench-results/python.json

clean:
	$(CARGO) clean
	rm -rf $(VENV)
