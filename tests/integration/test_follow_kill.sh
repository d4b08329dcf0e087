#!/bin/bash
# A followed stream survives kill -9 (#28 "bad input and faults"): a sync cluster (2 ps, 2 workers, a capped lazy
# table, incremental checkpoints every second) follows a directory; after 3 files kill -9 of worker 0, after 2 more
# kill -9 of ps 0 (local restarts each; the ps's loss rolls the cluster back to the newest checkpoint, with the
# stream positions in it). Every row landed is trained on, none twice: the workers' examples_seen end within a
# partial batch of the rows landed and the global step within one of rows / 32.
. "$(dirname "$0")/lib.sh"
mkdir -p "$WORK/parts" "$WORK/in"
python3 - "$WORK/parts" <<'PY'
import random, sys
random.seed(3)
for f in range(6):  # ids: a hot few hundred and a long tail
    with open(f"{sys.argv[1]}/part-{f}.libsvm", "w") as out:
        for _ in range(96 + 16 * f):
            label = random.randrange(3)
            ids = sorted(set(random.sample(range(1, 300), 5) + random.sample(range(300, 5000), 1) + [5000 + label]))
            out.write(f"{label} " + " ".join(f"{i}:1" for i in ids) + "\n")
PY
cat >"$WORK/follow.json" <<JSON
{"name": "follow", "model": {"input_shape": [6000], "loss": "softmax_cross_entropy",
  "layers": [{"type": "embedding_bag", "units": 3, "combiner": "sum", "max_rows": 400}]},
 "data": {"format": "libsvm", "train": {"follow": "$WORK/in"}, "eval": {"images": "$WORK/parts/part-0.libsvm"},
  "scale": 1},
 "optimizer": {"name": "adagrad", "learning_rate": 0.1},
 "checkpoint": {"every_steps": 1000, "every_secs": 1, "keep_max": 3, "incremental": true, "full_every": 3},
 "training": {"mode": "sync", "batch_size": 16, "report_every": 5, "seed": 1}, "eval": {"every_steps": 0}}
JSON
# seen: the sum over workers of their last examples_seen in the run's metrics.jsonl (-1: none yet).
seen() {
  python3 - "$WORK/run/metrics.jsonl" <<'PY'
import json, sys
last = {}
try:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        if r.get("kind") == "train" and "examples_seen" in r: last[r["worker"]] = r["examples_seen"]
except OSError: pass
print(int(sum(last.values())) if last else -1)
PY
}
land() { for f in "$@"; do cp "$WORK/parts/$f.libsvm" "$WORK/in/.$f.tmp" && mv "$WORK/in/.$f.tmp" "$WORK/in/$f.libsvm"; done; }
# near ROWS: every landed row trained on but for the partial batches (each worker fewer than one batch, and a
# step one worker could not complete).
near() { local s; s=$(seen); [ "$s" -ge $(($1 - 64)) ] && [ "$s" -le "$1" ]; }
# follow FILE...: starts the cluster, lands the files one by one, each once the workers' examples_seen reach the
# rows landed so far (they report while the stream is dry), then Ctrl-C's the process group and waits for the exit.
follow() {
  setsid "$TFX_NODE" local --config "$WORK/follow.json" --run-dir "$WORK/run" >>"$WORK/local.log" 2>&1 &
  local lp=$! f
  PIDS+=("$lp")
  for f in "$@"; do
    land "$f"
    landed=$((landed + $(wc -l <"$WORK/parts/$f.libsvm")))
    wait_for 240 near "$landed" || fail "examples_seen $(seen), rows landed $landed"
    sleep 1.5 # a checkpoint (every_secs 1) while the stream is dry
  done
  kill -INT -- -"$lp"
  wait_exit 120 "$lp" || fail "Ctrl-C did not stop the following cluster"
}
landed=0
setsid "$TFX_NODE" local --config "$WORK/follow.json" --run-dir "$WORK/run" >>"$WORK/local.log" 2>&1 &
lp=$!
PIDS+=("$lp")
# feed FILE...: lands each file once every row landed before it was trained on.
feed() {
  for f in "$@"; do
    land "$f"
    landed=$((landed + $(wc -l <"$WORK/parts/$f.libsvm")))
    wait_for 240 near "$landed" || fail "examples_seen $(seen), rows landed $landed"
  done
}
# kill9 ROLE: kill -9 of ROLE 0 once a checkpoint has passed, then wait for local's restart of it.
kill9() {
  sleep 1.5
  local pid
  pid=$(pid_of "$WORK/run" "$1" 0)
  [ -n "$pid" ] || fail "no $1 0 to kill"
  kill -9 "$pid"
  wait_for 120 grep -q "LOCAL-RESTART $1 0 exited with status 137" "$WORK/local.log" || fail "no restart of $1 0"
}
feed part-0 part-1 part-2
kill9 worker
feed part-3 part-4
kill9 ps
feed part-5
kill -INT -- -"$lp"
wait_exit 120 "$lp" || fail "Ctrl-C did not stop the following cluster"
s=$(seen)
step=$(metric "$WORK/run/metrics.jsonl" train step)
[ "$step" -le $((landed / 32 + 1)) ] || fail "global step $step for $landed rows in steps of 32: rows trained twice"
pass "kill -9 of worker 0 then ps 0 mid-stream: $s examples seen of $landed rows landed, global step $step"
