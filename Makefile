# The two commands a new user types: `make run` and `make test`.
BUILD_DIR ?= build
ASAN_DIR ?= build-asan
TSAN_DIR ?= build-tsan
FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZERS ?= request_head normalize config jwt replay
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build binary run install package test test-asan test-tsan fuzz bench format tidy clean

all: build

# scripts/deps.sh TARGET installs what TARGET needs (run, test, bench,
# fuzz); without one, everything but fuzz.
DEPS ?=

deps:
	@scripts/deps.sh $(DEPS)

$(BUILD_DIR)/build.ninja $(BUILD_DIR)/Makefile:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

# The whole tree: the binary, the tests and the benchmark programs (a build
# directory that `make run` configured gets its tests turned on).
build:
	@scripts/deps.sh $(DEPS)
	@test -f $(BUILD_DIR)/CMakeCache.txt || \
	  cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)
	@grep -q '^TOLLGATE_TESTS:BOOL=ON' $(BUILD_DIR)/CMakeCache.txt && \
	  grep -q '^TOLLGATE_BENCH:BOOL=ON' $(BUILD_DIR)/CMakeCache.txt || \
	  cmake -S . -B $(BUILD_DIR) -DTOLLGATE_TESTS=ON -DTOLLGATE_BENCH=ON
	@scripts/dev_cert.sh
	cmake --build $(BUILD_DIR) -j$(JOBS)

# Only the tollgate binary. A fresh build directory is configured without
# the tests and benchmarks, whose libraries `scripts/deps.sh run` leaves out.
binary:
	@scripts/deps.sh $(or $(DEPS),run)
	@test -f $(BUILD_DIR)/CMakeCache.txt || cmake -S . -B $(BUILD_DIR) \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOLLGATE_TESTS=OFF -DTOLLGATE_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD_DIR) -j$(JOBS) --target tollgate

run: binary
	scripts/run.sh $(BUILD_DIR)

# The binary, /etc/tollgate/tollgate.toml (under PREFIX unless it is /usr),
# the systemd unit, man pages, bash completion and documentation. DESTDIR
# stages the files elsewhere.
PREFIX ?= /usr/local
install: binary
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

# A Debian 12 package, $(BUILD_DIR)/tollgate_<version>_<arch>.deb.
package:
	@$(MAKE) --no-print-directory binary DEPS=package
	cd $(BUILD_DIR) && cpack -G DEB

test:
	@$(MAKE) --no-print-directory build DEPS=test
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) --timeout 300

test-asan:
	@scripts/deps.sh test
	@scripts/dev_cert.sh
	cmake -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DTOLLGATE_SANITIZE=ON -DTOLLGATE_BENCH=OFF
	cmake --build $(ASAN_DIR) -j$(JOBS)
	cd $(ASAN_DIR) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j$(JOBS) --timeout 600

test-tsan:
	@scripts/deps.sh test
	@scripts/dev_cert.sh
	cmake -S . -B $(TSAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DTOLLGATE_TSAN=ON -DTOLLGATE_BENCH=OFF
	cmake --build $(TSAN_DIR) -j$(JOBS)
	cd $(TSAN_DIR) && ctest --output-on-failure -j$(JOBS) --timeout 600 -L threaded

# libFuzzer targets of fuzz/ (clang 14, ASan + UBSan), FUZZ_SECONDS each.
fuzz:
	@scripts/deps.sh fuzz
	cmake -S . -B $(FUZZ_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 -DTOLLGATE_FUZZ=ON -DTOLLGATE_TESTS=OFF -DTOLLGATE_BENCH=OFF
	cmake --build $(FUZZ_DIR) -j$(JOBS) --target $(addprefix fuzz_,$(FUZZERS))
	fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZERS)

bench:
	@$(MAKE) --no-print-directory build DEPS=bench
	bench/run_all.sh $(BUILD_DIR)

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

tidy: $(BUILD_DIR)/Makefile
	clang-tidy -p $(BUILD_DIR) $$(git ls-files '*.cc')

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR) $(FUZZ_DIR)
