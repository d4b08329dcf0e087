#!/bin/bash
# Re-replication (cluster.replicas 1, #27): a sync MLP run (2 ps, 2 workers, seed 7) whose ps 0 is killed with
# kill -9 at a tenth of the run: ps 1 takes its shards over, `local` restarts ps 0, which rejoins as the backup of
# its old shards and of ps 1's (MASTER-REREPLICATED, PS-REREPLICATED: the whole state streamed); then ps 1 is killed
# too, and ps 0 serves everything. The run ends at max_steps with exit 0, nothing rolled back, no worker step going
# back, and weights bit-identical to the same run undisturbed: a second failure is survived.
. "$(dirname "$0")/lib.sh"
MAX=${TFX_REJOIN_STEPS:-2000}
experiment "$WORK/mlp.json" training.report_every=10 eval.every_steps=0 model.layers='[{"type": "flatten"},
  {"type": "dense", "units": 64, "activation": "relu"}, {"type": "dense", "units": 10}]' placement.min_slice_bytes=65536
step_of() { grep -o '"step": *[0-9]*' "$1/metrics.jsonl" 2>/dev/null | tail -1 | grep -o '[0-9]*$'; }
run() {
  local run=$WORK/$1
  start_local "$1" --config "$WORK/mlp.json" --run-dir "$run" --max-steps $MAX --set cluster.replicas=1 \
    --set training.seed=7 --set checkpoint.every_steps=0 --set cluster.request_timeout_s=20
  local lp=$LP
  if [ "$2" = 1 ]; then
    kill_ps_at "$WORK/$1.log" "$run" $((MAX / 10)) $lp
    wait_for 120 bash -c "[ \$(grep -c MASTER-REREPLICATED '$run/logs/master-0.log') -ge 2 ] || ! kill -0 $lp" ||
      fail "$1: ps 0 did not rejoin: $(grep -hE 'REREPLICAT|FAILOVER|RESTART' "$WORK/$1.log" "$run"/logs/*.log)"
    kill -0 $lp 2>/dev/null || fail "$1: the run ended before ps 0 rejoined (raise TFX_REJOIN_STEPS)"
    local at
    at=$(step_of "$run")
    [ "$at" -lt $((MAX - 20)) ] || fail "$1: ps 0 rejoined only at step $at of $MAX (raise TFX_REJOIN_STEPS)"
    # KNOWN FAILURE, left to the replication rework (src/ps, src/psclient): killed this soon after the rejoin with
    # the workers held, about one run in two (branch base 4304b3c and main f122f22 alike) the workers' pushes of the
    # step at the promotion are not sent again at the failover; each waits out a pull (cluster.request_timeout_s),
    # then resends and rewinds (WORKER-PS-WAIT, WORKER-REWIND): "a worker's step went back" or "weights differ".
    kill_ps_at "$WORK/$1.log" "$run" $((at + 10)) $lp 1 # the workers held while ps 1 dies
  fi
  wait_and_digest "$1" "$lp" "$run"
}
run a 0
run b 1
R=$WORK/b
grep -q 'PS-REREPLICATED ps instance 0: ps 0' "$R"/logs/ps-1.log || fail "ps 1 did not stream instance 0 to ps 0"
grep -q 'PS-REREPLICATED ps instance 1: ps 0' "$R"/logs/ps-1.log || fail "ps 1 did not stream instance 1 to ps 0"
[ "$(grep -c MASTER-FAILOVER "$R"/logs/master-0.log)" -ge 3 ] ||
  fail "the second kill was not a failover: $(grep -h FAILOVER "$R"/logs/master-0.log)"
rolled_back "$WORK/b.log" "$R"/logs/*.log && fail "rolled back"
steps_never_back "$R/metrics.jsonl" || fail "a worker's step went back"
[ "$(step_of "$R")" -ge $((MAX - 20)) ] || fail "did not train to $MAX"
cmp -s "$WORK/a.digest" "$WORK/b.digest" || fail "weights differ after kill, rejoin and a second kill: $(diff "$WORK/a.digest" "$WORK/b.digest")"
pass "ps 0 killed, restarted and re-replicated ($(grep -ho 'bytes streamed[^;]*' "$R"/logs/ps-1.log | head -2 | tr '\n' ';')), then ps 1 killed: no rollback, weights bit-identical to the undisturbed run"
