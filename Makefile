# The two commands: `make demo` and `make test`. Everything else is a helper.
CARGO ?= cargo
LOOM_TARGET := target/loom

.PHONY: demo test test-rust test-loom test-python test-c test-java java java-home lint lint-python bench setup python c c-programs clean

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
	@# `stampede top` is tested in a terminal tmux emulates.
	@command -v tmux >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq tmux >/dev/null; }

# The dashboard's test drives Debian's Chromium through Selenium; where it cannot be
# installed the test skips and says so.
.PHONY: browser
browser:
	@{ command -v chromium && command -v chromedriver; } >/dev/null 2>&1 || \
		{ apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; } || \
		echo "chromium could not be installed: the dashboard's browser test will be skipped"

# The fault harness's relay (bench/chaos_net.py): Toxiproxy, built from the Go module proxy.
TOXIPROXY := target/tools/toxiproxy-server
.PHONY: toxiproxy
toxiproxy: $(TOXIPROXY)
$(TOXIPROXY):
	@command -v go >/dev/null || { echo "go not found: the fault harness builds Toxiproxy with it"; exit 1; }
	@mkdir -p target/tools
	GOBIN=$(abspath target/tools) go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0
	mv target/tools/server $@

$(PY_STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q 'maturin>=1.7,<2'
	touch $@

# Rebuilds the extension (cargo decides what changed) and installs the package with its extras.
python: setup $(PY_STAMP)
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release -q -E dev

# `make demo ARGS=--dashboard` also serves the run's live web dashboard.
demo: python
	$(PY) -m stampede.demo $(ARGS)

# The same pipeline in three address spaces (processes) on this host.
.PHONY: demo-distributed
demo-distributed: python
	$(PY) -m stampede.demo --distributed

test: setup lint test-rust test-loom test-python test-c test-java

test-rust: $(TOXIPROXY)
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc
	# Local-only users leave distribution (and Zenoh) out of the facade and of the
	# coordination layer.
	$(CARGO) check -p stampede --no-default-features --all-targets
	$(CARGO) check -p stampede-coord --no-default-features --all-targets
	# The decoders' fuzz entry points (fuzz/) compile with the crates, not only on nightly.
	$(CARGO) check -p stampede-net -p stampede-cluster -p stampede-coord -p stampede-strata \
		--features fuzzing

# loom model-checks the concurrent core; it rebuilds the crate with --cfg loom, so it gets
# its own target directory.
test-loom:
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=$(LOOM_TARGET) \
		$(CARGO) test -p stampede-core --release --test 'loom_*'
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=$(LOOM_TARGET) \
		$(CARGO) clippy -p stampede-core --release --tests -- -D warnings

# The conference test runs the mixer binary with the C, Python and Java participants.
test-python: python lint-python c conference java browser $(TOXIPROXY)
	$(PY) -m pytest -q

lint-python: python
	$(PY) -m mypy
	$(PY) -m mypy.stubtest stampede._stampede --allowlist python/stubtest-allowlist.txt

lint: setup lint-python
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps

# The video-conference mixer, participants and TCP baseline (docs/conference.md).
.PHONY: conference
conference: setup
	$(CARGO) build --release -p stampede-conference

bench: python java
	$(CARGO) run --release -p stampede-bench -- --out bench-results/core.json
	$(CARGO) run --release -p stampede-net-bench -- --out bench-results/net.json
	$(PY) bench/python_bench.py --out bench-results/python.json
	$(CARGO) run --release -p stampede-conference -- bench --out bench-results/conference.json
	@$(MAKE) --no-print-directory bench-java
	@$(MAKE) --no-print-directory bench-coord
	@$(MAKE) --no-print-directory bench-experiments
	@$(MAKE) --no-print-directory bench-tune
	@$(MAKE) --no-print-directory bench-cluster
	@$(MAKE) --no-print-directory bench-apps

# The Stampede paper's application studies (bench-results/apps.json; docs/apps.md): video
# textures' analysis against its sequential baseline, the stripe sweep, workers and address
# spaces under both distributions on this host and on rate-limited emulated hosts (network
# namespaces, as root); the color tracker's two-level sweep. ARGS="--only vt|tracker".
.PHONY: bench-apps
bench-apps: python
	$(PY) bench/apps_bench.py --out bench-results/apps.json $(ARGS)

# Video textures (the Stampede paper's section VI-A) on a synthetic 316-frame clip: the
# all-pairs analysis by Stampede tasks, then a loop (demo-output/loop.mp4) and its cuts
# (demo-output/cuts.png). ARGS="--video FILE" takes a video instead (docs/apps.md).
.PHONY: video-textures
video-textures: python
	@mkdir -p demo-output
	$(PY) -m stampede.textures --out demo-output/loop.mp4 --sheet demo-output/cuts.png $(ARGS)

# The color tracker split at two levels across address spaces (the Stampede paper's Figs.
# 22-23), swept over 1, 2 and 4 inner nodes by 1 to 3 threads: Tables I-II on this host.
.PHONY: tracker-sweep
tracker-sweep: python
	$(PY) -m stampede.demo.tracker $(ARGS)

# The CableS pthreads programs (PN, PC, PIPE, SPMD) on cluster threads across three
# address spaces attached through a node agent, with the calls each made and their mean cost.
.PHONY: cluster-apps
cluster-apps: python
	$(CARGO) run --release -p stampede-cluster --example cables -- all --spaces 3
	$(PY) apps/cables.py --spaces 3
	$(MAKE) --no-print-directory c
	sh tests/c/pthreads.sh $(C_DIR)

# Cluster threads across four processes on loopback: CableS' basic-event table against
# Zenoh's own query round trip measured in the same run (bench-results/cluster.json).
.PHONY: bench-cluster
# Fuzzing, not part of `make test`: a target for every decoder that reads bytes from
# outside (fuzz/fuzz_targets), on nightly with libFuzzer. `make test-fuzz` runs each for a
# minute; `make fuzz FUZZ_SECONDS=3600 TARGETS="wire items"` for as long as asked. Both add
# to the record in bench-results/fuzz.json (docs/reliability.md).
.PHONY: fuzz-setup test-fuzz fuzz
FUZZ_SECONDS ?= 3600
TARGETS ?=
fuzz-setup:
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
test-fuzz: fuzz-setup
	python3 fuzz/run.py --seconds 60
fuzz: fuzz-setup
	python3 fuzz/run.py --seconds $(FUZZ_SECONDS) $(TARGETS)

# The fault harness, not part of `make test` (which runs 40 s of it): the channel, queue and
# register of an application across two emulated hosts joined by a Toxiproxy relay, under
# seeded faults (latency, bandwidth, stalls, resets, half-open links, partitions, tc tbf,
# SIGKILL, SIGSTOP past the lease), then a checker of every acknowledged item
# (bench/chaos.py; docs/reliability.md). SEED=N replays a run.
.PHONY: chaos
CHAOS_SECONDS ?= 600
SEED ?= 1
chaos: python $(TOXIPROXY)
	$(PY) bench/chaos.py --seconds $(CHAOS_SECONDS) --seed $(SEED)

# Miri over the unsafe code it can run (not part of `make test`: a cold run builds Miri's
# sysroot and the dependencies, about 15 minutes; a cached one takes a minute). The C API is
# driven from Rust as a C program would (crates/stampede-c/tests/miri.rs). crossbeam-epoch,
# under the executor's deques, needs tree borrows and leaks its global collector by design.
.PHONY: miri
MIRI := CARGO_TARGET_DIR=target/miri $(CARGO) +nightly miri test
miri:
	@rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^miri' || \
		rustup component add miri rust-src --toolchain nightly
	$(MIRI) -p stampede-c --lib --test miri
	MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-permissive-provenance -Zmiri-ignore-leaks" \
		$(MIRI) -p stampede-coord --lib executor::
	$(MIRI) -p stampede-net --lib -- --exact wire::tests::a_put_is_laid_out_as_documented \
		wire::tests::item_bytes_are_sent_and_received_without_a_copy \
		wire::tests::lengths_beyond_the_message_are_truncated_without_allocating
	$(MIRI) -p stampede-observe --lib process::
	$(MIRI) -p stampede-bench --lib

# Churn, not part of `make test` (which runs 20 cycles): 1,000 address spaces join a running
# application and leave, half cleanly and half by SIGKILL; its name server, watermark and
# memory must return to their baseline (bench/churn.py; bench-results/reliability.json).
.PHONY: churn
CHURN_CYCLES ?= 1000
churn: python
	$(PY) bench/churn.py --cycles $(CHURN_CYCLES)

# Soak, not part of `make test` (which runs 15 s of each mode): a producer at full speed
# against a slow consumer for ten minutes, locally and across address spaces, with memory
# sampled every second (bench/soak.py; bench-results/reliability.json and soak-*.png).
.PHONY: soak
SOAK_SECONDS ?= 600
soak: python
	$(PY) bench/soak.py --seconds $(SOAK_SECONDS)

# Supply chain, not part of `make test`: the Rust dependency graph's licences, banned
# crates and sources (deny.toml; duplicate versions are warnings), and the Python and Java
# dependencies' licences listed for review.
.PHONY: audit
audit: python
	@command -v cargo-deny >/dev/null 2>&1 || cargo install cargo-deny --locked
	@echo "advisories: not checked (the RustSec advisory database cannot be fetched here)"
	cargo deny check licenses bans sources
	$(PY) audit/licenses.py

# What a change costs the in-process throughput benchmark: the build of BASE (a commit, in
# its own target directory) and the work tree's, run alternately (bench/ab_bench.py).
.PHONY: bench-overhead
BASE ?= HEAD
bench-overhead: setup
	rm -rf target/overhead-base-src && git worktree prune
	git worktree add -f --detach target/overhead-base-src $(BASE)
	cd target/overhead-base-src && CARGO_TARGET_DIR=$(abspath target/overhead-base) \
		$(CARGO) build --release -p stampede-bench
	$(CARGO) build --release -p stampede-bench
	git worktree remove --force target/overhead-base-src
	python3 bench/ab_bench.py target/overhead-base/release/stampede-bench \
		target/release/stampede-bench --out bench-results/overhead.json

bench-cluster:
	$(CARGO) run --release -p stampede-cluster-bench -- --out bench-results/cluster.json $(ARGS)

# The auto-calibration toolkit on three sorts: calibration time and model error, selection
# cost against a memoised lookup, and a sampled selection-accuracy study
# (bench-results/tune.json); `make bench-tune ARGS=--full` runs 1000 inputs.
.PHONY: bench-tune
bench-tune:
	$(CARGO) run --release -p stampede-tune-bench -- --out bench-results/tune.json $(ARGS)

# The coordination layer against rayon, then the coordination applications against LAPACK,
# numpy, the machine's dgemm rate and the Rust Cholesky example (bench-results/coord.json).
# OpenBLAS picks its own kernel here (the variables that hold it to a safe one are unset), and
# every Python version runs on it.
.PHONY: bench-coord
bench-coord: setup python
	$(CARGO) run --release -p stampede-coord-bench -- --out bench-results/coord.json
	$(CARGO) build --release -p stampede-coord --example cholesky
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(PY) bench/coord_bench.py \
		--out bench-results/coord.json --rust-cholesky target/release/examples/cholesky

# The tiled Cholesky on Concurrent Collections, checked against its matrix (docs/cholesky.md).
.PHONY: cholesky
cholesky: python
	$(PY) apps/cholesky.py

# The applications' S-Net networks checked and drawn (Graphviz, Debian's package), with the
# inferred record types on the edges: the pictures of docs/snet.md (a test checks that the
# committed DOT is the networks' own).
.PHONY: snet-pictures
snet-pictures: python
	@command -v dot >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq graphviz >/dev/null; }
	@for f in apps/*.snet; do \
		n=$$(basename $$f .snet); \
		$(PY) -m stampede.snet $$f && \
		$(PY) -m stampede.snet --dot $$f > docs/snet/$$n.dot && \
		dot -Tsvg docs/snet/$$n.dot -o docs/snet/$$n.svg && \
		echo "  drawn: docs/snet/$$n.svg"; \
	done

# Face detection as a cascade of classifiers: sequential, static split, shared queue and CnC,
# checked against each other and the workload's truth (docs/face-detect.md).
.PHONY: face-detect
face-detect: python
	$(PY) apps/face_detect.py

# The Java face's Experiment 3: Java, Rust and Java-socket ping-pong in one run (docs/java.md).
.PHONY: bench-java
bench-java: python java
	$(CARGO) build --release -p stampede-net-bench
	JAVA_HOME=$(JAVA_HOME_FOR_FFM) $(PY) bench/java_bench.py --out bench-results/java.json

# D-Stampede's Experiments 2 (C) and 3 (Java): latency by payload with the producer on an end
# device and the consumer in the paper's three places, each against TCP in the same language
# (docs/java.md). `c` builds target/c/experiment.
.PHONY: bench-experiments
bench-experiments: python java c
	JAVA_HOME=$(JAVA_HOME_FOR_FFM) $(PY) bench/experiments_bench.py --out bench-results/experiments.json

# The C API: libstampede_c.{a,so} from cargo, the examples and the C test runner linked
# statically against it. The runner also runs under AddressSanitizer, whose leak checker
# fails the run on any leak.
C_DIR := target/c
C_HEADER := crates/stampede-c/include/stampede.h
C_LIB := target/release/libstampede_c.a
C_LIBS := -lpthread -ldl -lm -lrt -lutil -lgcc_s
C_FLAGS := -std=c11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -Icrates/stampede-c/include
# CableS' pthreads programs, each built against Stampede's pthreads face and as a plain
# pthreads program (`_native`), from the same source.
PTHREAD_PROGRAMS := pn pc pipe
PTHREAD_HEADER := crates/stampede-c/include/stampede/pthread.h
C_PROGRAMS := $(patsubst examples/c/%.c,$(C_DIR)/%,$(wildcard examples/c/*.c)) \
	$(C_DIR)/test_stampede $(C_DIR)/test_stampede_asan $(C_DIR)/pipeline_shared \
	$(C_DIR)/interop_peer $(C_DIR)/test_pthread \
	$(patsubst %,$(C_DIR)/pthreads/%,$(PTHREAD_PROGRAMS)) \
	$(patsubst %,$(C_DIR)/pthreads/%_native,$(PTHREAD_PROGRAMS))

c: setup
	$(CARGO) build --release -p stampede-c
	@$(MAKE) --no-print-directory c-programs

c-programs: $(C_PROGRAMS)

$(C_DIR)/%: examples/c/%.c $(C_HEADER) $(C_LIB)
	@mkdir -p $(C_DIR)
	$(CC) $(C_FLAGS) $< $(C_LIB) $(C_LIBS) -o $@

# The same example linked against the shared library.
$(C_DIR)/pipeline_shared: examples/c/pipeline.c $(C_HEADER) $(C_LIB)
	@mkdir -p $(C_DIR)
	$(CC) $(C_FLAGS) $< -Ltarget/release -Wl,-rpath,$(abspath target/release) -lstampede_c -o $@

$(C_DIR)/pthreads/%: examples/c/pthreads/%.c $(C_HEADER) $(PTHREAD_HEADER) $(C_LIB)
	@mkdir -p $(C_DIR)/pthreads
	$(CC) $(C_FLAGS) -DSTAMPEDE $< $(C_LIB) $(C_LIBS) -o $@

$(C_DIR)/pthreads/%_native: examples/c/pthreads/%.c
	@mkdir -p $(C_DIR)/pthreads
	$(CC) $(C_FLAGS) $< -lpthread -o $@

$(C_DIR)/test_pthread: tests/c/test_pthread.c $(C_HEADER) $(PTHREAD_HEADER) $(C_LIB)
	@mkdir -p $(C_DIR)
	$(CC) $(C_FLAGS) $< $(C_LIB) $(C_LIBS) -o $@

$(C_DIR)/test_stampede: tests/c/test_stampede.c $(C_HEADER) $(C_LIB)
	@mkdir -p $(C_DIR)
	$(CC) $(C_FLAGS) $< $(C_LIB) $(C_LIBS) -o $@

# The C side of the Java face's cross-language item test.
$(C_DIR)/interop_peer: tests/interop/peer.c $(C_HEADER) $(C_LIB)
	@mkdir -p $(C_DIR)
	$(CC) $(C_FLAGS) $< $(C_LIB) $(C_LIBS) -o $@

$(C_DIR)/test_stampede_asan: tests/c/test_stampede.c $(C_HEADER) $(C_LIB)
	@mkdir -p $(C_DIR)
	$(CC) $(C_FLAGS) -O1 -fsanitize=address -fno-omit-frame-pointer $< $(C_LIB) $(C_LIBS) -o $@

# TAP output; the last line is the summary CI reads. The C blocks of README.md and docs/ are
# compiled as whole programs with the same flags and run.
test-c: c
	$(C_DIR)/pipeline 20 200 >/dev/null
	$(C_DIR)/pipeline_shared 20 200 >/dev/null
	sh tests/c/doc_examples.sh $(C_DIR)/doc-examples "$(CC)" "$(C_FLAGS)" $(C_LIB) "$(C_LIBS)"
	$(C_DIR)/test_stampede
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 $(C_DIR)/test_stampede_asan
	sh tests/c/pthreads.sh $(C_DIR)

# The Java face (java/, docs/java.md): Maven over the C library's shared object through the
# Foreign Function & Memory API, which needs Java 22 or later. JAVA_HOME is used when it is
# one; otherwise the JDK 25 installed beside the default. Maven's repository is kept under
# target/, so after the first download the build needs no network.
JDK_FALLBACK := /usr/lib/jvm/temurin-25-jdk-amd64
JAVA_HOME_FOR_FFM = $(shell for j in "$$JAVA_HOME" $(JDK_FALLBACK) /usr/lib/jvm/*; do \
	v=$$("$$j/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/ *java.specification.version = //p'); \
	[ -n "$$v" ] && [ "$$v" -ge 22 ] 2>/dev/null && { echo "$$j"; break; }; done)
MVN = JAVA_HOME=$(JAVA_HOME_FOR_FFM) mvn -B -q -Dmaven.repo.local=$(abspath target/m2) -f java/pom.xml

java-home:
	@test -n "$(JAVA_HOME_FOR_FFM)" || { echo "no JDK 22 or later found (set JAVA_HOME)"; exit 1; }

java: c java-home
	$(MVN) -DskipTests package

# The JUnit tests, then the library's Javadoc with every doclint check (a warning fails).
test-java: c python java-home
	$(MVN) test
	$(MVN) javadoc:javadoc -pl stampede

# The Java face's whole life cycle, not part of `make test` (which runs 300 lives): LEAK_LIVES
# lives in each of three endings (all closed, the runtime closed, nothing closed) must leave
# native memory where it was (LifeCycleLeakTest; docs/reliability.md).
.PHONY: leak-java
LEAK_LIVES ?= 10000
leak-java: c java-home
	$(MVN) test -pl stampede -Dtest=LifeCycleLeakTest -Dstampede.leak.lives=$(LEAK_LIVES)

clean:
	$(CARGO) clean
	rm -rf $(VENV)
