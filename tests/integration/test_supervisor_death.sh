#!/bin/bash
# A `tfx-node local` supervisor sent SIGHUP (a closed terminal, `kill -HUP`) stops as on SIGTERM: the master takes
# a final checkpoint and the run ends, its lock released. One killed with kill -9 takes its cluster with it: every
# child (master, ps, workers) gets SIGKILL from the kernel (PR_SET_PDEATHSIG), with the default request deadlines
# (no master waits minutes for ps that are gone, holding the run directory's lock), so the next `local` on the
# directory starts at once. A search is refused a live run's directory (the run's lock).
. "$(dirname "$0")/lib.sh"
small_mlp "$WORK/exp.json" training.max_steps=1000000 eval.every_steps=0 checkpoint.every_steps=20 \
  training.report_every=20

# ckpts: the checkpoints the master logged so far.
ckpts() { cat "$WORK/run/logs/master-0.log" 2>/dev/null | grep -c MASTER-CKPT; }
# start_local: the supervisor in the background (LP), once its cluster trains (a new checkpoint); KIDS its children.
start_local() {
  local before
  before=$(ckpts)
  "$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$WORK/run" >>"$WORK/local.log" 2>&1 &
  LP=$!
  PIDS+=($LP)
  wait_for 240 eval '[ "$(ckpts)" -gt "$before" ]' || fail "no checkpoint: $(tail -3 "$WORK/local.log")"
  KIDS=$(pgrep -P "$LP" | tr '\n' ' ')
  [ "$(echo $KIDS | wc -w)" -ge 5 ] || fail "want 5 children of the supervisor, got: $KIDS"
  PIDS+=($KIDS)
}

start_local
# The live run's directory is locked against a search too (it wrote its trials into it).
out=$(timeout 120 "$TFX_NODE" search --config "$SRC/examples/fashion_mnist_search.json" --run-dir "$WORK/run" 2>&1); rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q "is in use by another run" ||
  fail "search on a live run's directory: exit $rc: $(echo "$out" | tail -2)"
[ ! -e "$WORK/run/trial-000" ] || fail "search wrote into a live run's directory"
kill -HUP "$LP"
wait_exit 120 "$LP" >"$WORK/hup.rc"; rc=$?
[ "$rc" = 0 ] || fail "local on SIGHUP: exit $rc, want 0 as on SIGTERM: $(tail -3 "$WORK/local.log")"
grep -q LOCAL-SIGNAL "$WORK/local.log" && grep -q MASTER-SIGNAL "$WORK/run/logs/master-0.log" ||
  fail "SIGHUP was not taken as a stop request"
final=$(grep -c MASTER-CKPT "$WORK/run/logs/master-0.log")
grep -A100 MASTER-SIGNAL "$WORK/run/logs/master-0.log" | grep -q MASTER-CKPT || fail "no checkpoint after SIGHUP"

start_local
kill -9 "$LP"
t0=$SECONDS
for _ in $(seq 1 300); do
  alive=""
  for k in $KIDS; do kill -0 "$k" 2>/dev/null && [ "$(ps -o stat= -p "$k" | cut -c1)" != Z ] && alive+=" $k"; done
  [ -z "$alive" ] && break
  sleep 0.2
done
[ -z "$alive" ] || fail "children still running 60 s after the supervisor died:$alive"
gone=$((SECONDS - t0))
small_mlp "$WORK/short.json" training.max_steps=1 eval.every_steps=0
out=$(timeout 120 "$TFX_NODE" local --config "$WORK/short.json" --run-dir "$WORK/run" --fresh 2>&1); rc=$?
[ "$rc" = 0 ] && echo "$out" | grep -q "^done:" ||
  fail "the next local on the directory: exit $rc: $(echo "$out" | tail -3)"
pass "SIGHUP stopped local with a final checkpoint ($final in all); after kill -9 its $(echo $KIDS | wc -w) children were gone in ${gone} s and the next run took the directory"
