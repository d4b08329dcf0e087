#!/bin/bash
# A restarted chief that adopts the live ps (test_master_adopt.sh) collects the checkpoints the ps wrote by
# themselves while no chief was there (#28): the ps write every multiple of checkpoint.every_steps on their own
# and remember them; the chief killed -9 mid-run, the restarted one used to ask only for multiples after the step
# it adopted at, so the multiples written meanwhile never got their manifests. Now every multiple of 20 up to the
# end is a complete checkpoint.
. "$(dirname "$0")/lib.sh"
MAX=1200
small_mlp "$WORK/exp.json" training.max_steps=$MAX eval.every_steps=0 checkpoint.every_steps=20 \
  checkpoint.keep_max=1000 training.report_every=1000000 cluster.request_timeout_s=20 cluster.register_timeout_s=20
RUN=$WORK/run
LOG=$WORK/run.log
complete() { ls -d "$RUN"/checkpoints/ckpt-*/manifest.json 2>/dev/null | sed 's|.*/ckpt-0*\([0-9]*\)/.*|\1|' | sort -n; }
past_200() { [ "$(complete | tail -1)" -ge 200 ] 2>/dev/null; }
"$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$RUN" >"$LOG" 2>&1 &
LP=$!
PIDS+=($LP)
wait_for 300 past_200 || fail "no checkpoint at step 200 within 300 s"
kill -9 "$(pid_of "$RUN" chief 0)"
wait_for 60 grep -q "LOCAL-RESTART master 0 exited with status 137" "$LOG" || fail "no restart of the chief"
wait_exit 300 "$LP" || fail "the run failed after its chief was restarted: $(tail -3 "$LOG")"
grep -q MASTER-ADOPT "$RUN/logs/master-0.log" || skip "the restarted chief resumed rather than adopted (timing)"
adopted=$(grep -o "MASTER-ADOPT every ps serves the plan at step [0-9]*" "$RUN/logs/master-0.log" | grep -o "[0-9]*$")
missing=$(comm -23 <(seq 20 20 $MAX | sort) <(complete | sort) | sort -n | tr '\n' ' ')
[ -z "$missing" ] || fail "adopted at step $adopted; multiples of 20 without a complete checkpoint: $missing"
pass "adopted at step $adopted; every multiple of 20 up to $MAX is a complete checkpoint"
