#!/bin/bash
# No leaks in a short cluster run: a master, 2 ps and 2 workers started directly from TF_CONFIG (so that each
# one's own exit status is seen, not the supervisor's) train 300 steps with a checkpoint and an evaluation,
# and every one exits 0 after the master's stop. In the ASan build (CI) LeakSanitizer checks each process at
# exit and makes it exit non-zero on a leak; in a build without ASan, ps 0 and worker 0 run under
# valgrind --leak-check=full --error-exitcode=1 instead (skipped if valgrind is missing).
. "$(dirname "$0")/lib.sh"
experiment "$WORK/exp.json" training.max_steps=300 eval.every_steps=150 checkpoint.every_steps=150 \
  training.report_every=50 cluster.request_timeout_s=60 cluster.register_timeout_s=120
if ldd "$TFX_NODE" | grep -q libasan; then
  checker=LeakSanitizer
  VG=()
elif command -v valgrind >/dev/null; then
  checker=valgrind
  VG=(valgrind --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect
      --error-exitcode=1 --quiet)
else
  skip "neither an ASan build nor valgrind"
fi
ports=()
for _ in 1 2 3 4 5; do ports+=("$(free_port)"); done
cluster="\"chief\":[\"127.0.0.1:${ports[0]}\"],\"ps\":[\"127.0.0.1:${ports[1]}\",\"127.0.0.1:${ports[2]}\"],\"worker\":[\"127.0.0.1:${ports[3]}\",\"127.0.0.1:${ports[4]}\"]"
declare -A PID_OF
start() { # TYPE INDEX [wrapper...]
  local type=$1 index=$2; shift 2
  TF_CONFIG="{\"cluster\":{$cluster},\"task\":{\"type\":\"$type\",\"index\":$index}}" \
    "$@" "$TFX_NODE" --config "$WORK/exp.json" --run-dir "$WORK/run" --fresh >"$WORK/$type-$index.log" 2>&1 &
  PID_OF[$type-$index]=$!
  PIDS+=($!)
}
start ps 0 "${VG[@]}"
start ps 1
start worker 0 "${VG[@]}"
start worker 1
start chief 0
for t in chief-0 ps-0 ps-1 worker-0 worker-1; do
  wait_exit 400 "${PID_OF[$t]}"; rc=$?
  [ "$rc" = 0 ] || fail "$t exited $rc under $checker: $(cat "$WORK"/sanitizer/* 2>/dev/null | grep -A12 -m1 'LeakSanitizer'; grep -A12 -m1 'LeakSanitizer\|definitely lost\|ERROR' "$WORK/$t.log")"
done
grep -l "LeakSanitizer\|definitely lost" "$WORK"/*.log "$WORK"/sanitizer/* 2>/dev/null && fail "a leak report in a log"
step=$(metric "$WORK/run/metrics.jsonl" eval step)
[ "$step" = 300 ] || fail "the run ended at step $step"
pass "master, 2 ps and 2 workers ran 300 steps and exited 0 with no leak ($checker)"
