# The followed-directory tests' setup (sourced after lib.sh): six LibSVM parts in $WORK/parts (3 classes, a hot few
# hundred ids and a long tail), $WORK/follow.json (a sync cluster following $WORK/in, a capped lazy table,
# incremental checkpoints every second), and seen / land / near.
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
seen() { python3 "$PYLIB/train_sum.py" "$WORK/run/metrics.jsonl" examples_seen; }
land() { for f in "$@"; do cp "$WORK/parts/$f.libsvm" "$WORK/in/.$f.tmp" && mv "$WORK/in/.$f.tmp" "$WORK/in/$f.libsvm"; done; }
# near ROWS: every landed row trained on but for the partial batches (each worker fewer than one batch, and a
# step one worker could not complete).
near() { local s; s=$(seen); [ "$s" -ge $(($1 - 64)) ] && [ "$s" -le "$1" ]; }
# checkpointed: the newest complete checkpoint is at or past every train step reported (the dry stream's state is
# in a checkpoint: what a Ctrl-C or a kill then finds).
checkpointed() {
  local c s
  c=$(newest_ckpt "$WORK/run") || return 1
  s=$(python3 -c 'import json,sys; print(max([json.loads(l).get("step", 0) for l in open(sys.argv[1]) if "\"train\"" in l], default=0))' "$WORK/run/metrics.jsonl") || return 1
  [ "$((10#${c##*-}))" -ge "$s" ]
}
