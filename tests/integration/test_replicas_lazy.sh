#!/bin/bash
# Replicated lazy tables (cluster.replicas 1, #27): with plain lazy tables (no cap, age or admission) and two workers
# aggregated, the primary's checkpoints are its backup's state (checkpoint.every_steps 100, incremental row files
# here): no summed step goes to the backup (PS-STOP: 0 bytes sent), the workers keep their pushes since the last
# checkpoint, and on promotion the backup loads that checkpoint (PS-BACKUP-REPLAY names the step loaded) and the
# workers' resent pushes replay the steps since (PSCLIENT-RESEND); a table under ttl_steps and admit_min_count has
# its summed steps forwarded and applied by the backup every step, since its sketch and ages are the table's own
# state. For both, a sync LR (2 ps, 2 workers, seed 7) whose ps 0 is killed with kill -9 at about a third of the run
# promotes the backup, rolls nothing back, and exports weights bit-identical to the same run undisturbed. A capped
# table (max_rows 150, evicting all run long) too: the ps applies a sync step's summed rows in id order when the
# table has a cap, since eviction depends on the order rows come (in arrival order two undisturbed runs of one seed
# exported different weights).
. "$(dirname "$0")/lib.sh"
MAX=900
python3 "$(dirname "$0")/sparse_data.py" "$WORK" --train 2000 --test 200
lazy_lr "$WORK/plain.json" "" training.report_every=20
lazy_lr "$WORK/aged.json" ', "ttl_steps": 60, "admit_min_count": 2' training.report_every=20
lazy_lr "$WORK/capped.json" ', "max_rows": 150' training.report_every=20
# run LABEL CONFIG KILL(0|1) [CHECKPOINT-EVERY]
run() {
  local run=$WORK/$1
  start_local "$1" --config "$2" --run-dir "$run" --max-steps $MAX --set cluster.replicas=1 \
    --set training.seed=7 --set checkpoint.every_steps="${4:-0}" \
    --set checkpoint.incremental="$([ "${4:-0}" = 0 ] && echo false || echo true)" \
    --set cluster.request_timeout_s=20
  local lp=$LP
  [ "$3" = 1 ] && kill_ps_at "$WORK/$1.log" "$run" $((MAX / 3)) $lp
  wait_and_digest "$1" "$lp" "$run"
  if [ "$3" = 1 ]; then
    [ "$(metric "$run/metrics.jsonl" train step)" -ge $((MAX - 20)) ] || fail "$1: did not train to $MAX"
    grep -q PS-PROMOTED "$run"/logs/ps-1.log || fail "$1: ps 1 was not promoted"
    rolled_back "$WORK/$1.log" "$run"/logs/*.log && fail "$1: rolled back"
    steps_never_back "$run/metrics.jsonl" || fail "$1: a worker's step went back"
  fi
}
# Checkpoints on for every table (every 100 steps): where a plain table's backup is kept by checkpoints, the
# aged, admitted and capped tables' must still get every summed step (rules.c's exclusion; with checkpoints off the
# checkpoint-kept mode never applies and the exclusion is never reached).
every() { echo 100; }
for t in plain aged capped; do
  run ${t}_a "$WORK/$t.json" 0 "$(every $t)"
  run ${t}_b "$WORK/$t.json" 1 "$(every $t)"
  cmp -s "$WORK/${t}_a.digest" "$WORK/${t}_b.digest" ||
    fail "$t table: weights differ after kill -9 of ps 0: $(diff "$WORK/${t}_a.digest" "$WORK/${t}_b.digest")"
done
# the plain table's backup is kept by checkpoints: nothing else went to it; the aged table's got its summed steps
for ps in 0 1; do
  grep -q 'PS-STOP .* 0 bytes sent to its backup' "$WORK/plain_a/logs/ps-$ps.log" ||
    fail "plain table: ps $ps sent its backup more than checkpoint news: $(grep -h PS-STOP "$WORK/plain_a/logs/ps-$ps.log")"
  for t in aged capped; do
    grep -q 'PS-STOP .* [1-9][0-9]* bytes sent to its backup' "$WORK/${t}_a/logs/ps-$ps.log" ||
      fail "$t table: ps $ps sent its backup no summed step: $(grep -h PS-STOP "$WORK/${t}_a/logs/ps-$ps.log")"
  done
done
# the promoted backup loaded a checkpoint of its primary (step 100 or more); the workers replayed the steps since
line=$(grep -h PS-BACKUP-REPLAY "$WORK"/plain_b/logs/ps-1.log | tail -1)
echo "$line" | grep -qE 'checkpoint step [1-9][0-9]+ loaded, no step after it' ||
  fail "plain table: the promoted backup did not load a checkpoint: '$line'"
grep -hq "PSCLIENT-RESEND ps instance 0: [1-9][0-9]* kept push" "$WORK"/plain_b/logs/worker-*.log ||
  fail "plain table: no worker sent its kept pushes again to the promoted backup"
echo "promotion: ${line#*PS-BACKUP-REPLAY}; $(grep -h PSCLIENT-RESEND "$WORK"/plain_b/logs/worker-0.log | tail -1 | sed 's/.*PSCLIENT-RESEND//')"
pass "kill -9 of ps 0 at a third: lazy LR weights bit-identical to the undisturbed run, plain table (kept by checkpoints: loaded, the workers' kept pushes replayed), aged, admitted table and capped table (applied every step)"
