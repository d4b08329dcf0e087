#!/bin/bash
# Replicated shards with training.deterministic (#27): a sync MLP run of 3 workers on 2 ps (seed 7) sums each
# step in worker order, so its weights do not depend on arrival order. Undisturbed, then with kill -9 of ps 0 at a
# third (its backup on ps 1 promoted), then with kill -9 of ps 1 (the backup of instance 0, whose primary goes on
# unreplicated and says so: PS-BACKUP-LOST, /metrics tfx_shards_unreplicated; ps 1's own instance fails over to ps 0) and kill -9 of the restarted
# ps 1 as soon as it is spawned again (during its rejoin): every run ends at max_steps with nothing rolled back
# and weights bit-identical to the undisturbed run's.
. "$(dirname "$0")/lib.sh"
MAX=${TFX_DET_STEPS:-900}
experiment "$WORK/mlp.json" training.report_every=10 eval.every_steps=0 model.layers='[{"type": "flatten"},
  {"type": "dense", "units": 64, "activation": "relu"}, {"type": "dense", "units": 10}]' placement.min_slice_bytes=65536
# run LABEL KILL: KILL is none, ps0 (kill -9 of ps 0 at a third) or ps1 (kill -9 of ps 1 at a third, then of its
# restarted process as soon as local spawned it)
run() {
  local run=$WORK/$1 lp pid
  start_local "$1" --config "$WORK/mlp.json" --run-dir "$run" --workers 3 --max-steps $MAX --set cluster.replicas=1 \
    --set training.deterministic=true --set training.seed=7 --set checkpoint.every_steps=0 \
    --set cluster.request_timeout_s=20
  lp=$LP
  if [ "$2" != none ]; then
    kill_ps_at "$WORK/$1.log" "$run" $((MAX / 3)) $lp "${2#ps}" >"$WORK/$1.kill"
    pid=$(sed -n 's/.*(pid \([0-9]*\)).*/\1/p' "$WORK/$1.kill")
  fi
  local workers=""
  if [ "$2" = ps1 ]; then # degraded until ps 1 is back: /metrics says so, read while the workers are held
    local url
    workers=$(sed -n 's/.*LOCAL-SPAWN worker [0-9]*: pid \([0-9]*\).*/\1/p' "$WORK/$1.log")
    kill -STOP $workers || fail "$1: could not hold the workers"
    url=$(grep -o 'http://127.0.0.1:[0-9]*' "$WORK/$1.log" | head -1)
    wait_for 30 bash -c "curl -s '$url/metrics' | grep -qE '^tfx_shards_unreplicated\{[^}]*\} [1-9]' || ! kill -0 $lp" ||
      fail "$1: /metrics never said shards were unreplicated"
    curl -s "$url/metrics" | grep -qE '^tfx_shards_unreplicated\{[^}]*\} [1-9]' ||
      fail "$1: the run ended before /metrics said shards were unreplicated"
  fi
  if [ "$2" = ps1 ]; then # the restarted ps 1 logs under a new pid: killed once it listens, during its rejoin
    wait_for 60 bash -c "p=\$(grep -o 'pid=[0-9]*' '$run/logs/ps-1.log' | tail -1); [ \"\$p\" != pid=$pid ] ||
      ! kill -0 $lp" || fail "$1: ps 1 was not restarted"
    kill -0 $lp 2>/dev/null || fail "$1: the run ended before ps 1 was restarted (raise TFX_DET_STEPS)"
    pid=$(grep -o 'pid=[0-9]*' "$run/logs/ps-1.log" | tail -1)
    kill -9 "${pid#pid=}" || fail "$1: kill -9 of the restarted ps 1 failed"
    kill -CONT $workers || fail "$1: could not release the workers"
  fi
  wait_and_digest "$1" "$lp" "$run"
}
# after_kill LABEL: trained to the end, no rollback, no worker step going back, weights as undisturbed
after_kill() {
  local R=$WORK/$1
  rolled_back "$WORK/$1.log" "$R"/logs/*.log && fail "$1: rolled back"
  steps_never_back "$R/metrics.jsonl" 3 $((MAX - 20)) || fail "$1: a worker's step went back, or the run stopped short"
  cmp -s "$WORK/a.digest" "$WORK/$1.digest" || fail "$1: weights differ from the undisturbed run's: $(diff "$WORK/a.digest" "$WORK/$1.digest")"
}
run a none
run b ps0
after_kill b
grep -q PS-PROMOTED "$WORK/b/logs/ps-1.log" || fail "b: ps 1 was not promoted"
run c ps1
after_kill c
grep -q 'PS-BACKUP-LOST ps instance 0' "$WORK/c/logs/ps-0.log" ||
  fail "c: ps 0 did not say its backup was lost: $(grep -h 'PS-' "$WORK/c/logs/ps-0.log" | tail -5)"
grep -q 'MASTER-FAILOVER ps 1 lost' "$WORK/c/logs/master-0.log" || fail "c: ps 1's instance did not fail over"
[ "$(grep -c 'LOCAL-RESTART ps 1 exited' "$WORK/c.log")" -ge 2 ] || fail "c: the restarted ps 1 was not killed again"
pass "3 workers, training.deterministic: kill -9 of ps 0, and of ps 1 twice (the backup, then during its rejoin): no rollback, weights bit-identical to the undisturbed run"
