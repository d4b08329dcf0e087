#!/bin/bash
# Multi-label classification and per-class metrics (#25 item 3) through the commands a user runs: `train` on CSV
# label sets ("0|2", an empty cell) with model.multi_label, the per-class fields and per-output AUC in metrics.jsonl,
# keep_best on one output's AUC and early stopping on F1, `evaluate`'s classification report, and `predict`'s sets.
# The learned sets must beat a model that predicts every set empty (its F1 is 0).
. "$(dirname "$0")/lib.sh"
python3 - "$WORK" <<'PY'
import random, sys
random.seed(11)
for name, n in (("train", 1500), ("eval", 300)):
    with open(f"{sys.argv[1]}/{name}.csv", "w") as f:
        f.write("a,b,c,d,label\n")
        for i in range(n):
            x = [random.gauss(0, 1) for _ in range(4)]
            f.write(",".join(f"{v:.3f}" for v in x) + "," + "|".join(str(k) for k in range(3) if x[k] + 0.3 * random.gauss(0, 1) > 0) + "\n")
PY
cat >"$WORK/e.json" <<EOF2
{"data": {"format": "csv", "train": {"images": "$WORK/train.csv"}, "eval": {"images": "$WORK/eval.csv"},
          "label_column": "label", "scale": 1},
 "model": {"input_shape": [4], "layers": [{"type": "dense", "units": 3}], "loss": "sigmoid_cross_entropy",
           "multi_label": true, "metrics": "loss,accuracy,auc,f1,per_class"},
 "training": {"batch_size": 32, "max_steps": 1500}, "optimizer": {"name": "adam", "learning_rate": 0.05},
 "eval": {"every_steps": 50},
 "checkpoint": {"every_steps": 0, "keep_best": {"metric": "auc_1"}}}
EOF2
R=$WORK/run
"$TFX_NODE" train --config "$WORK/e.json" --run-dir "$R" --set training.early_stopping.metric=f1 \
  --set training.early_stopping.patience=3 >"$WORK/train.log" 2>&1 || fail "train: $(tail -1 "$WORK/train.log")"
grep -q "TRAIN-EARLY-STOP .* eval f1 has not improved" "$WORK/train.log" || fail "no early stop on f1: $(grep -E 'EARLY|DONE' "$WORK/train.log")"
python3 - "$R/metrics.jsonl" "$R/checkpoints/best.json" <<'PY' || fail "the eval records or best.json are wrong"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if '"kind": "eval"' in l]
last = ev[-1]
want = ["auc", "f1"] + [f"{m}_{k}" for k in range(3) for m in ("precision", "recall", "f1", "auc")]
missing = [k for k in want if k not in last]
if missing or last["f1"] < 0.8 or last["auc_1"] < 0.9 or not 0.3 < last["accuracy"] < last["f1"]:
    print("last eval", last, "missing", missing); sys.exit(1)
best = json.load(open(sys.argv[2]))
top = max(e["auc_1"] for e in ev)
if best["metric"] != "auc_1" or abs(best["value"] - top) > 1e-6:
    print("best.json", best, "but the best auc_1 is", top); sys.exit(1)
PY
out=$("$TFX_NODE" evaluate --run-dir "$R" 2>&1) || fail "evaluate: $out"
echo "$out" | grep -qE "^ +mean +[01]\.[0-9]+ +[01]\.[0-9]+ +[01]\.[0-9]+ +300$" || fail "evaluate prints no classification report: $out"
"$TFX_NODE" predict --run-dir "$R" --input "$WORK/eval.csv" --output "$WORK/p.jsonl" >"$WORK/p.log" 2>&1 || fail "predict: $(tail -1 "$WORK/p.log")"
python3 - "$WORK/p.jsonl" "$WORK/eval.csv" <<'PY' || fail "predict's sets do not match the labels"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
labels = [set(int(k) for k in l.strip().split(",")[-1].split("|") if k) for l in list(open(sys.argv[2]))[1:]]
same = sum(set(r["classes"]) == s for r, s in zip(rows, labels))
empty = sum(not r["classes"] for r in rows)
if len(rows) != 300 or same < 150 or empty == 300:
    print(len(rows), "rows,", same, "exact sets,", empty, "empty"); sys.exit(1)
PY
# Streamed (data.stream) on a cluster: progressive validation gives each output's rolling AUC and their mean in the
# train records; a set naming a class the outputs lack is refused by file and record, or skipped under
# data.on_error skip.
S=$WORK/stream
"$TFX_NODE" local --config "$WORK/e.json" --run-dir "$S" --set data.stream=true --set training.progressive_window=400 \
  --set training.max_steps=200 --set training.report_every=50 --set training.mode=async --set eval.every_steps=0 \
  --set 'checkpoint.keep_best.metric=""' >"$WORK/stream.log" 2>&1 || fail "streamed cluster: $(tail -2 "$WORK/stream.log")"
python3 - "$S/metrics.jsonl" <<'PY' || fail "no per-output rolling AUC in the streamed train records"
import json, sys
tr = [json.loads(l) for l in open(sys.argv[1]) if '"kind": "train"' in l]
last = tr[-1]
ks = [last.get("rolling_auc_%d" % k) for k in range(3)]
assert all(k is not None and 0.5 < k <= 1 for k in ks) and abs(last["rolling_auc"] - sum(ks) / 3) < 2e-6, last  # records carry 6 digits
PY
sed '12s/,[0-9|]*$/,1|5/' "$WORK/train.csv" >"$WORK/bad.csv" # data row 11 names class 5 of 3 outputs
"$TFX_NODE" train --config "$WORK/e.json" --run-dir "$WORK/bad" --set data.stream=true --set data.train.images="\"$WORK/bad.csv\"" \
  --set 'checkpoint.keep_best.metric=""' --set training.max_steps=20 >"$WORK/bad.log" 2>&1 && fail "a set naming class 5 of 3 outputs was trained on"
grep -q "bad.csv: record 11: its label set names class 5, outside the model's 3 outputs" "$WORK/bad.log" || fail "bad set not named: $(tail -2 "$WORK/bad.log")"
"$TFX_NODE" train --config "$WORK/e.json" --run-dir "$WORK/skip" --set data.stream=true --set data.train.images="\"$WORK/bad.csv\"" \
  --set 'checkpoint.keep_best.metric=""' --set training.max_steps=20 --set data.on_error=skip >"$WORK/skip.log" 2>&1 ||
  fail "on_error skip: $(tail -2 "$WORK/skip.log")"
grep -q "DATA-BAD-RECORD .*record 11: its label set names class 5" "$WORK/skip.log" || fail "skipped set not named"
pass "multi-label: per-class and per-output AUC recorded, keep_best on auc_1, early stop on f1, evaluate's report, predict's sets; streamed: rolling AUC per output, bad sets refused or skipped by name"
