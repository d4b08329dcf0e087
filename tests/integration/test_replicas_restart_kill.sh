#!/bin/bash
# ps 1 killed just after ps 0's restart, replicas on (#47, item 6): kill -9 of ps 0 at step 2/5 of a sync MLP run (2
# ps, 2 workers, seed 7, training.deterministic, a checkpoint every 100 steps), then of ps 1 DELAY ms after `local`
# spawned ps 0 again (0 and 80 ms: ps 0 starting, or rejoining as the backup of its old instance, now primary on
# ps 1), the workers held at each kill. Whether the chief then fails over or rolls back (then the workers rewind
# within 10 s of it), the run ends at max_steps with exit 0 and weights bit-identical to the undisturbed run's. It
# hung 60 s and more in 2 of 5 tries.
. "$(dirname "$0")/lib.sh"
MAX=${TFX_RESTART_KILL_STEPS:-600}
small_mlp "$WORK/mlp.json" training.report_every=10 eval.every_steps=0
# run LABEL [DELAY_MS]: the run, with kill -9 of ps 0 at step 2/5 and of ps 1 DELAY_MS after ps 0's restart
run() {
  local name=$1 run=$WORK/$1 lp
  start_local "$name" --config "$WORK/mlp.json" --run-dir "$run" --ps 2 --workers 2 --max-steps $MAX \
    --set cluster.replicas=1 --set training.deterministic=true --set training.seed=7 --set checkpoint.every_steps=100 \
    --set checkpoint.every_secs=0 --set cluster.request_timeout_s=20
  lp=$LP
  if [ $# = 2 ]; then
    kill_at "$WORK/$name.log" "$run" "$lp" step $((MAX * 2 / 5)) ps:0 -- respawn ps:0 "$2" ps:1 >"$WORK/$name.kill"
  fi
  wait_and_digest "$name" "$lp" "$run" 240
  grep -q "^done: step $MAX," "$WORK/$name.log" ||
    fail "$name: did not end at step $MAX: $(grep -a '^done:' "$WORK/$name.log") (last train record at $(metric "$run/metrics.jsonl" train step))"
}
run a
how=""
for delay in 0 80; do
  run "d$delay" "$delay"
  R=$WORK/d$delay
  [ "$(grep -c 'LOCAL-RESTART ps 1' "$WORK/d$delay.log")" -ge 1 ] || fail "d$delay: ps 1 was not restarted"
  if rolled_back "$R"/logs/master-0.log >/dev/null; then # the workers told of it, not waiting out their requests
    gap=$(rewind_gap "$R") || fail "d$delay: $gap"
    [ "${gap%%.*}" -lt 10 ] ||
      fail "d$delay: the workers stood still $gap after the roll-back ($(tr '\n' ';' <"$WORK/d$delay.kill")): $(grep -h 'WORKER-PS-WAIT\|PSCLIENT-RESEND\|WORKER-KEPT-VOID' "$R/logs/worker-0.log" | cut -c1-200 | head -4)"
  fi
  cmp -s "$WORK/a.digest" "$WORK/d$delay.digest" ||
    fail "d$delay: weights differ from the undisturbed run's ($(tr '\n' ';' <"$WORK/d$delay.kill") $(rolled_back "$R"/logs/master-0.log | head -2)): $(diff "$WORK/a.digest" "$WORK/d$delay.digest" | head -4)"
  how="$how; $delay ms: $(rolled_back "$R"/logs/master-0.log >/dev/null && echo rolled back || echo failed over)"
done
pass "ps 1 killed 0 and 80 ms after ps 0's restart: each run ended at step $MAX with exit 0 and weights bit-identical to the undisturbed run${how}"
