#!/bin/bash
# Chaos: a tfx-node local run (MLP, sync, 2 ps, 2 workers) during which a random live process of the cluster
# (master, ps or worker) is killed with kill -9 every few seconds. The supervisor restarts each one (a log line
# names it), a lost ps rolls every ps back to the newest checkpoint, a new master resumes from it, and the run
# must still finish at max_steps with exit 0 and test accuracy >= 0.85 (an undisturbed run of the same length
# reaches about 0.87). No process is killed more than KILLS_PER_PROCESS times, so the restart budget (5) holds.
# Env: TFX_CHAOS_STEPS (default 3000), TFX_CHAOS_EVERY (seconds between kills at most, default 4),
# TFX_CHAOS_REPLICAS (cluster.replicas, default 0; test_chaos_replicas.sh runs it with 1: a lost ps then fails over
# to its backup, and a ps lost with its backup, or a chief restarted, still ends the same way).
. "$(dirname "$0")/lib.sh"
STEPS=${TFX_CHAOS_STEPS:-3000}
EVERY=${TFX_CHAOS_EVERY:-4}
KILLS_PER_PROCESS=3
small_mlp "$WORK/exp.json" training.max_steps="$STEPS" eval.every_steps=0 checkpoint.every_steps=100 \
  checkpoint.keep_max=3 training.report_every=50 cluster.request_timeout_s=5 cluster.register_timeout_s=60 \
  cluster.replicas="${TFX_CHAOS_REPLICAS:-0}"
RUN=$WORK/run
"$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$RUN" >"$WORK/local.log" 2>&1 &
LP=$!
PIDS+=($LP)

# task_of PID: "ROLE-INDEX" of a cluster process, from the TF_CONFIG the supervisor gave it.
task_of() {
  tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | sed -n 's/^TF_CONFIG=.*"task":{"type":"\([a-z]*\)","index":\([0-9]*\)}.*/\1-\2/p'
}
declare -A KILLS
killed=0
started=$(date +%s)
# A kill comes when the run has advanced STEPS/12 steps since the last one (or EVERY seconds passed): from
# progress, so a fast machine sees as many kills as a slow one.
train_step() { metric "$RUN/metrics.jsonl" train step 2>/dev/null | grep -E '^[0-9]+$' || echo 0; }
last_step=0; last_kill=$(date +%s)
while kill -0 "$LP" 2>/dev/null; do
  sleep 0.2
  now_step=$(train_step)
  [ $((now_step - last_step)) -ge $((STEPS / 12)) ] || [ $(( $(date +%s) - last_kill )) -ge "$EVERY" ] || continue
  # Kills reach the end of the run too: workers wait at max_steps for the chief's final checkpoint, so a ps or a
  # chief lost there rolls the cluster back and they train the lost steps again (test_final_ckpt pins it down).
  last_step=$now_step; last_kill=$(date +%s)
  # The supervisor's children are the cluster; only those still under the per-process kill cap are candidates.
  candidates=()
  for p in $(pgrep -P "$LP"); do
    t=$(task_of "$p")
    [ -n "$t" ] && [ "${KILLS[$t]:-0}" -lt "$KILLS_PER_PROCESS" ] && candidates+=("$p:$t")
  done
  [ ${#candidates[@]} -gt 0 ] || continue
  pick=${candidates[RANDOM % ${#candidates[@]}]}
  # With replicas, the first kill is a ps's, so that every run has a failover to check (a random pick may miss
  # both ps).
  if [ "${TFX_CHAOS_REPLICAS:-0}" = 1 ] && [ "$killed" = 0 ]; then
    for c in "${candidates[@]}"; do [[ "$c" == *:ps-* ]] && pick=$c && break; done
  fi
  kill -9 "${pick%%:*}" 2>/dev/null || continue
  KILLS[${pick#*:}]=$(( ${KILLS[${pick#*:}]:-0} + 1 ))
  killed=$((killed + 1))
  echo "chaos: t=$(( $(date +%s) - started ))s kill -9 ${pick#*:} (pid ${pick%%:*})"
done
wait_exit 600 "$LP"; rc=$?
elapsed=$(( $(date +%s) - started ))
[ "$rc" = 0 ] || fail "the run exited $rc after $killed kills: $(tail -3 "$WORK/local.log")"
[ "$killed" -ge 5 ] || fail "only $killed kills in ${elapsed}s: the run was too short to be chaos"
restarts=$(grep -c "LOCAL-RESTART" "$WORK/local.log")
[ "$restarts" -ge "$killed" ] || fail "$killed kills but $restarts restarts logged"
step=$(metric "$RUN/metrics.jsonl" eval step); acc=$(metric "$RUN/metrics.jsonl" eval accuracy)
[ "$step" = "$STEPS" ] || fail "the run ended at step $step, want $STEPS"
ge "$acc" 0.85 || fail "accuracy $acc after $killed kills, want >= 0.85"
if [ "${TFX_CHAOS_REPLICAS:-0}" = 1 ]; then
  # A lost ps fails over to its backup; the cluster rolls back only when a ps and its backup were lost together
  # (MASTER-NO-FAILOVER names it): a failover that never happens, or a roll-back that stands in for it, fails.
  failovers=$(cat "$RUN"/logs/master-*.log | grep -c MASTER-FAILOVER)
  [ "$failovers" -ge 1 ] || fail "no failover in $killed kills (ps kills: ${KILLS[ps-0]:-0}+${KILLS[ps-1]:-0})"
  if grep -hqiE 'ROLLBACK|rolling every ps back|MASTER-PS-LOST' "$WORK/local.log" "$RUN"/logs/*.log &&
    ! grep -hq MASTER-NO-FAILOVER "$RUN"/logs/*.log; then
    fail "rolled back without a MASTER-NO-FAILOVER: $(rolled_back "$WORK/local.log" "$RUN"/logs/*.log | head -3)"
  fi
  echo "chaos: $failovers failover(s), $(cat "$RUN"/logs/*.log | grep -c MASTER-NO-FAILOVER) without a backup"
fi
for t in "${!KILLS[@]}"; do echo "chaos: $t killed ${KILLS[$t]} time(s)"; done
pass "$killed kills in ${elapsed}s (${restarts} restarts), finished at step $step with accuracy $acc"
