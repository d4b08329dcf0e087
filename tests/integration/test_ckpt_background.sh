#!/bin/bash
# checkpoint.background (#26): a ps writes its checkpoints from a copy taken at the step, in a writer thread, while
# it goes on stepping. The files hold what a write in the ps's own thread holds: a sparse sync cluster (2 ps,
# 2 workers) checkpointing every 5 steps with incremental row files restores the same tensors bit for bit at every
# compared step with the writer thread (the default) and without it; the writer thread's runs log where it wrote
# (PS-TABLE "by the writer thread"), every multiple is complete and none is missed.
. "$(dirname "$0")/lib.sh"
python3 "$(dirname "$0")/sparse_data.py" "$WORK"
experiment "$WORK/lr.json" model.input_shape='[1048576]' \
  model.layers='[{"type": "embedding_bag", "units": 4, "combiner": "sum"}]' model.loss='"softmax_cross_entropy"' \
  data.format='"libsvm"' data.train.images="\"$WORK/train.libsvm\"" data.eval.images="\"$WORK/test.libsvm\"" \
  data.scale=1 optimizer.name='"adagrad"' optimizer.learning_rate=0.5 training.batch_size=32 training.epochs=1 \
  training.report_every=50 eval.every_steps=0 checkpoint.every_steps=5 checkpoint.keep_max=1000 \
  checkpoint.incremental=true training.mode='"sync"'

for bg in true false; do
  "$TFX_NODE" local --config "$WORK/lr.json" --run-dir "$WORK/bg-$bg" --ps 2 --workers 2 \
    --set checkpoint.background=$bg >"$WORK/bg-$bg.log" 2>&1 || fail "background=$bg: $(tail -2 "$WORK/bg-$bg.log")"
done
grep -q "MASTER-CKPT-MISSED" "$WORK"/bg-*/logs/master-0.log && fail "a multiple was missed: $(grep -h MISSED "$WORK"/bg-*/logs/master-0.log)"
grep -q "by the writer thread" "$WORK"/bg-true/logs/ps-0.log || fail "the default run's ps 0 did not write in its writer thread"
grep -q "by the writer thread" "$WORK"/bg-false/logs/ps-*.log && fail "background=false still wrote in a writer thread"
last=$(ls "$WORK/bg-true/checkpoints" | tail -1 | sed 's/ckpt-0*//')
[ "$last" = "$(ls "$WORK/bg-false/checkpoints" | tail -1 | sed 's/ckpt-0*//')" ] || fail "the runs ended at other steps"
for s in 5 25 45 $last; do
  same_at_step "$s" bg-true bg-false || fail "step $s: the writer thread's checkpoint holds other values"
done
pass "checkpoints written by the writer thread restore the same tensors bit for bit as written in place (steps 5, 25, 45, $last; incremental)"
