#!/bin/bash
# Both ps killed at once with replicas on (#47, item 5): kill -9 of ps 0 and ps 1 together (the workers held, so
# that no step runs between the two deaths) at step 2/5 of an MLP run (2 ps, 2 workers, seed 7, a checkpoint every
# 100 steps), sync with training.deterministic, and async. Every instance lost its primary and its backup: the chief
# rolls every ps back to the newest checkpoint and says so (MASTER-PS-LOST "... and so did its backup"), the
# workers read their data again from there (WORKER-REWIND) within 10 s of it, and each run ends at max_steps with
# exit 0, the sync one with weights bit-identical to the undisturbed run's. It stalled 60 s and more in 4 of 4 tries
# (test_replicas_both kills them unheld and checks the end, not the weights or the stall).
. "$(dirname "$0")/lib.sh"
MAX=${TFX_BOTH_STEPS:-600}
small_mlp "$WORK/mlp.json" training.report_every=10 eval.every_steps=0
# run LABEL MODE [VICTIM...]: the run in training.mode MODE, with kill -9 of the VICTIMs (ps:K) at once at step 2/5
run() {
  local name=$1 mode=$2 run=$WORK/$1 lp
  shift 2
  start_local "$name" --config "$WORK/mlp.json" --run-dir "$run" --ps 2 --workers 2 --max-steps $MAX \
    --set cluster.replicas=1 --set training.mode="\"$mode\"" --set training.deterministic=true --set training.seed=7 \
    --set checkpoint.every_steps=100 --set checkpoint.every_secs=0 --set cluster.request_timeout_s=20
  lp=$LP
  [ $# = 0 ] || kill_at "$WORK/$name.log" "$run" "$lp" step $((MAX * 2 / 5)) "$@" >"$WORK/$name.kill"
  wait_and_digest "$name" "$lp" "$run" 240
  grep -q "^done: step $MAX," "$WORK/$name.log" ||
    fail "$name: did not end at step $MAX: $(grep -a '^done:' "$WORK/$name.log") (last train record at $(metric "$run/metrics.jsonl" train step))"
}
# rolled_back_to LABEL MODE: the step the run LABEL was rolled back to, named (MASTER-PS-LOST), every worker rewound
# to it
rolled_back_to() {
  local R=$WORK/$1 back w
  grep -q 'MASTER-PS-LOST.*and so did its backup' "$R/logs/master-0.log" ||
    fail "$1: the roll-back was not named ($(cat "$WORK/$1.kill")): $(grep -h 'MASTER-' "$R/logs/master-0.log" | tail -5)"
  back=$(sed -n 's/.*MASTER-RESUME resuming from .*ckpt-0*\([0-9]*\) at step .*/\1/p' "$R/logs/master-0.log" | tail -1)
  [ -n "$back" ] || fail "$1: no MASTER-RESUME after the roll-back: $(grep -h 'MASTER-' "$R/logs/master-0.log" | tail -5)"
  # sync: every worker rewinds to that step; async: to that step or a little past it (the other worker may push
  # between the roll-back and this worker's pull), never past the step of the kill
  local kill_step
  kill_step=$(sed -n 's/.* at step \([0-9]*\).*/\1/p' "$WORK/$1.kill" | head -1)
  for w in 0 1; do
    python3 - "$R/logs/worker-$w.log" "$back" "${kill_step:-$MAX}" "$2" <<'PY' ||
import re, sys
log, back, kill, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
steps = [int(m.group(1)) for m in re.finditer(r"WORKER-REWIND the cluster went back to step (\d+)", open(log).read())]
ok = [s for s in steps if s == back or (mode == "async" and back <= s < kill)]
sys.exit(0 if ok else 1)
PY
      fail "$1: worker $w did not read its data again from step $back: $(grep -h 'WORKER-' "$R/logs/worker-$w.log" | tail -3)"
  done
  echo "$back"
}
run a sync
run b sync ps:0 ps:1
run c async ps:0 ps:1
back_b=$(rolled_back_to b sync) || { echo "$back_b"; exit 1; }
back_c=$(rolled_back_to c async) || { echo "$back_c"; exit 1; }
cmp -s "$WORK/a.digest" "$WORK/b.digest" ||
  fail "b: weights differ from the undisturbed run's ($(cat "$WORK/b.kill"), rolled back to $back_b): $(diff "$WORK/a.digest" "$WORK/b.digest" | head -4)"
# the ps are back at once (MASTER-PS-BACK): the workers must be told, not find out by waiting out their requests to
# the lost ps (cluster.request_timeout_s 20, each); without replicas the same roll-back takes ~6 s
gap_b=$(rewind_gap "$WORK/b") || fail "b: $gap_b"
gap_c=$(rewind_gap "$WORK/c") || fail "c: $gap_c"
[ "${gap_b%%.*}" -lt 10 ] && [ "${gap_c%%.*}" -lt 10 ] ||
  fail "the workers stood still after the roll-back: sync $gap_b, async $gap_c: $(grep -h 'WORKER-PS-WAIT\|PSCLIENT-RESEND\|WORKER-KEPT-VOID' "$WORK/b/logs/worker-0.log" | cut -c1-200 | head -4)"
pass "both ps killed at once (sync: $(cat "$WORK/b.kill"); async: $(cat "$WORK/c.kill")): rolled back to steps $back_b and $back_c, named, the workers read their data again from there ($gap_b, $gap_c later), each run ended at step $MAX with exit 0, the sync one with weights bit-identical to the undisturbed run"
