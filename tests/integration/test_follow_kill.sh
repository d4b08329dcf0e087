#!/bin/bash
# A followed stream survives kill -9 (#28 "bad input and faults"): a sync cluster (2 ps, 2 workers, a capped lazy
# table, incremental checkpoints every second) follows a directory; after 3 files kill -9 of worker 0, after 2 more
# kill -9 of ps 0 (local restarts each; the ps's loss rolls the cluster back to the newest checkpoint, with the
# stream positions in it). Every row landed is trained on, none twice: the workers' examples_seen end within a
# partial batch of the rows landed and the global step within one of rows / 32 (workers that lived through the
# rollback read their data again from the checkpoint's step, as the restarted ones do).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/follow_setup.sh"
landed=0
setsid "$TFX_NODE" local --config "$WORK/follow.json" --run-dir "$WORK/run" >>"$WORK/local.log" 2>&1 &
lp=$!
PIDS+=("$lp")
# feed FILE...: lands each file once every row landed before it was trained on.
feed() {
  for f in "$@"; do
    land "$f"
    landed=$((landed + $(wc -l <"$WORK/parts/$f.libsvm")))
    wait_for 240 near "$landed" || fail "examples_seen $(seen), rows landed $landed"
  done
}
# kill9 ROLE: kill -9 of ROLE 0 once a checkpoint has passed, then wait for local's restart of it.
kill9() {
  wait_for 60 checkpointed || fail "no checkpoint of the dry stream's step (every_secs 1): $(ls "$WORK/run/checkpoints")"
  local pid
  pid=$(pid_of "$WORK/run" "$1" 0)
  [ -n "$pid" ] || fail "no $1 0 to kill"
  kill -9 "$pid" || fail "kill -9 of $1 0 (pid $pid) failed"
  wait_for 120 grep -q "LOCAL-RESTART $1 0 exited with status 137" "$WORK/local.log" || fail "no restart of $1 0"
}
feed part-0 part-1 part-2
kill9 worker
feed part-3 part-4
kill9 ps
feed part-5
kill -INT -- -"$lp"
wait_exit 120 "$lp" || fail "Ctrl-C did not stop the following cluster"
s=$(seen)
step=$(metric "$WORK/run/metrics.jsonl" train step)
[ "$step" -le $((landed / 32 + 1)) ] || fail "global step $step for $landed rows in steps of 32: rows trained twice"
# The rollback undid the steps after the checkpoint: their rows are read again (WORKER-REWIND), so the global step
# still counts every full batch landed.
[ "$step" -ge $((landed / 32 - 2)) ] || fail "global step $step for $landed rows in steps of 32: rows of the steps rolled back were not trained again"
pass "kill -9 of worker 0 then ps 0 mid-stream: $s examples seen of $landed rows landed, global step $step"
