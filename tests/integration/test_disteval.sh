#!/bin/bash
# eval.distributed (#25 item 8): in a local sync cluster of 2 workers each worker scores its slice of the eval set
# between steps and the chief merges the sums; with a learning rate of 0 the variables never change, so every
# merged evaluation equals the chief's own final one (scored alone, the workers stopped): accuracy and the per-class
# metrics (merged confusion matrices) exactly, the loss to the order of a float sum, over the same 150 examples. A
# binary classifier's AUC, merged from the workers' scores, equals the chief's exactly too (an average of the
# slices' AUCs would not). A multi-label model (label sets, one sigmoid output a class) trains on the cluster and its
# per-class counts merge exactly too.
. "$(dirname "$0")/lib.sh"
python3 - "$WORK" <<'PY'
import random, sys
random.seed(5)
with open(f"{sys.argv[1]}/all.csv", "w") as f:
    f.write("a,b,c,d,label\n")
    for i in range(150):
        f.write(",".join(f"{random.gauss(i % 3, 1.5):.3f}" for _ in range(4)) + f",{i % 3}\n")
with open(f"{sys.argv[1]}/bin.csv", "w") as f:  # slice 0 mostly negatives, slice 1 mostly positives
    f.write("a,b,c,d,label\n")
    for i in range(150):
        y = int(random.random() < (0.2 if i < 75 else 0.8))
        f.write(",".join(f"{random.gauss(y, 1.5):.3f}" for _ in range(4)) + f",{y}\n")
with open(f"{sys.argv[1]}/ml.csv", "w") as f:  # multi-label: each row a set of the classes 0..2 ("" none)
    f.write("a,b,c,d,label\n")
    for i in range(150):
        x = [random.gauss(0, 1) for _ in range(4)]
        f.write(",".join(f"{v:.3f}" for v in x) + "," + "|".join(str(k) for k in range(3) if x[k] > 0) + "\n")
PY
experiment "$WORK/e.json" data.format='"csv"' data.train.images="\"$WORK/all.csv\"" data.eval.images="\"$WORK/all.csv\"" \
  data.label_column='"label"' data.scale=1 model.input_shape='[4]' \
  model.layers='[{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]' \
  training.batch_size=8 training.max_steps=3000 training.report_every=100 eval.every_steps=100 \
  checkpoint.every_steps=0 optimizer.learning_rate=0 eval.distributed=true model.metrics='"loss,accuracy,f1,per_class"' 
R=$WORK/run
"$TFX_NODE" local --workers 2 --config "$WORK/e.json" --run-dir "$R" >"$WORK/local.log" 2>&1 || fail "local: $(tail -1 "$WORK/local.log")"
n=$(grep -c "MASTER-EVAL step .* over 150 examples in .* (by the workers)" "$R/logs/master-0.log")
[ "$n" -ge 1 ] || fail "no evaluation scored by the workers: $(grep -E 'MASTER-EVAL|DISTEVAL' "$R/logs/master-0.log" | head -3)"
grep -q "MASTER-EVAL step 3000: .* over 150 examples in .* (by the chief)" "$R/logs/master-0.log" || fail "no final evaluation by the chief"
same() {  # same METRICS_JSONL FIELDS...: every merged evaluation's fields equal the final one's (the chief's)
  python3 - "$@" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if '"kind": "eval"' in l]
final = ev[-1]
for e in ev[:-1]:
    if e["examples"] != 150 or abs(e["loss"] - final["loss"]) > 1e-6 or any(e.get(k) != final.get(k) or k not in e for k in sys.argv[2:]):
        print("step", e["step"], e, "final", final); sys.exit(1)
PY
}
same "$R/metrics.jsonl" accuracy f1 precision_0 recall_1 f1_2 || fail "a merged evaluation differs from the chief's own"
sed -i -e "s|all.csv|bin.csv|g" -e 's|"units": 3|"units": 2|' -e 's|"loss,accuracy,f1,per_class"|"loss,accuracy,auc,f1"|' \
  -e 's|"max_steps": 3000|"max_steps": 1500|' "$WORK/e.json"
"$TFX_NODE" local --workers 2 --config "$WORK/e.json" --run-dir "$WORK/bin" >"$WORK/bin.log" 2>&1 || fail "local (binary): $(tail -1 "$WORK/bin.log")"
grep -q "MASTER-EVAL step .* (by the workers)" "$WORK/bin/logs/master-0.log" || fail "binary: no evaluation by the workers"
same "$WORK/bin/metrics.jsonl" accuracy auc f1 || fail "binary: a merged AUC or F1 differs from the chief's own"
sed -i -e "s|bin.csv|ml.csv|g" -e 's|"units": 2|"units": 3|' -e 's|"loss,accuracy,auc,f1"|"loss,accuracy,auc,f1,per_class"|' \
  -e 's|"loss": "softmax_cross_entropy"|"loss": "sigmoid_cross_entropy", "multi_label": true|' "$WORK/e.json"
grep -q '"multi_label": true' "$WORK/e.json" || fail "the experiment did not become multi-label: $(grep loss "$WORK/e.json")"
"$TFX_NODE" local --workers 2 --config "$WORK/e.json" --run-dir "$WORK/ml" >"$WORK/ml.log" 2>&1 || fail "local (multi-label): $(tail -1 "$WORK/ml.log")"
grep -q "MASTER-EVAL step .* (by the workers)" "$WORK/ml/logs/master-0.log" || fail "multi-label: no evaluation by the workers: $(grep -E "EVAL|ERROR" "$WORK/ml/logs/"*.log | head -5)"
same "$WORK/ml/metrics.jsonl" accuracy auc auc_1 f1 precision_0 recall_2 || fail "multi-label: a merged per-class metric differs from the chief's own"
pass "eval.distributed: $n evaluations merged from 2 workers' slices equal the chief's own (accuracy, per-class, AUC exactly)"
