"""kill_ps_at.py LOG RUN STEP LP [PS [MOD:LO-HI]]: kill -9 of ps PS of a `local` cluster once RUN/metrics.jsonl has a
train step >= STEP (and in the window MOD:LO-HI), the workers held meanwhile (with KILL_PS_AFTER_EVAL=1 in the
environment, held until RUN/metrics.jsonl has an evaluation too, and the evaluations recorded by then are counted
in the line printed); exit 1 when the run ended first.
lib.sh's kill_ps_at says more."""
import os, re, signal, sys, time

from run_state import alive, train_step
log, run, at, lp = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ps = sys.argv[5] if len(sys.argv) > 5 else "0"
mod, lo, hi = (int(x) for x in re.split("[:-]", sys.argv[6])) if len(sys.argv) > 6 else (1, 0, 0)
def step():
    return train_step(run)
while step() < at or not lo <= step() % mod <= hi:
    if not alive(lp):
        sys.exit(1)
    time.sleep(0.02 if mod == 1 else 0.002)
text = open(log).read()
workers = {w: int(p) for w, p in re.findall(r"LOCAL-SPAWN worker ([0-9]+): pid ([0-9]+)", text)}
victim = int(re.findall(r"LOCAL-SPAWN ps " + ps + r": pid ([0-9]+)", text)[-1])
for p in workers.values():
    os.kill(p, signal.SIGSTOP)
# KILL_PS_AFTER_EVAL=1: the kill waits (the workers held) for an evaluation record, so that one comes before it
deadline = time.time() + 300
while os.environ.get("KILL_PS_AFTER_EVAL") and time.time() < deadline and not any(
        '"eval"' in l for l in open(run + "/metrics.jsonl")):
    time.sleep(0.05)
s = step()
evals = sum('"eval"' in l for l in open(run + "/metrics.jsonl"))
os.kill(victim, signal.SIGKILL)
for p in workers.values():
    os.kill(p, signal.SIGCONT)
print(f"killed ps {ps} (pid {victim}) at step {s}" + (f" after {evals} evaluations" if os.environ.get("KILL_PS_AFTER_EVAL") else ""))
