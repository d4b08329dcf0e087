#!/bin/bash
# Both ps killed at once with replicas on (#47, item 5), deterministic: kill -9 of ps 0 and ps 1 together (the
# workers held, so that no step runs between the two deaths) at step 2/5 of a sync MLP run (2 ps, 2 workers, seed 7,
# training.deterministic, a checkpoint every 100 steps). Every instance lost its primary and its backup: the chief
# rolls every ps back to the newest checkpoint and says so (MASTER-PS-LOST "... and so did its backup"), the
# workers read their data again from there (WORKER-REWIND), and the run ends at max_steps with exit 0 and weights
# bit-identical to the undisturbed run's; the workers rewind within 10 s of the roll-back. It stalled 60 s and more in
# 4 of 4 tries (test_replicas_both kills them unheld and checks the end, not the weights or the stall).
# Pending: it fails, 2 of 2 tries: the run ends bit-identical, but the workers stand still 40 s (twice
# cluster.request_timeout_s) after the roll-back: each waits out a request resending its kept push of the kill's
# step for instance 0 to ps 1 (PSCLIENT-RESEND; WORKER-PS-WAIT "ps 1 holds ps instance 0 as its backup: not
# promoted (yet)"), twice, before WORKER-KEPT-VOID and WORKER-ROUTES.
. "$(dirname "$0")/lib.sh"
MAX=${TFX_BOTH_STEPS:-600}
small_mlp "$WORK/mlp.json" training.report_every=10 eval.every_steps=0
# run LABEL [VICTIM...]: the run, with kill -9 of the VICTIMs (ps:K, worker:K) at once at step 2/5
run() {
  local name=$1 run=$WORK/$1 lp
  shift
  start_local "$name" --config "$WORK/mlp.json" --run-dir "$run" --ps 2 --workers 2 --max-steps $MAX \
    --set cluster.replicas=1 --set training.deterministic=true --set training.seed=7 --set checkpoint.every_steps=100 \
    --set checkpoint.every_secs=0 --set cluster.request_timeout_s=20
  lp=$LP
  [ $# = 0 ] || kill_at "$WORK/$name.log" "$run" "$lp" step $((MAX * 2 / 5)) "$@" >"$WORK/$name.kill"
  wait_and_digest "$name" "$lp" "$run" 240
  [ "$(metric "$run/metrics.jsonl" train step)" -ge $((MAX - 10)) ] ||
    fail "$name: stopped at step $(metric "$run/metrics.jsonl" train step) of $MAX"
}
run a
run b ps:0 ps:1
B=$WORK/b
grep -q 'MASTER-PS-LOST.*and so did its backup' "$B/logs/master-0.log" ||
  fail "b: the roll-back was not named ($(cat "$WORK/b.kill")): $(grep -h 'MASTER-' "$B/logs/master-0.log" | tail -5)"
back=$(sed -n 's/.*MASTER-RESUME resuming from .*ckpt-0*\([0-9]*\) at step .*/\1/p' "$B/logs/master-0.log" | tail -1)
[ -n "$back" ] || fail "b: no MASTER-RESUME after the roll-back: $(grep -h 'MASTER-' "$B/logs/master-0.log" | tail -5)"
for w in 0 1; do
  grep -q "WORKER-REWIND the cluster went back to step $back" "$B/logs/worker-$w.log" ||
    fail "b: worker $w did not read its data again from step $back: $(grep -h 'WORKER-' "$B/logs/worker-$w.log" | tail -3)"
done
# the ps are back at once (MASTER-PS-BACK): the workers must be told, not find out by waiting out their requests to
# the lost ps (cluster.request_timeout_s 20, each); without replicas the same roll-back takes ~6 s
gap=$(rewind_gap "$B") || fail "b: $gap"
[ "${gap%%.*}" -lt 10 ] ||
  fail "b: the workers stood still $gap after the roll-back to step $back: $(grep -h 'WORKER-PS-WAIT\|PSCLIENT-RESEND\|WORKER-KEPT-VOID' "$B/logs/worker-0.log" | cut -c1-200 | head -4)"
cmp -s "$WORK/a.digest" "$WORK/b.digest" ||
  fail "b: weights differ from the undisturbed run's ($(cat "$WORK/b.kill"), rolled back to $back): $(diff "$WORK/a.digest" "$WORK/b.digest" | head -4)"
pass "both ps killed at once ($(cat "$WORK/b.kill")): rolled back to step $back, named, the workers read their data again from there $gap later, and the run ended at step $MAX with exit 0 and weights bit-identical to the undisturbed run"
