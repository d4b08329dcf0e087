#!/bin/bash
# Per-class metrics and the confusion matrix past 32 classes (#25): the Debian-packages set (scripts/debian_fields.py:
# a package's Section among the sections of this machine's package lists, 35 here) trained as a LibSVM bag of
# hashed fields. Eval records carry precision_K, recall_K and f1_K of every class and, with model.metrics naming
# confusion, the matrix, whose rows add up to each class's count in the eval file (read here), whose trace over
# the examples is the accuracy and whose diagonal gives each recall; in `tfx-node train` and in a cluster whose
# workers score slices of the eval set (eval.distributed) that the chief merges.
. "$(dirname "$0")/lib.sh"
command -v apt-cache >/dev/null || skip "no apt-cache: the Debian-packages set comes from this machine's package lists"
python3 "$SRC/scripts/debian_fields.py" "$WORK/deb" --libsvm 14 >"$WORK/data.log" 2>&1 || skip "no Debian package lists: $(tail -1 "$WORK/data.log")"
K=$(python3 -c "import json, sys; print(len(json.load(open(sys.argv[1]))['classes']))" "$WORK/deb/meta.json")
[ "$K" -gt 32 ] || skip "this machine's package lists give $K sections (the test needs more than 32)"
head -6000 "$WORK/deb/train.libsvm" >"$WORK/train.libsvm" # small: the classes are the model's, not the data's
head -2000 "$WORK/deb/test.libsvm" >"$WORK/test.libsvm"
cat >"$WORK/exp.json" <<JSON
{"model": {"input_shape": [16384], "layers": [{"type": "embedding_bag", "units": $K, "combiner": "sum"}],
           "loss": "softmax_cross_entropy", "metrics": "loss,accuracy,per_class,confusion"},
 "data": {"format": "libsvm", "train": {"images": "$WORK/train.libsvm"}, "eval": {"images": "$WORK/test.libsvm"}},
 "optimizer": {"name": "adagrad", "learning_rate": 0.1},
 "training": {"mode": "async", "max_steps": 300, "batch_size": 32, "report_every": 100, "seed": 1},
 "checkpoint": {"every_steps": 0}, "eval": {"every_steps": 100}}
JSON
# check RUN: every eval record as described above.
check() {
  python3 - "$1/metrics.jsonl" "$WORK/test.libsvm" "$K" <<'PY'
import json, sys
path, data, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
counts = [0] * k
for line in open(data):
    counts[int(line.split()[0])] += 1
evals = [json.loads(l) for l in open(path) if '"kind": "eval"' in l]
assert evals, "no eval record"
for r in evals:
    cm = r["confusion"]
    assert r["confusion_classes"] == k and len(cm) == k and all(len(row) == k for row in cm), (k, len(cm))
    assert [sum(row) for row in cm] == counts, ([sum(row) for row in cm], counts)
    assert r["examples"] == sum(counts) and abs(r["accuracy"] - sum(cm[i][i] for i in range(k)) / sum(counts)) < 1e-6
    for c in range(k):
        assert all("%s_%d" % (m, c) in r for m in ("precision", "recall", "f1")), "no per-class fields of class %d" % c
        want = cm[c][c] / counts[c] if counts[c] else 0
        assert abs(r["recall_%d" % c] - want) < 1e-5, (c, r["recall_%d" % c], want)
print(len(evals))
PY
}
"$TFX_NODE" train --config "$WORK/exp.json" --run-dir "$WORK/train" >"$WORK/train.log" 2>&1 || fail "train: $(tail -2 "$WORK/train.log")"
n=$(check "$WORK/train") || fail "train: eval records: $n"
# Long enough that the chief's 200 ms tick sees an evaluation step pass while the workers train (a run of 300 async
# steps can end between two ticks; its final evaluation is then the chief's own, the workers stopped).
"$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$WORK/run" --set eval.distributed=true \
  --set training.max_steps=3000 --set eval.every_steps=500 >"$WORK/local.log" 2>&1 ||
  fail "local: $(tail -2 "$WORK/local.log")"
grep -q "MASTER-EVAL.*by the workers" "$WORK/run/logs/master-0.log" || fail "no evaluation by the workers"
m=$(check "$WORK/run") || fail "cluster: eval records: $m"
pass "$K classes: per-class fields of every class and the $K x $K confusion matrix in $n eval records of train and $m of a cluster (slices merged)"
