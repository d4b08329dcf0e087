"""What the kill helpers (kill_at.py, kill_ps_at.py) ask of a running `local` cluster: whether a process lives, and
the highest train step its run directory's metrics.jsonl records."""
import json, os


def alive(pid):
    """Whether process pid exists."""
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def train_step(run):
    """The highest step of RUN/metrics.jsonl's train records, or -1 (none yet, or the file unreadable)."""
    try:
        steps = [json.loads(l).get("step", 0) for l in open(run + "/metrics.jsonl") if '"train"' in l]
    except (OSError, ValueError):
        return -1
    return max(steps, default=-1)
