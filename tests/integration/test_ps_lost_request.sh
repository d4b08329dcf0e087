#!/bin/bash
# A ps that dies holding the master's request (replicas off): ps 0 is stopped (SIGSTOP) until the master's version
# poll (every 200 ms) waits unread in its socket (lib/unread.py), then killed with kill -9, so the request dies with it. The
# master sees the connection drop (linkwatch) and rolls every ps back at once (MASTER-PS-LOST) instead of waiting
# cluster.request_timeout_s (60 s, the default, kept here) for a reply that can never come ("no reply within
# 60000 ms" before the fix; 1 bench/replicas roll-back in 3 stalled 62 s so). The run then trains to max_steps.
. "$(dirname "$0")/lib.sh"
MAX=600
python3 "$(dirname "$0")/sparse_data.py" "$WORK" --train 2000 --test 200
sparse_lr_experiment "$WORK/lr.json" training.report_every=1
run=$WORK/run
"$TFX_NODE" local --config "$WORK/lr.json" --run-dir "$run" --max-steps $MAX --set cluster.replicas=0 \
  --set training.seed=7 --set checkpoint.every_steps=100 >"$WORK/run.log" 2>&1 &
lp=$!
PIDS+=($lp)
python3 - "$WORK/run.log" "$run" 200 "$lp" "$PYLIB" <<'PY' || fail "ps 0 not killed with a request of the master's unread"
import json, os, re, signal, sys, time
log, run, at, lp = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, sys.argv[5])
from unread import unread_from
def step():
    try:
        return max([json.loads(l).get("step", 0) for l in open(run + "/metrics.jsonl") if '"train"' in l], default=-1)
    except (OSError, ValueError):
        return -1
while step() < at:
    os.kill(lp, 0)  # the run ended: OSError, exit 1
    time.sleep(0.02)
text = open(log).read()
victim = int(re.findall(r"LOCAL-SPAWN ps 0: pid ([0-9]+)", text)[-1])
master = int(re.findall(r"LOCAL-SPAWN master 0: pid ([0-9]+)", text)[-1])
os.kill(victim, signal.SIGSTOP)
t0 = time.time()
while not unread_from(victim, master):  # a version poll (every 200 ms) waits unread in the stopped ps's socket
    if time.time() - t0 > 30:
        sys.exit("no request of the master's reached the stopped ps 0 within 30 s")
    time.sleep(0.05)
os.kill(victim, signal.SIGKILL)
print(f"ps 0 (pid {victim}) stopped at step {step()}, killed {time.time() - t0:.2f} s later, a request of the master's unread")
PY
wait "$lp" || fail "local exited $?: $(tail -2 "$WORK/run.log")"
grep -h "no reply within 60000 ms" "$WORK/run.log" "$run"/logs/*.log && fail "the master waited out the request timeout for a request lost with its ps"
grep -qh MASTER-PS-LOST "$WORK/run.log" "$run"/logs/*.log || fail "the master never rolled back after ps 0 died"
[ "$(metric "$run/metrics.jsonl" train step)" -ge $((MAX - 20)) ] || fail "did not train to $MAX"
pass "ps 0 killed with the master's request unread: the connection's drop ended the wait, the roll-back followed at once, the run trained to $MAX"
