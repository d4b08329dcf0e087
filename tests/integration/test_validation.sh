#!/bin/bash
# Named validation sets with their own frequency, batch count and aggregation, single process and local cluster;
# evaluate --data NAME evaluates one of them.
. "$(dirname "$0")/lib.sh"
D=/usr/share/datasets/fashion-mnist
experiment "$WORK/exp.json" training.max_steps=300 eval.every_steps=0 \
  "validation=[{\"name\": \"train_head\", \"images\": \"$D/train-images-idx3-ubyte.gz\", \"labels\": \"$D/train-labels-idx1-ubyte.gz\", \"every_steps\": 100, \"batches\": 2, \"agg\": \"min\", \"first\": true}, {\"name\": \"test\", \"images\": \"$D/t10k-images-idx3-ubyte.gz\", \"labels\": \"$D/t10k-labels-idx1-ubyte.gz\", \"every_steps\": 150}]"
"$TFX_NODE" train --config "$WORK/exp.json" --run-dir "$WORK/single" >"$WORK/single.log" 2>&1 || fail "train: $(tail -1 "$WORK/single.log")"
"$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$WORK/local" >"$WORK/local.log" 2>&1 || fail "local: $(tail -1 "$WORK/local.log")"
for run in single local; do
  python3 - "$WORK/$run/metrics.jsonl" "$run" <<'PY' || fail "$run: validation lines wrong"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
head = [r for r in recs if r["kind"] == "validation.train_head"]
test = [r for r in recs if r["kind"] == "validation.test"]
assert head[0]["step"] == 0 and head[0]["examples"] == 2000, head[0]        # "first", 2 batches of 1000
assert len(head) >= 3 and head[-1]["step"] == 300 and head[-1]["accuracy"] > head[0]["accuracy"], head
assert len(test) >= 2 and test[-1]["step"] == 300 and test[-1]["examples"] == 10000 and test[-1]["accuracy"] > 0.75, test
if sys.argv[2] == "single":
    assert [r["step"] for r in head] == [0, 100, 200, 300] and [r["step"] for r in test] == [150, 300], (head, test)
PY
done
last=$(metric "$WORK/local/metrics.jsonl" validation.test accuracy)
"$TFX_NODE" evaluate --run-dir "$WORK/local" --data test | grep -q "accuracy $(python3 -c "print('%.4f' % $last)")" || fail "evaluate --data test disagrees with $last"
"$TFX_NODE" evaluate --run-dir "$WORK/local" --data nope 2>&1 | grep -q "no such validation set" || fail "unknown --data not named"
pass "named validation sets"
