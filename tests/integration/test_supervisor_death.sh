#!/bin/bash
# A `tfx-node local` supervisor killed with kill -9 takes its cluster with it: every child (master, ps, workers)
# gets SIGTERM from the kernel (PR_SET_PDEATHSIG) and exits within its request deadlines (5 s here), so no
# orphan keeps training on the machine; and the run directory stays locked until the last of them is gone (a
# child held stopped keeps it: a second `local` on the directory is refused meanwhile).
. "$(dirname "$0")/lib.sh"
experiment "$WORK/exp.json" training.max_steps=1000000 eval.every_steps=0 checkpoint.every_steps=0 training.report_every=50 \
  cluster.request_timeout_s=5 cluster.register_timeout_s=5
"$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$WORK/run" >"$WORK/local.log" 2>&1 &
LP=$!
PIDS+=($LP)
for _ in $(seq 1 300); do
  [ "$(metric "$WORK/run/metrics.jsonl" train step 2>/dev/null || echo none)" != none ] && break
  kill -0 "$LP" 2>/dev/null || fail "the cluster exited before training: $(tail -3 "$WORK/local.log")"
  sleep 0.2
done
kids=$(pgrep -P "$LP" | tr '\n' ' ')
[ "$(echo $kids | wc -w)" -ge 5 ] || fail "want 5 children of the supervisor, got: $kids"
PIDS+=($kids)
held=$(echo $kids | cut -d' ' -f1)
kill -STOP "$held"
kill -9 "$LP"
out=$(timeout 120 "$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$WORK/run" 2>&1); rc=$?
kill -CONT "$held"
[ "$rc" = 2 ] && echo "$out" | grep -q "is in use by another run" ||
  fail "a second local started while a child of the killed supervisor lived: exit $rc: $(echo "$out" | tail -2)"
for _ in $(seq 1 300); do
  alive=""
  for k in $kids; do kill -0 "$k" 2>/dev/null && [ "$(ps -o stat= -p "$k" | cut -c1)" != Z ] && alive+=" $k"; done
  [ -z "$alive" ] && pass "all $(echo $kids | wc -w) children exited after the supervisor was killed"
  sleep 0.2
done
fail "children still running 60 s after the supervisor died:$alive"
