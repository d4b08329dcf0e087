#!/bin/bash
# Capped and aged lazy tables across a re-replication (#47 item 4): a sync LR (2 ps, 2 workers, seed 7) with a
# capped table (max_rows, evicting all run long) or an aged one (ttl_steps), checkpoints every 100 steps. ps 0 is
# killed at a third of the run; ps 1 takes its instance over, `local` restarts ps 0, which rejoins (the workers
# held meanwhile) as the backup of both instances (the whole state streamed: values, slots, each row's last touch and the table's last age scan); then
# ps 1 is killed with the workers held, and ps 0 serves everything. The run ends at max_steps, exit 0, nothing rolled
# back, and its final checkpoint (values, slots, rows) is bit-identical to the same run undisturbed: the streamed copy
# evicts and expires the rows its primary would have.
. "$(dirname "$0")/lib.sh"
MAX=900
python3 "$(dirname "$0")/sparse_data.py" "$WORK" --train 2000 --test 200
lazy_lr "$WORK/capped.json" ', "max_rows": 150' training.report_every=10
lazy_lr "$WORK/aged.json" ', "ttl_steps": 60' training.report_every=10
step_of() { grep -o '"step": *[0-9]*' "$1/metrics.jsonl" 2>/dev/null | tail -1 | grep -o '[0-9]*$'; }
# run LABEL CONFIG KILL(0|1)
run() {
  local run=$WORK/$1
  start_local "$1" --config "$2" --run-dir "$run" --max-steps $MAX --set cluster.replicas=1 --set training.seed=7 \
    --set checkpoint.every_steps=100 --set cluster.request_timeout_s=20
  local lp=$LP
  if [ "$3" = 1 ]; then
    kill_ps_at "$WORK/$1.log" "$run" $((MAX / 3)) $lp
    local w0 w1 # the workers held while ps 0 rejoins, so the run cannot end first however fast it trains
    w0=$(pid_of "$run" worker 0) w1=$(pid_of "$run" worker 1)
    kill -STOP $w0 $w1
    wait_for 120 bash -c "[ \$(grep -c MASTER-REREPLICATED '$run/logs/master-0.log') -ge 2 ] || ! kill -0 $lp" ||
      fail "$1: ps 0 did not rejoin: $(grep -hE 'REREPLICAT|FAILOVER|RESTART' "$WORK/$1.log" "$run"/logs/*.log)"
    kill -CONT $w0 $w1
    kill -0 $lp 2>/dev/null || fail "$1: the run ended before ps 0 rejoined"
    local at
    at=$(step_of "$run")
    [ "$at" -lt $((MAX - 40)) ] || fail "$1: ps 0 rejoined only at step $at of $MAX"
    kill_ps_at "$WORK/$1.log" "$run" $((at + 10)) $lp 1 # the workers held while ps 1 dies
  fi
  wait_and_digest "$1" "$lp" "$run"
  if [ "$3" = 1 ]; then
    [ "$(metric "$run/metrics.jsonl" train step)" -ge $((MAX - 20)) ] || fail "$1: did not train to $MAX"
    [ "$(grep -c MASTER-FAILOVER "$run"/logs/master-0.log)" -ge 3 ] ||
      fail "$1: the second kill was not a failover: $(grep -h FAILOVER "$run"/logs/master-0.log)"
    rolled_back "$WORK/$1.log" "$run"/logs/*.log && fail "$1: rolled back"
  fi
}
for t in capped aged; do
  run ${t}_a "$WORK/$t.json" 0
  run ${t}_b "$WORK/$t.json" 1
  cmp -s "$WORK/${t}_a.digest" "$WORK/${t}_b.digest" ||
    fail "$t table: the final checkpoint differs after a kill, a rejoin and a second kill: $(diff "$WORK/${t}_a.digest" "$WORK/${t}_b.digest" | head -4)"
done
pass "capped and aged tables: ps 0 killed, rejoined (each row's touch and the age scan streamed), ps 1 killed: no rollback, final checkpoints bit-identical to the undisturbed runs"
