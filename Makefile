# The two commands a new user types: `make run` and `make test`.
BUILD_DIR ?= build
ASAN_DIR ?= build-asan
TSAN_DIR ?= build-tsan
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build run test test-asan test-tsan bench format tidy clean

all: build

deps:
	@scripts/deps.sh

$(BUILD_DIR)/build.ninja $(BUILD_DIR)/Makefile:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: deps $(BUILD_DIR)/Makefile
	@scripts/dev_cert.sh
	cmake --build $(BUILD_DIR) -j$(JOBS)

run: build
	scripts/run.sh $(BUILD_DIR)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) --timeout 300

test-asan: deps
	@scripts/dev_cert.sh
	cmake -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DTOLLGATE_SANITIZE=ON -DTOLLGATE_BENCH=OFF
	cmake --build $(ASAN_DIR) -j$(JOBS)
	cd $(ASAN_DIR) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j$(JOBS) --timeout 600

test-tsan: deps
	@scripts/dev_cert.sh
	cmake -S . -B $(TSAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DTOLLGATE_TSAN=ON -DTOLLGATE_BENCH=OFF
	cmake --build $(TSAN_DIR) -j$(JOBS)
	cd $(TSAN_DIR) && ctest --output-on-failure -j$(JOBS) --timeout 600 -L threaded

bench: build
	bench/run_all.sh $(BUILD_DIR)

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

tidy: $(BUILD_DIR)/Makefile
	clang-tidy -p $(BUILD_DIR) $$(git ls-files '*.cc')

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR)
