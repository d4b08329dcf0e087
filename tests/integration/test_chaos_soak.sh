#!/bin/bash
# The replicas' chaos soak, short: a seeded random schedule (TFX_CHAOS_SEED, 1 unless set) of faults against
# clusters with replicas at their default (on: 2 ps), over sync and async, dense and sparse:
#  - sync MLP, training.deterministic: kill -9 of a ps, SIGSTOP/SIGCONT of a worker, a ps or the chief, at steps the
#    schedule draws (one of them in the end window, once a worker waits at max_steps). The run ends at max_steps,
#    exit 0, nothing rolled back, weights bit-identical to the undisturbed run's, the ledger balanced.
#  - async sparse LR: kill -9 of a ps at a drawn step and SIGSTOP/SIGCONT of a worker: exit 0, no rollback, the
#    ledger balanced with every push the workers made counted once on each instance.
# bench/chaos runs the long schedule (hundreds of faults).
. "$(dirname "$0")/lib.sh"
SEED=${TFX_CHAOS_SEED:-1}
MAX=${TFX_SOAK_STEPS:-2400}
small_mlp "$WORK/mlp.json" training.report_every=10 eval.every_steps=0 training.deterministic=true
python3 "$SRC/tests/integration/sparse_data.py" "$WORK" >/dev/null 2>&1 || fail "sparse_data.py"
sparse_lr_experiment "$WORK/lr.json" training.mode='"async"' training.report_every=20
# schedule N LO HI: N sorted steps drawn from LO..HI with the seed (one a line).
schedule() { python3 -c "import random; r = random.Random($SEED * 7919 + $1); print('\n'.join(map(str, sorted(r.sample(range($2, $3), $1)))))"; }
# pick WORD...: one of the words, drawn with the seed and the step ($STEP).
pick() { python3 -c "import random, sys; print(random.Random($SEED * 104729 + $STEP).choice(sys.argv[1:]))" "$@"; }
# await_step RUN STEP LP: waits (polling every 20 ms, up to 300 s) until RUN's train records reach STEP; 1 when LP
# ended first.
await_step() {
  local s i
  for i in $(seq 15000); do
    kill -0 "$3" 2>/dev/null || return 1
    s=$(grep -o '"kind": "train", "step": [0-9]*' "$1/metrics.jsonl" 2>/dev/null | tail -1 | grep -o '[0-9]*$')
    [ -n "$s" ] && [ "$s" -ge "$2" ] && return 0
    sleep 0.02
  done
  return 1
}
# healed RUN N LP: waits until RUN's chief healed the cluster N times (a ps killed came back and took its backups
# again: no shard left unreplicated), so that the next kill is a single loss, not a pair lost together (which rolls
# back, by design).
healed() {
  wait_for 120 bash -c "[ \$(grep -c 'MASTER-REREPLICATED.* 0 shard(s) unreplicated' '$1/logs/master-0.log') -ge $2 ] ||
    ! kill -0 $3"
}
# fault RUN KIND:ROLE: kill9 (kill -9) or stop (SIGSTOP for 1 s, then SIGCONT) of ROLE 0 or 1, drawn; noted in
# $WORK/faults.
fault() {
  local role=${2#*:} idx pid
  idx=$(pick 0 1)
  [ "$role" = chief ] && idx=0
  pid=$(pid_of "$1" "$role" "$idx")
  [ -n "$pid" ] || return 0 # being restarted: the next fault finds it
  case $2 in
    kill9:*) kill -9 "$pid" ;;
    stop:*) kill -STOP "$pid"; sleep 1; kill -CONT "$pid" ;;
  esac
  echo "step $STEP: $2 $idx" >>"$WORK/faults"
}
# end_window RUN LP: the moment a worker waits at max_steps, the chief is held (SIGSTOP) while a ps is killed, and
# let go a second later: the kill lands between the workers' last step and the final checkpoint.
end_window() {
  local i chief
  chief=$(pid_of "$1" chief 0) # found first: the window between a worker's last step and the checkpoint is short
  for i in $(seq 30000); do
    grep -q WORKER-AT-MAX "$1"/logs/worker-*.log 2>/dev/null && break
    kill -0 "$2" 2>/dev/null || return 0
    sleep 0.005
  done
  [ -n "$chief" ] && kill -STOP "$chief"
  STEP=$MAX fault "$1" kill9:ps
  sleep 1
  [ -n "$chief" ] && kill -CONT "$chief"
}
# soak NAME FAULTS CONFIG [ARGS...]: a run of CONFIG in $WORK/NAME with FAULTS faults at drawn steps (0:
# undisturbed), and with END set one more kill -9 of a ps once a worker waits at max_steps (the end window); it
# must end at max_steps, exit 0, with nothing rolled back. A killed ps is let heal (rejoin, its backups streamed)
# before the next fault.
soak() {
  local name=$1 n=$2 cfg=$3 run=$WORK/$1 lp
  shift 3
  rm -f "$WORK/faults"
  setsid "$TFX_NODE" local --config "$cfg" --run-dir "$run" --max-steps $MAX --set training.seed=7 \
    --set checkpoint.every_steps=0 --set cluster.request_timeout_s=20 "$@" >"$WORK/$name.log" 2>&1 &
  lp=$!
  PIDS+=($lp)
  local kills=0 what
  for STEP in $([ "$n" -gt 0 ] && schedule "$n" $((MAX / 10)) $((MAX / 2))); do
    await_step "$run" "$STEP" $lp || break
    what=$(pick kill9:ps kill9:ps stop:worker stop:ps stop:chief)
    fault "$run" "$what"
    [ "${what%%:*}" = kill9 ] && kills=$((kills + 1)) && healed "$run" $kills $lp
  done
  [ -n "${END:-}" ] && end_window "$run" $lp
  wait_exit 300 $lp || fail "$name: local exited $? (or hung) after $(tr '\n' ';' <"$WORK/faults" 2>/dev/null): $(tail -2 "$WORK/$name.log")"
  ! grep -hiE 'ROLLBACK|rolling every ps back|MASTER-PS-LOST|MASTER-NO-FAILOVER' "$WORK/$name.log" "$run"/logs/*.log ||
    fail "$name: rolled back after $(tr '\n' ';' <"$WORK/faults" 2>/dev/null)"
  touch "$WORK/faults"
}
soak calm 0 "$WORK/mlp.json"
"$TFX_NODE" export --run-dir "$WORK/calm" --out "$WORK/calm.export" >/dev/null 2>&1 || fail "calm: export failed"
digest "$WORK/calm.export" >"$WORK/calm.digest"
END=1 soak sync 3 "$WORK/mlp.json"
sync_faults=$(tr '\n' ';' <"$WORK/faults")
grep -q "step $MAX: kill9" "$WORK/faults" || fail "sync: the end window's kill did not land ($sync_faults)"

"$TFX_NODE" export --run-dir "$WORK/sync" --out "$WORK/sync.export" >/dev/null 2>&1 || fail "sync: export failed"
digest "$WORK/sync.export" >"$WORK/sync.digest"
cmp -s "$WORK/calm.digest" "$WORK/sync.digest" || fail "sync: weights differ from the undisturbed run's after $sync_faults"
led=$(ledger_balanced "$WORK/sync" 2>&1) || fail "sync: the ledger does not balance after $sync_faults: $led"
MAX=$((MAX * 4)) soak async 2 "$WORK/lr.json"
led=$(ledger_balanced "$WORK/async" "$(pushes_made "$WORK/async")" 2>&1) ||
  fail "async LR: the ledger does not balance after $(tr '\n' ';' <"$WORK/faults"): $led"
pass "seed $SEED: sync MLP after $sync_faults bit-identical, ledger balanced; async LR after $(tr '\n' ';' <"$WORK/faults") ledger $led"
