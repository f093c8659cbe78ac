# Thin wrapper around CMake: `make run`, `make test`, `make bench`.
BUILD ?= build
JOBS ?= $(shell nproc)
SANITIZE ?= 0
ifeq ($(SANITIZE),1)
BUILD := build-asan
CMAKE_FLAGS += -DWEFT_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
endif
# CI builds with warnings as errors (the house rule: no warnings under -Wall -Wextra).
ifeq ($(CI),true)
CMAKE_FLAGS += -DWEFT_WERROR=ON
endif
export BUILD_DIR := $(BUILD)
# One Python venv (6 GB with torch) serves every build directory.
export WEFT_VENV ?= $(CURDIR)/build/venv
# Python packages for the interop tests (pytest) and the reference checks:
# paddlepaddle (CPU): pip install ~30 s here, ~720 MB; tests/python/test_paddle.py.
# warp-lang (~390 MB): NVIDIA Warp itself and its .nvdb test assets, which
# spec/volume_warp_spec.lua and tests/python/test_volume_warp.py compare
# against (pending or skipped without it); bench times it too.
PY_TEST_PKGS ?= numpy pytest torch jax paddlepaddle warp-lang
PY_BENCH_PKGS ?=

# make fuzz: the libFuzzer harnesses (tests/fuzz) in a clang-16 build for
# FUZZ_SECONDS in all (shared by front, gen, ir, dlpack); new inputs
# collect in $(FUZZ_BUILD)/fuzz-corpus, crashes in $(FUZZ_BUILD)/fuzz-artifacts.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 1200

.PHONY: all deps deps-run deps-bench build run install test test-ptx-all test-lua test-c test-python bench clean format format-check lint fuzz warp-ref docs docs-shot

all: build

# deps-run: what building and running needs (no Python packages); deps:
# also the test tools and the interop tests' Python packages.
deps-run:
	@WEFT_DEPS=run scripts/install-deps

deps:
	@WEFT_PY_PKGS="$(PY_TEST_PKGS)" scripts/install-deps

deps-bench:
	@WEFT_PY_PKGS="$(PY_TEST_PKGS) $(PY_BENCH_PKGS)" scripts/install-deps

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps-run $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# only the library and the CLI (the C tests and examples build with make test)
run: deps-run $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target weft_cli
	$(BUILD)/weft examples/hello.lua

# The library, weft.h, the CLI, the Lua layer, weft.pc and the CMake package
# (PREFIX=/opt/weft for another prefix than CMake's /usr/local).
install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

test: deps build
	@scripts/run-tests $(BUILD)

# make test with the suite step compiling every kernel module for sm_75,
# sm_80 and sm_90 (make test compiles a cover of them; spec/suite/ir_suite.lua)
test-ptx-all: deps build
	@WEFT_PTX_SUITE_ALL=1 scripts/run-tests $(BUILD)

fuzz: deps
	@JOBS=$(JOBS) scripts/run-fuzz $(FUZZ_BUILD) $(FUZZ_SECONDS) keep

bench: build deps-bench
	@scripts/run-bench $(BUILD)

# Warp's CPU outputs for the ported cases (tests/warp/ref.lua) and the
# random-number spec, rewritten with warp-lang (make deps installs it).
warp-ref: deps-bench
	$(WEFT_VENV)/bin/python tests/warp/gen_ref.py tests/warp/ref.lua
	$(WEFT_VENV)/bin/python spec/helpers/warp_rand_ref.py | grep -E '^-- gen|^return' > spec/helpers/warp_rand_ref.lua
	$(WEFT_VENV)/bin/python spec/helpers/warp_volume_ref.py spec/helpers/warp_volume_ref.lua

# The reference (docs/*.md) as one static HTML page.
DOC_PAGES = index kernels builtins arrays autodiff devices geometry c python from-lua from-warp
docs: deps-run
	@mkdir -p $(BUILD)/docs
	@luajit scripts/docs-html.lua $(BUILD)/docs/index.html $(DOC_PAGES:%=docs/%.md)

# The page as headless Chromium renders it, $(BUILD)/docs/shot.png
# (WEFT_DEPS=docs scripts/install-deps installs Chromium).
docs-shot: docs
	@WEFT_DEPS=docs scripts/install-deps
	@chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1600 \
	  --screenshot=$(abspath $(BUILD))/docs/shot.png file://$(abspath $(BUILD))/docs/index.html 2>/dev/null

# Static checks of the Lua layer (settings in .luacheckrc).
lint:
	luacheck lua/

# C formatting (settings in .clang-format); format-check changes nothing and
# fails on any difference (part of make test).
C_SOURCES = $(wildcard include/*.h src/*/*.c src/*/*.h examples/*.c tests/c/*.c tests/c/*.h tests/fuzz/*.c tests/cuda/emu/*.c)
format:
	clang-format -i $(C_SOURCES)

format-check:
	@clang-format --dry-run --Werror $(C_SOURCES) && echo "format-check: $(words $(C_SOURCES)) files formatted"

clean:
	rm -rf build build-asan
