#!/bin/bash
# Builds the libFuzzer targets (tests/fuzz) with clang in their own build dir and runs each for a bounded time
# from its committed seed corpus, two at a time. Exits non-zero if any target finds a crash, a leak, a timeout
# or an input that makes it use more than 2 GiB (RSS; a large but untouched allocation, as a dense LibSVM matrix
# or an IDX buffer sized from its header, is allowed: calloc/malloc fail cleanly with TFX_ENOMEM when the machine
# cannot hold it). The input is kept in BUILD/fuzz-artifacts/ and the report's stack is printed.
# Usage: bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 30 s; every target)
# Env: TFX_FUZZ_BUILD (build-fuzz), TFX_FUZZ_JOBS (2 targets at a time).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-30}
shift || true
BUILD=${TFX_FUZZ_BUILD:-build-fuzz}
JOBS=${TFX_FUZZ_JOBS:-2}
command -v clang >/dev/null || { echo "fuzz.sh: clang not found (scripts/install-deps.sh installs it)"; exit 1; }
cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTFX_FUZZ=ON -DTFX_TESTS=OFF \
  >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target tfx_fuzz_all >/dev/null
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(wire cluster config tfrecord idx csv libsvm ckpt safetensors rowfile rowchain where columns serve)
OUT=$BUILD/fuzz-out
mkdir -p "$OUT" "$BUILD/fuzz-artifacts"
rm -rf "$OUT/tmp" && mkdir -p "$OUT/tmp"
TMPDIR=$(cd "$OUT/tmp" && pwd) && export TMPDIR # the ckpt target keeps its checkpoint directory there
# A huge allocation fails as it does without ASan (NULL, which the code reports as TFX_ENOMEM) instead of
# aborting: a 200-byte LibSVM file may name feature 4e8, and its dense matrix then cannot be had.
# A small quarantine: freed multi-GiB chunks (touched in part) would otherwise count against the RSS limit.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}:allocator_may_return_null=1:quarantine_size_mb=64
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# run TARGET: fuzzes it for SECS seconds; new inputs go to OUT/TARGET/corpus, never to the committed seeds.
run() {
  local t=$1 corpus=$OUT/$1/corpus
  mkdir -p "$corpus"
  "$BUILD/tests/fuzz/fuzz_$t" -max_total_time="$SECS" -rss_limit_mb=2048 -malloc_limit_mb=65536 -timeout=10 \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="$BUILD/fuzz-artifacts/$t-" \
    "$corpus" "tests/fuzz/corpus/$t" >"$OUT/$t.log" 2>&1
}

pids=() names=()
for t in "${TARGETS[@]}"; do
  [ -x "$BUILD/tests/fuzz/fuzz_$t" ] || { echo "fuzz.sh: no target $t"; exit 2; }
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do sleep 0.5; done
  run "$t" &
  pids+=($!) names+=("$t")
done
failed=0
printf '%-10s %12s %10s %8s  %s\n' target execs exec/s corpus result
for i in "${!pids[@]}"; do
  t=${names[$i]} rc=0
  wait "${pids[$i]}" || rc=$?
  log=$OUT/$t.log
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
  speed=$(awk '/stat::average_exec_per_sec/ {print $2}' "$log")
  units=$(find "$OUT/$t/corpus" -type f | wc -l)
  if [ "$rc" -eq 0 ]; then
    printf '%-10s %12s %10s %8s  %s\n' "$t" "$execs" "$speed" "$units" ok
  else
    failed=1
    printf '%-10s %12s %10s %8s  %s\n' "$t" "$execs" "$speed" "$units" "FAILED (exit $rc)"
    grep -E '==ERROR|SUMMARY|Test unit written|runtime error|#[0-9]+ .* in .*/(src|tests)/' "$log" | head -20
  fi
done
[ "$failed" -eq 0 ] || { echo "fuzz.sh: a target failed; reproduce with BUILD/tests/fuzz/fuzz_TARGET ARTIFACT"; exit 1; }
echo "fuzz.sh: ${#TARGETS[@]} targets, ${SECS}s each, no crash"
