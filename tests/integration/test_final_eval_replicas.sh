#!/bin/bash
# The end window with replicas (cluster.replicas, on by default): ps 0 is killed -9 while both workers wait at
# max_steps for the chief's final checkpoint (the chief held with SIGSTOP from a first checkpoint until then): its
# backup is promoted and the run must end, with exit 0, a final checkpoint at max_steps and its evaluation. A run
# that hangs there fails at 120 s, naming it.
. "$(dirname "$0")/lib.sh"
MAX=600
small_mlp "$WORK/exp.json" training.max_steps=$MAX eval.every_steps=200 checkpoint.every_steps=200 \
  training.report_every=1000000 cluster.request_timeout_s=20 cluster.register_timeout_s=20
RUN=$WORK/end-window
LOG=$WORK/end-window.log
"$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$RUN" >"$LOG" 2>&1 &
LP=$!
PIDS+=($LP)
wait_for 300 has_ckpt "$RUN" || fail "end-window: no checkpoint within 300 s"
CHIEF=$(pid_of "$RUN" chief 0)
[ -n "$CHIEF" ] || fail "end-window: no chief process"
kill -STOP "$CHIEF"
PIDS+=("$CHIEF")
wait_for 300 at_max "$RUN" || fail "end-window: the workers did not reach max_steps within 300 s"
[ -f "$(printf "%s/checkpoints/ckpt-%012d/manifest.json" "$RUN" $MAX)" ] && fail "end-window: the final checkpoint came first"
kill -9 "$(pid_of "$RUN" ps 0)" || fail "end-window: kill -9 of ps 0 failed"
kill -CONT "$CHIEF"
wait_exit 120 "$LP"
rc=$?
[ "$rc" != 124 ] || fail "end-window: the run hung after ps 0 was lost at max_steps with replicas on (the hang of issue 32): $(grep -hE 'MASTER-(FAILOVER|NO-FAILOVER|PS-LOST|WAIT)' "$RUN/logs/master-0.log" | tail -3)"
[ "$rc" = 0 ] || fail "end-window: the run failed: $(tail -3 "$LOG")"
grep -q MASTER-FAILOVER "$RUN/logs/master-0.log" || fail "end-window: ps 0 did not fail over: $(grep -h 'MASTER-' "$RUN/logs/master-0.log" | tail -3)"
[ -f "$(printf "%s/checkpoints/ckpt-%012d/manifest.json" "$RUN" $MAX)" ] || fail "end-window: no final checkpoint at $MAX"
[ "$(metric "$RUN/metrics.jsonl" eval step)" = "$MAX" ] || fail "end-window: no eval line at step $MAX"
pass "ps 0 lost while the workers waited at max_steps: failed over, the final checkpoint written and evaluated"
