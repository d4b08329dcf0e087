#!/bin/bash
# training.epochs: a run stops at the first global step at which the epochs are done, ceil(E * N / examples per
# global step), on a 150-row CSV: the single-process trainer (8 a step: 38 steps for 2 epochs), --max-steps
# still capping it, and a local sync cluster of 2 workers (16 a step: 19), once reading the file whole and once
# streaming two shard files by file, and a TF_CONFIG cluster whose evaluator task stops after the budget's
# checkpoint; every process logs the same budget (TRAIN-EPOCHS).
. "$(dirname "$0")/lib.sh"
python3 - "$WORK" <<'PY'
import random, sys
work = sys.argv[1]
random.seed(7)
rows = [(",".join(f"{random.gauss(i % 3, 0.5):.3f}" for _ in range(4)), i % 3) for i in range(150)]
def write(name, part):
    with open(f"{work}/{name}", "w") as f:
        f.write("a,b,c,d,label\n")
        f.writelines(f"{x},{y}\n" for x, y in part)
write("all.csv", rows)
write("part-0.csv", rows[:90])
write("part-1.csv", rows[90:])
PY
LAYERS='[{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]'
exp() { # exp OUT TRAIN-FILES KEY=VALUE...: the 4-feature, 3-class experiment on the CSV, 2 epochs of batch 8
  local out=$1 train=$2; shift 2
  experiment "$out" data.format='"csv"' data.train.images="\"$train\"" data.eval.images="\"$WORK/all.csv\"" \
    data.label_column='"label"' data.scale=1 model.input_shape='[4]' model.layers="$LAYERS" training.batch_size=8 \
    training.epochs=2 training.max_steps=1000 training.report_every=5 eval.every_steps=0 checkpoint.every_steps=0 "$@"
}
# last_step RUN: the step of the run's last checkpoint.
last_step() { ls "$1/checkpoints" | sed -n 's/^ckpt-0*\([0-9]\)/\1/p' | sort -n | tail -1; }

exp "$WORK/e.json" "$WORK/all.csv"
"$TFX_NODE" train --config "$WORK/e.json" --run-dir "$WORK/run-train" >"$WORK/train.log" 2>&1 || fail "train: $(tail -1 "$WORK/train.log")"
grep -q "TRAIN-EPOCHS 2 epochs of 150 examples at 8 a step: 38 steps (max_steps 1000)" "$WORK/train.log" || fail "train: no budget logged"
[ "$(last_step "$WORK/run-train")" = 38 ] || fail "train: last checkpoint at $(last_step "$WORK/run-train"), want 38"
[ "$(metric "$WORK/run-train/metrics.jsonl" train step)" = 38 ] || fail "train: last train record not at step 38"
[ "$(metric "$WORK/run-train/metrics.jsonl" eval step)" = 38 ] || fail "train: final evaluation not at step 38"
echo "train: 2 epochs of 150 at 8 a step stop at 38"

"$TFX_NODE" train --config "$WORK/e.json" --run-dir "$WORK/run-cap" --max-steps 10 >"$WORK/cap.log" 2>&1 || fail "train --max-steps: $(tail -1 "$WORK/cap.log")"
[ "$(last_step "$WORK/run-cap")" = 10 ] || fail "--max-steps 10 under a budget of 38: stopped at $(last_step "$WORK/run-cap")"

"$TFX_NODE" local --workers 2 --config "$WORK/e.json" --run-dir "$WORK/run-local" >"$WORK/local.log" 2>&1 || fail "local: $(tail -1 "$WORK/local.log")"
[ "$(last_step "$WORK/run-local")" = 19 ] || fail "local sync, 2 workers: last checkpoint at $(last_step "$WORK/run-local"), want 19"
[ "$(grep -l "TRAIN-EPOCHS 2 epochs of 150 examples at 16 a step: 19 steps" "$WORK"/run-local/logs/{master,worker}-*.log | wc -l)" = 3 ] ||
  fail "local: master and both workers do not log the same budget"
[ "$(grep -h -o "WORKER-DONE stopped at global step [0-9]*" "$WORK"/run-local/logs/worker-*.log | sort -u)" = "WORKER-DONE stopped at global step 19" ] ||
  fail "local: workers did not stop at 19"
echo "local sync, 2 workers: 16 a step, stop at 19"

exp "$WORK/s.json" "$WORK/part-*.csv" data.stream=true data.shard_by='"file"' data.shuffle_buffer=50
"$TFX_NODE" local --workers 2 --config "$WORK/s.json" --run-dir "$WORK/run-stream" >"$WORK/stream.log" 2>&1 || fail "streamed local: $(tail -1 "$WORK/stream.log")"
[ "$(last_step "$WORK/run-stream")" = 19 ] || fail "streamed by file: last checkpoint at $(last_step "$WORK/run-stream"), want 19"
grep -q "2 epochs of 150 examples" "$WORK"/run-stream/logs/master-0.log || fail "streamed: the files' examples not summed"
# A TF_CONFIG evaluator task stops after the checkpoint at the budget's step (1 worker: 8 a step, 38), not at
# max_steps 1000, which it would wait for for ever.
c0=$(free_port); p0=$(free_port); w0=$(free_port); e0=$(free_port)
cluster="\"cluster\":{\"chief\":[\"127.0.0.1:$c0\"],\"ps\":[\"127.0.0.1:$p0\"],\"worker\":[\"127.0.0.1:$w0\"],\"evaluator\":[\"127.0.0.1:$e0\"]}"
start() { # start NAME TYPE ARGS...
  local name=$1 type=$2; shift 2
  TF_CONFIG="{$cluster,\"task\":{\"type\":\"$type\",\"index\":0}}" "$TFX_NODE" --run-dir "$WORK/run-eval" "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
}
start evaluator evaluator --config "$WORK/e.json"
start chief chief --config "$WORK/e.json"
start ps ps
start worker worker
for _ in $(seq 1 300); do kill -0 "${PIDS[0]}" 2>/dev/null || break; sleep 0.2; done
kill -0 "${PIDS[0]}" 2>/dev/null && fail "evaluator still running 60 s on: it waits for a step past the budget"
for i in 0 1 2 3; do
  wait "${PIDS[$i]}"; rc=$?
  [ "$rc" = 0 ] || fail "evaluator cluster: process $i exited $rc"
done
grep -q "TRAIN-EPOCHS 2 epochs of 150 examples at 8 a step: 38 steps" "$WORK/evaluator.log" || fail "evaluator: no budget logged"
[ "$(metric "$WORK/run-eval/metrics.jsonl" eval step)" = 38 ] || fail "evaluator: last evaluation not at step 38"
echo "evaluator task: stopped after the checkpoint at 38"
pass "training.epochs stops at ceil(E * N / examples per step)"
