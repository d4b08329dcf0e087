#!/bin/bash
# A worker lost, then a ps, with lazy tables kept by checkpoints (cluster.replicas 1, #27): the backup of a plain
# lazy table holds the primary's last checkpoint and the workers keep their pushes since; a worker killed with
# kill -9 comes back without the pushes it kept, so the primary catches its backup up (the rows touched since the
# checkpoint, PS-REPLICA-CATCH-UP: once no step completes for a while, and again when the worker comes back on a
# new connection). Then ps 0 is killed with kill -9 before the next checkpoint: its backup is promoted at a step
# at or past the worker's return, the workers' resent pushes replay the rest, and the sync LR (2 ps, 2 workers)
# trains to max_steps with no roll-back, no step of a worker going back and no wait for a push that died, its final
# checkpoint (Adagrad's slots included) bit-identical to the same-seed run's undisturbed: a promoted backup with
# stale rows would differ.
. "$(dirname "$0")/lib.sh"
MAX=1200
python3 "$(dirname "$0")/sparse_data.py" "$WORK" --train 2000 --test 200
sparse_lr_experiment "$WORK/lr.json" training.report_every=5
# start NAME: the run, in the background (LP)
start() {
  start_local "$1" --config "$WORK/lr.json" --run-dir "$WORK/$1" --max-steps $MAX --set cluster.replicas=1 \
    --set training.seed=7 --set checkpoint.every_steps=300 --set cluster.request_timeout_s=60
}
start calm
wait_and_digest calm "$LP" "$WORK/calm"
run=$WORK/run
start run
lp=$LP
python3 - "$WORK/run.log" "$run" "$lp" "$PYLIB" <<'PY' || fail "the kills did not happen before the run ended"
import json, os, re, signal, sys, time
log, run, lp = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, sys.argv[4])
from cluster_pid import pid_of
def step():
    try:
        return max([json.loads(l).get("step", 0) for l in open(run + "/metrics.jsonl") if '"train"' in l], default=-1)
    except (OSError, ValueError):
        return -1
def wait_step(at):
    while step() < at:
        os.kill(lp, 0)  # the run ended: OSError, exit 1
        time.sleep(0.02)
def pid(task):
    return int(re.findall(r"LOCAL-SPAWN " + task + r": pid ([0-9]+)", open(log).read())[-1])
wait_step(360)
os.kill(pid("worker 1"), signal.SIGKILL)
back = step()
print(f"worker 1 killed at step {back}")
wait_step(back + 80)  # back and training, past the catch-up; the next checkpoint is at 600
workers = [pid_of(lp, "worker", 0), pid_of(lp, "worker", 1)]
if None in workers:
    sys.exit(f"no worker to hold: {workers}")
for w in workers:  # held, so that the kill lands at the step seen however fast the run trains
    os.kill(w, signal.SIGSTOP)
at = step()
os.kill(pid("ps 0"), signal.SIGKILL)
for w in workers:
    os.kill(w, signal.SIGCONT)
print(f"ps 0 killed at step {at}")
PY
wait_and_digest run "$lp" "$run"
[ "$(metric "$run/metrics.jsonl" train step)" -ge $((MAX - 10)) ] || fail "did not train to $MAX"
grep -q "LOCAL-RESTART worker 1" "$WORK/run.log" || fail "worker 1 was not restarted"
grep -q PS-PROMOTED "$run"/logs/ps-1.log || fail "ps 1 was not promoted"
grep -hiE 'MASTER-PS-LOST|MASTER-NO-FAILOVER' "$WORK/run.log" "$run"/logs/*.log && fail "rolled back"
grep -hq "PS-REPLICA-CATCH-UP ps instance 0" "$run"/logs/ps-0.log || fail "ps 0 never caught its backup up"
promoted=$(grep -h PS-PROMOTED "$run"/logs/ps-1.log | sed 's/.* at step \([0-9]*\).*/\1/' | head -1)
[ "$promoted" -gt 360 ] || fail "the backup was promoted at step $promoted, before the worker came back"
grep -h "WORKER-PS-WAIT" "$run"/logs/worker-*.log | grep -q "but the ps is at step" &&
  fail "a worker waited for a step the promoted backup lacked: $(grep -h WORKER-PS-WAIT "$run"/logs/worker-*.log | head -1)"
steps_never_back "$run/metrics.jsonl" || fail "a worker's step went back"
cmp -s "$WORK/calm.digest" "$WORK/run.digest" ||
  fail "the state differs from the undisturbed run's: $(diff "$WORK/calm.digest" "$WORK/run.digest" | head -6)"
pass "worker 1 killed and back, then ps 0: the backup caught up (promoted at step $promoted), trained to $MAX without a roll-back, weights and slots bit-identical to the undisturbed run"
