#!/bin/bash
# Replicated shards (cluster.replicas 1, #27): a sync run (2 ps, 2 workers, seed 7, no periodic checkpoint) whose
# ps 0 is killed with kill -9 at about a third of the run ends at max_steps with exit 0, promotes ps 0's backup on
# ps 1 (MASTER-FAILOVER, PS-PROMOTED), rolls nothing back (no MASTER-PS-LOST, no worker step going back) and exports
# weights bit-identical to the same run undisturbed: for the dense MLP and for a logistic regression whose
# embedding_bag table is lazy (the MLP's backup kept by snapshots alone: the bytes sent to it are checked). /metrics then says tfx_failovers_total 1 and shards unreplicated (unless ps 0 was
# already back and re-replicated, MASTER-REREPLICATED).
. "$(dirname "$0")/lib.sh"
MAX=240
python3 "$(dirname "$0")/sparse_data.py" "$WORK" --train 2000 --test 200
experiment "$WORK/mlp.json" training.report_every=20 eval.every_steps=0 model.layers='[{"type": "flatten"},
  {"type": "dense", "units": 64, "activation": "relu"}, {"type": "dense", "units": 10}]' placement.min_slice_bytes=65536
sparse_lr_experiment "$WORK/lr.json" training.report_every=50
# run LABEL CONFIG KILL(0|1): trains MAX steps with replicas on, kill -9 of ps 0 at a third when KILL is 1.
run() {
  local max=$MAX
  local run=$WORK/$1 url
  start_local "$1" --config "$2" --run-dir "$run" --max-steps $max --set cluster.replicas=1 \
    --set training.seed=7 --set checkpoint.every_steps=0 --set cluster.request_timeout_s=20
  local lp=$LP
  if [ "$3" = 1 ]; then
    kill_ps_at "$WORK/$1.log" "$run" $((max / 3)) $lp
    # /metrics is read while the workers are held, so that the run cannot end before it (the master fails over
    # without them)
    local workers
    workers=$(sed -n 's/.*LOCAL-SPAWN worker [01]: pid \([0-9]*\).*/\1/p' "$WORK/$1.log")
    kill -STOP $workers || fail "$1: could not hold the workers"
    wait_for 60 bash -c "grep -q MASTER-FAILOVER '$run/logs/master-0.log' || ! kill -0 $lp" || fail "$1: no failover"
    url=$(grep -o 'http://127.0.0.1:[0-9]*' "$WORK/$1.log" | head -1)
    curl -sf "$url/metrics" >"$WORK/$1.metrics" || fail "$1: /metrics did not answer"
    kill -CONT $workers || fail "$1: could not release the workers"
  fi
  wait_and_digest "$1" "$lp" "$run"
}
# after_kill LABEL: the checks of a run whose ps 0 was killed.
after_kill() {
  local run=$WORK/$1
  [ "$(metric "$run/metrics.jsonl" train step)" -ge $((MAX - 50)) ] || fail "$1: did not train to $MAX"
  grep -q PS-PROMOTED "$run"/logs/ps-1.log || fail "$1: ps 1 was not promoted"
  rolled_back "$WORK/$1.log" "$run"/logs/*.log && fail "$1: rolled back"
  steps_never_back "$run/metrics.jsonl" || fail "$1: a worker's step went back"
  grep -q '^tfx_failovers_total{role="master",index="0"} 1' "$WORK/$1.metrics" ||
    fail "$1: /metrics has no failover: $(grep -E 'failover|unreplicated' "$WORK/$1.metrics")"
  # unreplicated when /metrics was read, or already re-replicated by then (ps 0 restarts within a second)
  grep -qE '^tfx_shards_unreplicated\{role="master",index="0"\} [1-9]' "$WORK/$1.metrics" ||
    grep -q MASTER-REREPLICATED "$run/logs/master-0.log" ||
    fail "$1: /metrics does not say the shards are unreplicated: $(grep -E 'unreplicated|replication|status' "$WORK/$1.metrics")"
}
run mlp_a "$WORK/mlp.json" 0
# dense shards, two workers: the backup gets a snapshot every cluster.replica_batch_steps (16) steps, no summed
# step (ps__snap_acks): the bytes sent to it stay far below one step's sums a step (the shard's bytes x MAX)
state=$(sed -n 's/.*PS-INIT ps instance 0: [0-9]* shard(s), \([0-9]*\) bytes.*/\1/p' "$WORK/mlp_a/logs/ps-0.log" | head -1)
sent=$(sed -n 's/.*PS-STOP .* \([0-9]*\) bytes sent to its backup.*/\1/p' "$WORK/mlp_a/logs/ps-0.log" | tail -1)
[ -n "$state" ] && [ -n "$sent" ] && [ "$sent" -gt 0 ] && [ "$sent" -lt $((state * MAX / 2)) ] ||
  fail "MLP: $sent bytes sent to the backup for a $state-byte shard over $MAX steps (want snapshots only)"
echo "MLP: $sent bytes sent to the backup over $MAX steps ($state bytes of shards on ps 0)"
run mlp_b "$WORK/mlp.json" 1
after_kill mlp_b
cmp -s "$WORK/mlp_a.digest" "$WORK/mlp_b.digest" || fail "MLP: weights differ after kill -9 of ps 0: $(diff "$WORK/mlp_a.digest" "$WORK/mlp_b.digest")"
MAX=3000 # about 1 ms a step: long enough to kill mid-run
run lr_a "$WORK/lr.json" 0
run lr_b "$WORK/lr.json" 1
after_kill lr_b
cmp -s "$WORK/lr_a.digest" "$WORK/lr_b.digest" || fail "sparse LR: weights differ after kill -9 of ps 0"
pass "kill -9 of ps 0 at a third of the run: the backup was promoted, nothing rolled back, MLP and lazy-table LR weights bit-identical to the undisturbed runs"
