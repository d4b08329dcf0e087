#!/bin/bash
# data.train.follow (#28): a local sync cluster (2 ps, 2 workers) follows a directory with no epochs or max_steps.
# Files land by rename (a '.' name while written); the cluster trains on each once, spread over the workers, until
# Ctrl-C, which takes a final checkpoint; a restart reads on from there: only the new files are trained on, and the
# workers' examples_seen (across restarts) add up to the rows landed. The table is capped (max_rows: 400 rows a ps of 5000 ids) and the
# checkpoints are incremental, so the restart also restores a chain of deltas.
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
follow part-0 part-1 part-2
has_ckpt "$WORK/run" || fail "no checkpoint after Ctrl-C"
s1=$(seen)
grep -q '"examples_seen"' "$WORK/run/metrics.jsonl" || fail "train records carry no examples_seen"
follow part-3 part-4 part-5
s2=$(seen)
[ "$s2" -le 816 ] || fail "after the restart examples_seen is $s2 of 816 rows: a file was trained on twice"
grep -q "PS-RESTORE-ROWS" "$WORK"/run/logs/ps-*.log || fail "the restart restored no rows"
grep -q "checkpoint delta" "$WORK"/run/logs/ps-*.log || fail "no incremental checkpoint was written"
rows=$(grep -ho "PS-TABLE table [^ ]* at step [0-9]*: [0-9]* rows" "$WORK"/run/logs/ps-*.log | awk '{print $(NF-1)}' | sort -n | tail -1)
[ "$rows" -le 400 ] || fail "a ps held $rows rows of a table capped at 400"
# tfx-node plan states the memory the cap implies, the same row size the ps states when it makes the table
"$TFX_NODE" plan --config "$WORK/follow.json" --ps 2 >"$WORK/plan.txt" 2>&1 || fail "plan: $(tail -1 "$WORK/plan.txt")"
row=$(grep -ho "PS-TABLE-CAP table embedding_bag_1/embeddings: max_rows 400 (about [0-9.]* MiB of rows at [0-9]* bytes" \
  "$WORK"/run/logs/ps-0.log | head -1 | awk '{print $(NF-1)}')
[ -n "$row" ] || fail "no PS-TABLE-CAP line in the ps log"
grep -q "embedding_bag_1/embeddings  *max_rows 400 x $row bytes a row = .* MiB a ps at most" "$WORK/plan.txt" ||
  fail "plan does not state the cap of 400 rows x $row bytes: $(cat "$WORK/plan.txt")"
pass "followed: $s1 then $s2 examples of 336 and 816 rows landed, each file once across a Ctrl-C; <= 400 rows a ps"
