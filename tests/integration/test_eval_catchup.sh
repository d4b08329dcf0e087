#!/bin/bash
# An evaluation point passed while the chief was down is evaluated as soon as a chief is back (issue 30, item 18:
# evals at 2023 and 4024 with every 1000 after a resume, 3000 skipped). The chief is held (SIGSTOP) after its
# evaluation at 300 while the ps and workers train past 600; the workers are then held so that the step stands,
# the chief is killed -9, and the workers go on once its successor listens. The successor adopts the ps at a step
# A past 600 and must evaluate at once (a step in [A, 900)), not first at 900. (A worker's report waits
# request_timeout_s for a held chief, and the next report registers it with the successor: reports every 100
# steps and a 10 s timeout keep both short.)
. "$(dirname "$0")/lib.sh"
MAX=1000 EVERY=300
experiment "$WORK/exp.json" training.max_steps=$MAX eval.every_steps=$EVERY checkpoint.every_steps=0 \
  training.report_every=100 cluster.request_timeout_s=10 cluster.register_timeout_s=60
RUN=$WORK/run
LOG=$WORK/run.log
"$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$RUN" >"$LOG" 2>&1 &
LP=$!
PIDS+=($LP)
last_eval() { metric "$RUN/metrics.jsonl" eval step 2>/dev/null || echo none; }
evaluated() { [ "$(last_eval)" != none ] && ge "$(last_eval)" $EVERY; }
wait_for 300 evaluated || fail "no evaluation at step $EVERY within 300 s"
before=$(last_eval)
PS_ADDR=$(sed -n 's/.*LOCAL-SPAWN ps 0: pid [0-9]* at \(.*\)$/\1/p' "$LOG" | head -1)
CHIEF=$(pid_of "$RUN" chief 0)
kill -STOP "$CHIEF"
ps_step() { "$TFX_NODE" status --address "$PS_ADDR" 2>/dev/null | tr ' ' '\n' | sed -n 's/^step=//p'; }
past() { local s; s=$(ps_step); [ -n "$s" ] && [ "$s" -gt $((2 * EVERY + 20)) ]; }
# Progress deadline: each wait lasts while ps 0's step moves.
while ! past; do
  s0=$(ps_step)
  wait_for 60 sh -c "s=\$('$TFX_NODE' status --address '$PS_ADDR' 2>/dev/null | tr ' ' '\n' | sed -n 's/^step=//p'); [ -n \"\$s\" ] && [ \"\$s\" != '$s0' ]" ||
    fail "the ps stopped at step $s0 while the chief was held"
done
[ "$before" -lt $((2 * EVERY)) ] || fail "the chief evaluated at $before, past the point the case needs unevaluated"
WORKERS="$(pid_of "$RUN" worker 0) $(pid_of "$RUN" worker 1)"
kill -STOP $WORKERS
kill -9 "$CHIEF"
started() { [ "$(grep -c MASTER-START "$RUN/logs/master-0.log")" -ge 2 ]; }
wait_for 120 started || { kill -CONT $WORKERS; fail "no chief listened again after the kill"; }
kill -CONT $WORKERS
wait_for 120 grep -q MASTER-ADOPT "$RUN/logs/master-0.log" ||
  fail "the restarted chief did not adopt the ps: $(grep -h 'MASTER-FRESH\|MASTER-RESUME' "$RUN/logs/master-0.log")"
adopted=$(grep -o "MASTER-ADOPT every ps serves the plan at step [0-9]*" "$RUN/logs/master-0.log" | grep -o "[0-9]*$")
[ "$adopted" -gt $((2 * EVERY)) ] && [ "$adopted" -lt $((3 * EVERY)) ] ||
  fail "adopted at step $adopted, outside ($((2 * EVERY)), $((3 * EVERY))): the case is not made"
wait_exit 300 "$LP" || fail "the run failed after its chief was restarted: $(tail -3 "$LOG")"
evals=$(python3 -c "
import json, sys
print(' '.join(str(r['step']) for r in map(json.loads, open(sys.argv[1])) if r.get('kind') == 'eval'))" "$RUN/metrics.jsonl")
first=$(for e in $evals; do [ "$e" -gt "$before" ] && { echo "$e"; break; }; done)
[ -n "$first" ] && [ "$first" -ge "$adopted" ] && [ "$first" -lt $((3 * EVERY)) ] ||
  fail "after adopting at $adopted the first evaluation was at ${first:-none} (evaluations: $evals): step $((2 * EVERY)) was skipped"
pass "the chief held after its evaluation at $before and killed; its successor adopted at $adopted and evaluated at once at $first (evaluations: $evals)"
