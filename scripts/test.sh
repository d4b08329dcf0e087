#!/bin/bash
# The test command: installs dependencies (install-deps.sh test: the build and runtime packages and the test
# tools), builds with AddressSanitizer + UBSan, runs every unit and integration test (CTest), prints the summary,
# then runs the fuzz targets (scripts/fuzz.sh).
# Usage: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh test
BUILD=${TFX_TEST_BUILD:-build-test}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTFX_SANITIZE=ON >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$BUILD"
ctest --output-on-failure -j2 --timeout 900
cd ..
# libFuzzer targets from their seed corpora, two at a time (8 targets x 25 s / 2 = 100 s); a crash fails.
bash scripts/fuzz.sh "${TFX_FUZZ_SECONDS:-25}"
