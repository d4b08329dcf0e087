#!/bin/bash
# The test command: installs dependencies (install-deps.sh test: the build and runtime packages and the test
# tools), builds with AddressSanitizer + UBSan, runs every unit and integration test (CTest), prints the summary
# and every skipped test with its reason (failing on a skip no environment excuses), then runs the fuzz targets
# (scripts/fuzz.sh) whether or not a test failed.
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
rc=0
ctest --output-on-failure -j2 --timeout 900 --output-junit ctest-junit.xml || rc=$?
cd ..
# Every skipped test (a script's exit 77, or a Criterion test inside a unit suite) with its reason; a skip whose
# reason is not on scripts/ctest_skips.py's list of environments (not root, no cgroups, no network namespaces,
# an unprivileged container) fails the run: CI installs everything else the suite needs.
python3 scripts/ctest_skips.py "$BUILD/ctest-junit.xml" || rc=1
# libFuzzer targets from their seed corpora, two at a time (14 targets x 25 s / 2 = 175 s); a crash fails. They run
# whatever CTest said, so that a failing test never hides what they find; the command fails if either failed.
fuzz=0
bash scripts/fuzz.sh "${TFX_FUZZ_SECONDS:-25}" || fuzz=$?
[ "$rc" = 0 ] || exit "$rc"
exit "$fuzz"
