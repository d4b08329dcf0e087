"""cluster_pid.py: pid_of(lp, kind, index), the pid of the `local` supervisor lp's child running task kind/index (a
restarted one too, which local logs no LOCAL-SPAWN line for), from its TF_CONFIG; None when there is none. Imported
by tests' Python (sys.path gets lib.sh's $PYLIB)."""
import os, re


def pid_of(lp, kind, index):
    want = f'"type":"{kind}","index":{index}'
    for d in os.listdir("/proc"):
        try:
            ppid = int(re.search(r"PPid:\s+([0-9]+)", open(f"/proc/{d}/status").read()).group(1))
            if ppid == lp and want in open(f"/proc/{d}/environ", "rb").read().decode(errors="replace"):
                return int(d)
        except (OSError, ValueError, AttributeError):
            continue
    return None
