#!/bin/bash
# Resume after stopping the whole cluster continues the global step and the weights; thres_loss aborts with exit
# 3 and a clear error and keeps the last checkpoint; a partitioned variable trains like an unpartitioned one.
. "$(dirname "$0")/lib.sh"
small_mlp "$WORK/exp.json" training.max_steps=200 eval.every_steps=0 checkpoint.every_steps=100 training.report_every=50
"$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$WORK/run" >"$WORK/first.log" 2>&1 || fail "first run"
acc1=$(metric "$WORK/run/metrics.jsonl" eval accuracy)
lines1=$(wc -l <"$WORK/run/metrics.jsonl")
"$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$WORK/run" --max-steps 400 >"$WORK/second.log" 2>&1 || fail "resumed run"
grep -q "MASTER-RESUME resuming from .*ckpt-000000000200 at step 200" "$WORK/run/logs/master-0.log" || fail "master did not resume at 200"
acc2=$(metric "$WORK/run/metrics.jsonl" eval accuracy); step2=$(metric "$WORK/run/metrics.jsonl" eval step)
[ "$step2" = 400 ] || fail "resumed run ended at step $step2, want 400"
ge "$acc2" "$(python3 -c "print($acc1 - 0.01)")" || fail "accuracy dropped after resume: $acc1 -> $acc2"
# The resumed run goes on from the checkpoint's weights, not only its step: its first training loss is about the
# first run's last (a model re-initialized at step 200 reports a loss over 1 after 50 steps, as at the start).
python3 - "$WORK/run/metrics.jsonl" "$lines1" <<'PY' || fail "the resumed run did not continue the first run's loss"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
first, second = recs[:int(sys.argv[2])], recs[int(sys.argv[2]):]
last = [r["loss"] for r in first if r["kind"] == "train" and r["step"] >= 150]
resumed = [r for r in second if r["kind"] == "train"]
assert last and resumed, (last, resumed)
ref, head = sum(last) / len(last), resumed[0]
print("resume: loss %.3f before, %.3f at step %d after" % (ref, head["loss"], head["step"]))
assert 200 < head["step"] <= 300 and head["loss"] <= ref + 0.3, (ref, head)
PY
echo "resume: step 200 accuracy $acc1 -> step 400 accuracy $acc2"

# thres_loss: the run resumed at 400 with a learning rate that explodes aborts with exit 3 (an aborted run, not a
# failure to retry), naming thres_loss, and keeps its last good checkpoint: nothing newer than step 400, and
# evaluating the run gives step 400's accuracy.
small_mlp "$WORK/boom.json" training.max_steps=600 eval.every_steps=0 optimizer.name='"sgd"' \
  optimizer.learning_rate=9 training.thres_loss=20 training.report_every=1
"$TFX_NODE" local --config "$WORK/boom.json" --run-dir "$WORK/run" >"$WORK/boom.log" 2>&1; rc=$?
[ "$rc" = 3 ] || fail "exploding loss: exit $rc, want 3: $(tail -2 "$WORK/boom.log")"
grep -q "thres_loss" "$WORK/boom.log" || fail "abort message does not name thres_loss: $(tail -2 "$WORK/boom.log")"
newest=$(ls "$WORK"/run/checkpoints/*/manifest.json | sort | tail -1)
[ "$newest" = "$WORK/run/checkpoints/ckpt-000000000400/manifest.json" ] || fail "after the abort the newest checkpoint is $newest"
"$TFX_NODE" evaluate --run-dir "$WORK/run" >"$WORK/eval-kept.txt" 2>&1 || fail "evaluate after the abort: $(tail -1 "$WORK/eval-kept.txt")"
grep -q "step 400: eval .* accuracy $(python3 -c "print('%.4f' % $acc2)")" "$WORK/eval-kept.txt" ||
  fail "the kept checkpoint is not step 400's (accuracy $acc2): $(cat "$WORK/eval-kept.txt")"

experiment "$WORK/part.json" training.max_steps=300 eval.every_steps=0 placement.min_slice_bytes=200000 placement.max_shards=2 placement.strategy='"greedy_bytes"'
"$TFX_NODE" plan --config "$WORK/part.json" --ps 2 >"$WORK/plan.txt" || fail "plan"
grep -q "dense_1/kernel/part_1" "$WORK/plan.txt" || fail "dense_1/kernel not partitioned: $(cat "$WORK/plan.txt")"
experiment "$WORK/whole.json" training.max_steps=300 eval.every_steps=0
"$TFX_NODE" local --config "$WORK/part.json" --run-dir "$WORK/run-part" >"$WORK/part.log" 2>&1 || fail "partitioned run"
"$TFX_NODE" local --config "$WORK/whole.json" --run-dir "$WORK/run-whole" >"$WORK/whole.log" 2>&1 || fail "unpartitioned run"
lp=$(metric "$WORK/run-part/metrics.jsonl" eval loss); lw=$(metric "$WORK/run-whole/metrics.jsonl" eval loss)
python3 -c "import sys; sys.exit(0 if abs($lp - $lw) < 1e-3 else 1)" || fail "partitioned loss $lp differs from unpartitioned $lw"
"$TFX_NODE" inspect "$WORK/run-part" | grep "dense_1/kernel " | grep -q "ps 0,1\|ps 1,0" || fail "inspect does not show the kernel on both ps"
# `train` resumes a run `local` wrote with partitioned variables (slices on two ps joined back, Adam's slots too).
"$TFX_NODE" train --config "$WORK/part.json" --run-dir "$WORK/run-part" --max-steps 350 >"$WORK/part-train.log" 2>&1 ||
  fail "train resuming a partitioned run: $(tail -2 "$WORK/part-train.log")"
grep -q "TRAIN-RESUME resumed from .*ckpt-000000000300 at step 300" "$WORK/part-train.log" || fail "train did not resume at 300"
[ "$(metric "$WORK/run-part/metrics.jsonl" eval step)" = 350 ] || fail "train did not continue to 350"
pass "resume, thres_loss abort, partitioning (loss $lp vs $lw), train resuming a partitioned run"
