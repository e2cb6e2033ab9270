# pool: build, demo and test entry points. `make demo` and `make test` are the contract.
#
#   make            build libpool.a and libpool.so (target/release/)
#   make header     copy the generated header over include/pool.h (check-header compares)
#   make demo       build everything and run a real workload on the pool from C
#   make test       every test: Rust, C, C++, Zig, loom, shuttle, Miri, sanitizers, no_std builds,
#                   install, header freshness, the benchmark crate compiles (bounded: CI
#                   runs exactly this). It first runs `make tools`, which installs what the
#                   suites need or fails naming it: no suite is skipped.
#   make verify     the long versions (soak, more loom preemptions, 10x shuttle iterations and
#                   the shuttle plants, longer sanitizer runs)
#   make bench      the peer benchmarks (bench/), results into BENCHMARKS.md
#   make install PREFIX=...   header, libpool.a, libpool.so, pool.pc, pool-static.pc, CMake package (mk/embed.mk)

CARGO   ?= cargo
CC      ?= cc
CXX     ?= c++
BUILD   := build
LIB     := target/release/libpool.a
HEADER  := include/pool.h
LDLIBS  := -lpthread -ldl -lm
CFLAGS  ?= -O2 -g
CWARN   := -Wall -Wextra -Werror -pedantic
C_TESTS := $(patsubst c_tests/%.c,$(BUILD)/%,$(wildcard c_tests/*.c))
CXX_TESTS := $(patsubst c_tests/%.cpp,$(BUILD)/%,$(wildcard c_tests/*.cpp))

.PHONY: all lib header check-header test-package test-header test-abi demo test test-bench test-layers test-plants-apply test-clippy test-cycles test-fuzz test-rust test-doc test-miri-doc test-c test-c-valgrind test-c-frees test-external test-c-asan test-tsan verify-tsan-loop test-loom test-shuttle verify-plants test-nostd test-miri clean bench verify
all: lib

# libpool.a and libpool.so in one `cargo rustc` run (not [lib] crate-type, which breaks no_std
# cross builds). The cdylib exports only the #[no_mangle] `pool_*` functions (rustc's own export
# list; `make test-install` checks `nm -D`) and carries the soname libpool.so.MAJOR. build.rs
# generates the header into OUT_DIR; the build copies it to $(GEN_HEADER) (never into the
# source tree): `make header` copies that to include/pool.h, `make check-header` compares.
POOL_VERSION := $(shell sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)
POOL_MAJOR   := $(word 1,$(subst ., ,$(POOL_VERSION)))
SOLIB        := target/release/libpool.so
SONAME       := libpool.so.$(POOL_MAJOR)
GEN_HEADER   := target/release/include/pool.h
lib: $(LIB)
$(LIB) $(SOLIB) $(GEN_HEADER) &: $(shell find src -name '*.rs') Cargo.toml build.rs cbindgen.toml
	@mkdir -p $(dir $(GEN_HEADER))
	$(CARGO) rustc --release --lib --features capi --crate-type staticlib,cdylib \
	  --message-format=json-render-diagnostics -- -C link-arg=-Wl,-soname,$(SONAME) > target/release/capi-build.json
	@out=$$(sed -n 's/.*"reason":"build-script-executed","package_id":"[^"]*[#/]stealpool[@#][^"]*".*"out_dir":"\([^"]*\)".*/\1/p' \
	  target/release/capi-build.json | tail -n 1); \
	  [ -f "$$out/pool.h" ] || { echo "no pool.h in the build script's OUT_DIR ($$out)"; exit 1; }; \
	  cp "$$out/pool.h" $(GEN_HEADER)
	@touch $(LIB) $(SOLIB) $(GEN_HEADER)

# Copies the generated header over the committed one (the only target that writes it).
header: $(GEN_HEADER)
	cp $(GEN_HEADER) $(HEADER)

# Fails when include/pool.h differs from what cbindgen generates now.
check-header: $(GEN_HEADER)
	@diff -u $(HEADER) $(GEN_HEADER) && echo "include/pool.h is up to date" \
	  || (echo "include/pool.h is stale: run 'make header' and commit it"; exit 1)

$(BUILD)/%: c_tests/%.c c_tests/common.h $(LIB) $(HEADER)
	@mkdir -p $(BUILD)
	$(CC) -std=c11 $(CFLAGS) $(CWARN) -Iinclude $< $(LIB) $(LDLIBS) -o $@

# job_exported.c includes job.c.
$(BUILD)/job_exported: c_tests/job.c

$(BUILD)/%: c_tests/%.cpp c_tests/common.h $(LIB) $(HEADER)
	@mkdir -p $(BUILD)
	$(CXX) -std=c++17 $(CFLAGS) -Wall -Wextra -Werror -Iinclude $< $(LIB) $(LDLIBS) -o $@

$(BUILD)/demo: examples/c/demo.c $(LIB) $(HEADER)
	@mkdir -p $(BUILD)
	$(CC) -std=c11 -O2 $(CWARN) -Iinclude $< $(LIB) $(LDLIBS) -o $@

demo: $(BUILD)/demo
	./$(BUILD)/demo

# The header compiles warning-free (-Wall -Wextra -pedantic -Werror) as C99, C11 and C++11,
# and documents every declaration (scripts/check-header-docs.sh).
$(BUILD)/header_c99.o $(BUILD)/header_c11.o: $(BUILD)/header_%.o: $(HEADER)
	@mkdir -p $(BUILD)
	printf '#include "pool.h"\nint pool_header_$*_check;\n' | $(CC) -std=$* $(CWARN) -Iinclude -x c -c - -o $@
$(BUILD)/header_cxx.o: $(HEADER)
	@mkdir -p $(BUILD)
	printf '#include "pool.h"\nint pool_header_cxx_check;\n' | $(CXX) -std=c++11 $(CWARN) -Iinclude -x c++ -c - -o $@
test-header: $(BUILD)/header_c99.o $(BUILD)/header_c11.o $(BUILD)/header_cxx.o
	sh scripts/check-header-docs.sh $(HEADER)

test-c: $(C_TESTS) $(CXX_TESTS) test-header
	@set -e; for t in $(C_TESTS) $(CXX_TESTS); do echo "== $$t"; ./$$t; done

# The C programs under valgrind memcheck at 1% scale. The global pool's threads live until
# exit by design, so only definite leaks count. valgrind runs one thread at a time; with its
# default lock a thread that never blocks (a job.c worker forking in a loop until another
# worker takes its job) can keep a woken thread from ever running, so its scheduler is made fair.
VALGRIND := valgrind -q --fair-sched=yes --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite
test-c-valgrind: $(C_TESTS) $(CXX_TESTS) tool-valgrind
	@set -e; for t in $(C_TESTS) $(CXX_TESTS); do echo "== valgrind $$t"; \
	  POOL_TEST_SCALE=0.01 $(VALGRIND) ./$$t > $(BUILD)/valgrind-$$(basename $$t).log 2>&1 \
	  || { cat $(BUILD)/valgrind-$$(basename $$t).log; exit 1; }; tail -n 1 $(BUILD)/valgrind-$$(basename $$t).log; done

# A program that creates, uses and destroys its own pools frees every block the library
# allocated: valgrind's allocation and free counts must match (no block left at exit, "still
# reachable" included), as suites that compare the two expect (c_tests/lifecycle.c).
test-c-frees: $(BUILD)/lifecycle tool-valgrind
	valgrind -q --fair-sched=yes --error-exitcode=1 --leak-check=full --show-leak-kinds=all \
	  --errors-for-leak-kinds=all ./$(BUILD)/lifecycle > $(BUILD)/frees.log 2>&1 || { cat $(BUILD)/frees.log; exit 1; }
	@valgrind --fair-sched=yes ./$(BUILD)/lifecycle 2>&1 | grep -E "in use at exit|total heap usage" \
	  | tee $(BUILD)/frees-summary.log; grep -q "in use at exit: 0 bytes in 0 blocks" $(BUILD)/frees-summary.log

# Programs nobody here wrote, on this library, their thread pools replaced by queues
# (c_tests/external/): zstd, checked by its own pool test (also under valgrind) and against the
# same sources built with zstd's pool (byte-identical multi-threaded output, round trips,
# dictionary training); lz4, checked against the same sources built with lz4's pool
# (byte-identical multi-threaded output, round trips) and by its own test scripts; libuv,
# checked by its whole test suite (thread pool work and cancel, fs, DNS, fork) against libuv
# built with its own pool; Samba's pthreadpool on a blocking pool, checked by Samba's own tests
# of it (jobs, busy destroy, fork, thread starts that fail). Fetches their sources from
# Debian's archive once (SHA-256 checked) into target/external/; ~2 min.
test-external: $(LIB) tool-valgrind tool-cmake tool-samba-deps
	CC="$(CC)" sh scripts/external-zstd.sh $(LIB)
	CC="$(CC)" sh scripts/external-lz4.sh $(LIB)
	CC="$(CC)" CMAKE="$$(sh scripts/tools.sh cmake-path)" sh scripts/external-libuv.sh $(LIB)
	CC="$(CC)" sh scripts/external-samba.sh $(LIB)

# The exhaustive model of the waking protocol (`every_reachable_state`, ~60 s) runs once: it
# does not depend on the features.
test-rust:
	$(CARGO) test --release
	$(CARGO) test --release --no-default-features --lib -- --skip every_reachable_state
	$(CARGO) test --release --features capi,net -- --skip every_reachable_state

# The C programs built with gcc's AddressSanitizer + UBSan (instruments the C side; the Rust
# inside libpool.a is covered by TSan/Miri below), at 10% scale.
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
test-c-asan: $(LIB) $(HEADER)
	@mkdir -p $(BUILD)/asan
	@set -e; for src in $(wildcard c_tests/*.c); do t=$(BUILD)/asan/$$(basename $$src .c); \
	  $(CC) -std=c11 -O1 -g $(CWARN) $(ASAN_FLAGS) -Iinclude $$src $(LIB) $(LDLIBS) -o $$t; \
	  echo "== asan $$t"; POOL_TEST_SCALE=0.1 ASAN_OPTIONS=detect_leaks=1 ./$$t > $$t.log 2>&1 \
	  || { cat $$t.log; exit 1; }; tail -n 1 $$t.log; done

# ThreadSanitizer over the Rust stress and fault tests, the timers and I/O tests, the queues (on
# the pool and on target queues) and the live thread count (nightly, std rebuilt instrumented; tests/elastic.rs under it found
# the lost wake-up of VERIFY.md's "one notification shared by several submits").
TSAN_SCALE ?= 0.05
test-tsan: tool-nightly
	RUSTFLAGS="-Zsanitizer=thread" RUSTDOCFLAGS="-Zsanitizer=thread" POOL_STRESS_SCALE=$(TSAN_SCALE) \
	  $(CARGO) +nightly test -Zbuild-std --target x86_64-unknown-linux-gnu --target-dir target/tsan \
	  --release --features net --test stress --test faults --test latch --test context --test runtime \
	  --test blocking --test timers --test io_driver --test net --test elastic --test queues \
	  --test target_queues

# The TSan build of the stress, latch, context, runtime, timers and blocking tests, TSAN_RUNS
# times in a row at POOL_STRESS_SCALE=0.05: a lost wake-up that shows once in tens of runs
# (each test has a watchdog, so a hang fails that run) fails this loop. Built once; each run
# executes the test binaries directly. `make verify` runs 300.
TSAN_RUNS ?= 300
TSAN_LOOP_TESTS := stress latch context runtime timers blocking
verify-tsan-loop: tool-nightly
	RUSTFLAGS="-Zsanitizer=thread" $(CARGO) +nightly test -Zbuild-std --target x86_64-unknown-linux-gnu \
	  --target-dir target/tsan --release $(foreach t,$(TSAN_LOOP_TESTS),--test $(t)) --no-run
	@set -e; bins=""; for t in $(TSAN_LOOP_TESTS); do \
	  b=$$(ls -t target/tsan/x86_64-unknown-linux-gnu/release/deps/$$t-* | grep -v '\.d$$' | head -n 1); bins="$$bins $$b"; done; \
	for i in $$(seq 1 $(TSAN_RUNS)); do for b in $$bins; do \
	  POOL_STRESS_SCALE=0.05 $$b -q > target/tsan/loop.log 2>&1 || { cat target/tsan/loop.log; echo "TSan loop: run $$i of $(TSAN_RUNS) failed ($$b)"; exit 1; }; \
	done; echo "TSan loop: run $$i of $(TSAN_RUNS) ok"; done

# The loom models: a `loom` module beside the code each one checks, compiled only under
# cfg(all(test, loom)); under --cfg loom the library's other unit tests are compiled out, and the
# `loom` filter names exactly the models.
test-loom:
	RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 $(CARGO) test --release --target-dir target/loom --lib loom

# Randomised schedules (shuttle's PCT at depth 4-6, and its uniform random scheduler) over whole
# pools, in the places where wake-ups were lost before (`mod shuttle` beside the code; VERIFY.md,
# "Shuttle scenarios"). Each scenario prints its iterations and time. `make verify`: 10x the
# iterations (POOL_SHUTTLE_SCALE), then `verify-plants`: every plant in scripts/plants/shuttle/
# (a lost wake-up or hang of VERIFY.md's bug table, re-created in today's code) must be caught,
# as must those of ordinary tests (scripts/plants/tests/, both by patches.py) and of the
# protocol model (protocol_table.py).
SHUTTLE_SCALE ?= 1
test-shuttle:
	@echo "test-shuttle: POOL_SHUTTLE_SCALE=$(SHUTTLE_SCALE) (iterations per scenario below)"
	RUSTFLAGS="--cfg shuttle" POOL_SHUTTLE_SCALE=$(SHUTTLE_SCALE) $(CARGO) test --release --lib \
	  --target-dir target/shuttle shuttle_ -- --nocapture

verify-plants:
	python3 scripts/plants/patches.py
	python3 scripts/plants/protocol_table.py

# Every plant above still applies to today's code (no build, no run: about a second).
test-plants-apply:
	python3 scripts/plants/patches.py --apply-check
	python3 scripts/plants/protocol_table.py --apply-check

# Miri over the unit tests (strict provenance) and the smoke test (sizes shrink under cfg(miri)).
test-miri: tool-miri
	@set -e; MIRIFLAGS=-Zmiri-strict-provenance $(CARGO) +nightly miri test --target-dir target/miri --lib; \
	$(CARGO) +nightly miri test --target-dir target/miri --test smoke

# The benchmark crate (harness, examples, C programs' build script) still compiles against the
# library: `cargo check`, which builds no optimised code (seconds), so nothing there rots
# between `make bench` runs.
# BENCHMARKS.md is what `make bench` writes (bench/NOTES.md + the fresh tables): figures written
# straight into BENCHMARKS.md would be lost at the next `make bench`, so they fail here instead.
test-bench:
	$(CARGO) check --manifest-path bench/Cargo.toml --all-targets
	@cat bench/NOTES.md bench/results/latest.md | cmp -s - BENCHMARKS.md || { echo "test-bench:" \
	  "BENCHMARKS.md differs from bench/NOTES.md + bench/results/latest.md: write notes into" \
	  "bench/NOTES.md (make bench rebuilds BENCHMARKS.md from them)"; exit 1; }

# The layer check (scripts/layers.py, standard-library Python, under a second): every path between
# the files of src/ resolved to the file that defines the item and checked against ARCHITECTURE.md's
# module map (no import into a higher layer, no cycle among modules or among one module's files,
# lib.rs only mod and pub use, no file over 600 lines, inherent impls in their type's module, every
# atomic through the `sync` shim). The
# self-test first: it plants each kind of violation in small crates and fails unless each is caught.
# `--edges` / `--units` print what it resolved. First in `make test`: it needs no build.
test-layers:
	python3 scripts/layers.py --self-test && python3 scripts/layers.py

# Clippy with every warning an error, on every target with every feature: among its lints
# (Cargo.toml [lints]) `undocumented_unsafe_blocks`, so an unsafe block without its `// SAFETY:`
# line fails here, not in review.
test-clippy:
	sh scripts/tools.sh clippy
	$(CARGO) clippy --release --features capi,net --all-targets -- -D warnings

# The API docs: rustdoc with every warning an error (broken links, links to private items),
# then every doc example (README's Rust examples included) as a test.
test-doc:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --features capi
	$(CARGO) test --release --doc --features capi

# The doc examples under Miri (isolation off: some read files). Examples on the process-wide
# pools (files named global.rs) leave those pools' threads running at exit, by design: they
# run in a second pass that ignores leaks. About 3 minutes on 2 cores.
test-miri-doc: tool-miri
	@set -e; MIRIFLAGS=-Zmiri-disable-isolation $(CARGO) +nightly miri test --target-dir target/miri --doc -- --skip /global.rs; \
	MIRIFLAGS="-Zmiri-disable-isolation -Zmiri-ignore-leaks" $(CARGO) +nightly miri test --target-dir target/miri --doc -- /global.rs

NOSTD_TARGETS := thumbv7em-none-eabihf
test-nostd: tool-targets
	@for t in $(NOSTD_TARGETS); do echo "== no_std $$t"; \
	  $(CARGO) rustc --lib --crate-type rlib --no-default-features --target $$t -- -D warnings || exit 1; done
	$(CARGO) rustc --lib --crate-type rlib --no-default-features --features single-core --target thumbv6m-none-eabi -- -D warnings
	$(CARGO) rustc --lib --crate-type rlib --no-default-features --features single-core --target riscv32imc-unknown-none-elf -- -D warnings

# c_tests/cycles.c with POOL_CYCLES create/submit/destroy cycles: the thread count exact after
# every pool_destroy and the heap in use (mallinfo2) back within a fixed slack; then the same
# program under LeakSanitizer (gcc -fsanitize=leak, no ASan slow-down). `make verify`: 1000.
# The LeakSanitizer run does LSAN_CYCLES (~430 threads created in all): gcc 12's LeakSanitizer
# keeps one table slot per thread ever created and moves the table when the 513th is created,
# while any other thread's malloc reads it without a lock (a SEGV inside LeakSanitizer in ~1
# run in 10 at 200 cycles, ~900 threads; every run of a 520-thread C program that mallocs on
# a second thread). A leak shows in any cycle, so fewer cycles lose nothing.
CYCLES ?= 200
LSAN_CYCLES ?= 20
test-cycles: $(BUILD)/cycles tool-lsan
	POOL_CYCLES=$(CYCLES) ./$(BUILD)/cycles
	@mkdir -p $(BUILD)/lsan
	@set -e; $(CC) -std=c11 -O1 -g $(CWARN) -fsanitize=leak -fno-omit-frame-pointer -Iinclude c_tests/cycles.c \
	  $(LIB) $(LDLIBS) -o $(BUILD)/lsan/cycles; \
	echo "== lsan $(BUILD)/lsan/cycles"; POOL_CYCLES=$(LSAN_CYCLES) ./$(BUILD)/lsan/cycles

# The cargo-fuzz target (fuzz/, its own workspace): random programs of C API calls under ASan
# and LeakSanitizer, checking status codes and exact-once (see VERIFY.md). New inputs go to
# fuzz/corpus/ (git-ignored); the seeds in fuzz/seeds/ are committed. `make verify`: 10 min.
FUZZ_SECONDS ?= 60
FUZZ_FLAGS    = -max_total_time=$(FUZZ_SECONDS) -seed=1 -max_len=512 -timeout=30 -print_final_stats=1
test-fuzz: tool-fuzz
	@mkdir -p fuzz/corpus/capi_ops $(BUILD); \
	$(CARGO) +nightly fuzz run capi_ops \
	  fuzz/corpus/capi_ops fuzz/seeds/capi_ops -- $(FUZZ_FLAGS)

# The crate as crates.io would get it: `cargo package` with its verify build (a build of the
# packaged sources alone, default features) and the same with the C API (cbindgen in OUT_DIR).
test-package:
	$(CARGO) package --allow-dirty --quiet
	$(CARGO) package --allow-dirty --quiet --no-verify --features capi
	cd target/package/stealpool-$(POOL_VERSION) && $(CARGO) build --quiet --features capi --target-dir ../../package-capi

# c_tests/abi.c, built against include/pool.h, run against a library whose structs have grown
# by a field (scripts/abi-grown.sh; ~30 s on 2 cores).
test-abi: $(HEADER)
	CC="$(CC)" CARGO="$(CARGO)" sh scripts/abi-grown.sh $(BUILD)/abi-grown

test: test-layers test-plants-apply tools test-clippy check-header test-rust test-doc test-c test-c-asan test-c-valgrind test-c-frees test-external test-loom test-shuttle test-miri test-miri-doc test-tsan test-nostd test-nostd-example test-zig test-cycles test-fuzz test-install test-package test-abi test-bench
	@echo "make test: all green"

verify: test
	$(MAKE) test-tsan TSAN_SCALE=1
	$(MAKE) verify-tsan-loop TSAN_RUNS=300
	$(MAKE) test-fuzz FUZZ_SECONDS=600
	$(MAKE) test-cycles CYCLES=1000
	POOL_SOAK_TASKS=100000000 $(CARGO) test --release --test stress soak_1e8 -- --ignored --nocapture
	POOL_STRESS_SCALE=20 $(CARGO) test --release --test stress
	RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 $(CARGO) test --release --target-dir target/loom --lib loom
	POOL_PROTOCOL_FULL=1 $(CARGO) test --release --lib every_reachable_state
	$(MAKE) test-shuttle SHUTTLE_SCALE=10
	$(MAKE) verify-plants

# Every workload of bench/README.md (the design brief's BENCH.md) against the peers (progress
# on stderr), then the ratio chart, then
# BENCHMARKS.md = bench/NOTES.md (figures measured by other means) + the fresh tables.
# libpool.a first: the c_spawn workload's C program links it (bench/build.rs). The chart needs
# matplotlib (bench/requirements.txt): checked first, never installed silently.
BENCH_RUNS ?= 5
bench: $(LIB)
	@python3 -c 'import matplotlib' 2>/dev/null || { echo "make bench: the chart needs matplotlib:" \
	  "python3 -m pip install -r bench/requirements.txt (nothing is installed for you)"; exit 1; }
	@mkdir -p bench/results
	$(CARGO) run --release --manifest-path bench/Cargo.toml -- all --runs $(BENCH_RUNS) \
	  --markdown bench/results/latest.md --json bench/results/latest.json
	python3 bench/plot.py bench/results/latest.json bench/results/ratios.png
	cat bench/NOTES.md bench/results/latest.md > BENCHMARKS.md
	@echo "wrote BENCHMARKS.md and bench/results/ratios.png"

clean:
	$(CARGO) clean
	rm -rf $(BUILD)

include mk/embed.mk
include mk/tools.mk
