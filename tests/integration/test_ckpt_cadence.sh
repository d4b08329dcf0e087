#!/bin/bash
# checkpoint.every_steps is honoured exactly however fast the steps come (#28): the ps write their checkpoint
# files by themselves at every multiple of every_steps and the chief collects them and writes the manifests, so
# a sparse cluster (2 ps, 2 workers) checkpointing every 5 steps has a complete checkpoint at every multiple of 5
# and at its final step, in sync and in async mode, with full and with incremental checkpoints. The incremental
# run's chains of 5-step deltas restore the same tensors bit for bit as the full run's checkpoints (sync).
. "$(dirname "$0")/lib.sh"
python3 "$(dirname "$0")/sparse_data.py" "$WORK"
experiment "$WORK/lr.json" model.input_shape='[1048576]' \
  model.layers='[{"type": "embedding_bag", "units": 4, "combiner": "sum"}]' model.loss='"softmax_cross_entropy"' \
  data.format='"libsvm"' data.train.images="\"$WORK/train.libsvm\"" data.eval.images="\"$WORK/test.libsvm\"" \
  data.scale=1 optimizer.name='"adagrad"' optimizer.learning_rate=0.5 training.batch_size=32 training.epochs=1 \
  training.report_every=50 eval.every_steps=0 checkpoint.every_steps=5 checkpoint.keep_max=1000

# cadence NAME MODE INCREMENTAL: the run's complete checkpoints are exactly the multiples of 5 and its last step.
cadence() {
  "$TFX_NODE" local --config "$WORK/lr.json" --run-dir "$WORK/$1" --ps 2 --workers 2 --set training.mode="\"$2\"" \
    --set checkpoint.incremental="$3" >"$WORK/$1.log" 2>&1 || fail "$1: $(tail -2 "$WORK/$1.log")"
  python3 - "$WORK/$1/checkpoints" <<'PY' || fail "$1: the checkpoints are not every multiple of 5"
import os, sys
d = sys.argv[1]
steps = sorted(int(n[5:]) for n in os.listdir(d) if n.startswith("ckpt-") and os.path.exists(f"{d}/{n}/manifest.json"))
last = steps[-1]
want = list(range(5, last, 5)) + [last]
if steps != want or last < 50:
    print("complete checkpoints:", steps, "want:", want); sys.exit(1)
print(f"{len(steps)} checkpoints: 5, 10, ..., {want[-2]}, {last}")
PY
}
cadence sync-full sync false
cadence sync-inc sync true
cadence async-inc async true
grep -q "MASTER-CKPT-MISSED" "$WORK"/*/logs/master-0.log && fail "a multiple was missed: $(grep -h MISSED "$WORK"/*/logs/master-0.log)"
# The incremental run's checkpoints are deltas (a row file naming the step it applies to) ...
[ "$(ls "$WORK"/sync-inc/checkpoints/ckpt-*/ps-0.rows | wc -l)" -ge 10 ] || fail "no row files in the incremental run"
# ... and a chain of them restores what the full checkpoint of the same sync step holds.
last=$(ls "$WORK/sync-full/checkpoints" | grep -c ckpt-)
for s in 45 $(ls "$WORK/sync-full/checkpoints" | tail -1 | sed 's/ckpt-0*//'); do
  same_at_step "$s" sync-full sync-inc || fail "step $s: the delta chain restores other values"
done
pass "every multiple of checkpoint.every_steps=5 is a complete checkpoint (sync and async, full and incremental, $last in the full run); delta chains restore the full run's tensors"
