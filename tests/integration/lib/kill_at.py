"""kill_at.py LOG RUN LP PHASE [-- PHASE ...]: kill -9 of processes of a `local` cluster (output LOG, supervisor pid
LP, run directory RUN) at chosen moments, one PHASE after the other. A PHASE is `step STEP[@MOD:LO-HI] VICTIM...`
(once RUN/metrics.jsonl has a train step >= STEP, and with @MOD:LO-HI one whose remainder modulo MOD lies in LO..HI:
a kill inside a batch of MOD steps, which wants training.report_every 1) or `respawn ROLE:K DELAY_MS VICTIM...` (DELAY_MS after `local` spawned
ROLE K again, since it was killed in an earlier phase, or since this phase began). A VICTIM is ps:K or worker:K; a
phase's victims die at once, the workers held (SIGSTOP) from the moment it is due until they are dead, so that no
step runs in between however fast the run trains. Prints a line a phase (what it killed, at which step); exits 1
when the run ended (or 120 s passed) before a phase was due. lib.sh's kill_at says more."""
import os, re, signal, sys, time

from run_state import alive, train_step

log, run, lp = sys.argv[1], sys.argv[2], int(sys.argv[3])


def step():
    return train_step(run)


def spawns(victim):
    """The pids `local` spawned (LOCAL-SPAWN) and restarted (LOCAL-RESPAWN) for VICTIM (role:k), oldest first."""
    role, k = victim.split(":")
    return [int(p) for p in re.findall(r"LOCAL-(?:RE)?SPAWN " + role + " " + k + r": pid ([0-9]+)", open(log).read())]


def wait_until(due):
    t0 = time.time()
    while not due():
        if not alive(lp) or time.time() - t0 > 120:
            sys.exit(1)
        time.sleep(0.001)


def signal_all(pids, sig):
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:  # a worker between its death and `local`'s restart of it
            pass


killed_at = {}  # victim: its spawns when it was killed
phases, cur = [], []
for a in sys.argv[4:] + ["--"]:
    if a == "--":
        phases.append(cur)
        cur = []
    else:
        cur.append(a)
for ph in phases:
    if ph[0] == "step":
        at, _, window = ph[1].partition("@")
        mod, lo, hi = (int(x) for x in re.split("[:-]", window)) if window else (1, 0, 0)
        at, victims, due = int(at), ph[2:], ""
        wait_until(lambda: (lambda s: s >= at and lo <= s % mod <= hi)(step()))
    else:
        who, delay, victims = ph[1], int(ph[2]), ph[3:]
        before = killed_at.get(who, len(spawns(who)))
        wait_until(lambda: len(spawns(who)) > before)
        time.sleep(delay / 1000.0)
        due = f", {delay} ms after {who} was spawned again (pid {spawns(who)[-1]})"
    text = open(log).read()
    workers = [spawns("worker:" + w)[-1] for w in sorted(set(re.findall(r"LOCAL-SPAWN worker ([0-9]+):", text)))]
    pids = [spawns(v)[-1] for v in victims]
    signal_all(workers, signal.SIGSTOP)
    s = step()
    for v in victims:
        killed_at[v] = len(spawns(v))
    signal_all(pids, signal.SIGKILL)
    signal_all([p for p in workers if p not in pids], signal.SIGCONT)
    print(f"killed {' and '.join(f'{v} (pid {p})' for v, p in zip(victims, pids))} at step {s}{due}", flush=True)
