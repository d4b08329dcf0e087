#!/bin/bash
# The experiment's data.format: the same Fashion-MNIST subset as CSV and as LibSVM trains the MLP (single
# process and a local cluster); a file whose examples do not fit the model's input is refused by name.
. "$(dirname "$0")/lib.sh"
python3 - "$WORK" <<'PY'
import gzip, sys
work = sys.argv[1]
def load(kind, n):
    img = gzip.open(f"/usr/share/datasets/fashion-mnist/{kind}-images-idx3-ubyte.gz").read()[16:16 + 784 * n]
    lab = gzip.open(f"/usr/share/datasets/fashion-mnist/{kind}-labels-idx1-ubyte.gz").read()[8:8 + n]
    return [img[i * 784:(i + 1) * 784] for i in range(n)], lab
for kind, n in (("train", 6000), ("t10k", 1000)):
    x, y = load(kind, n)
    with open(f"{work}/{kind}.csv", "w") as f:
        f.write(",".join(f"p{i}" for i in range(784)) + ",label\n")
        for row, lab in zip(x, y):
            f.write(",".join(map(str, row)) + f",{lab}\n")
    if kind == "train":  # the same rows as 4 shard files, for streaming and sharding by file
        for k in range(4):
            with open(f"{work}/train-{k}.csv", "w") as f:
                f.write(",".join(f"p{i}" for i in range(784)) + ",label\n")
                for row, lab in list(zip(x, y))[k::4]:
                    f.write(",".join(map(str, row)) + f",{lab}\n")
    with open(f"{work}/{kind}.svm", "w") as f:
        for row, lab in zip(x, y):
            f.write(str(lab) + "".join(f" {i + 1}:{v}" for i, v in enumerate(row) if v) + "\n")
PY
for fmt in csv libsvm; do
  ext=$([ $fmt = csv ] && echo csv || echo svm)
  small_mlp "$WORK/$fmt.json" data.format="\"$fmt\"" data.train.images="\"$WORK/train.$ext\"" data.eval.images="\"$WORK/t10k.$ext\"" \
    data.label_column='"label"' training.max_steps=300 eval.every_steps=0 model.input_shape='[784]'
  "$TFX_NODE" train --config "$WORK/$fmt.json" --run-dir "$WORK/run-$fmt" >"$WORK/$fmt.log" 2>&1 || fail "$fmt train: $(tail -1 "$WORK/$fmt.log")"
  acc=$(metric "$WORK/run-$fmt/metrics.jsonl" eval accuracy)
  ge "$acc" 0.7 || fail "$fmt: accuracy $acc"
  echo "$fmt single process: accuracy $acc"
done
"$TFX_NODE" local --config "$WORK/csv.json" --run-dir "$WORK/run-csv-local" >"$WORK/csv-local.log" 2>&1 || fail "csv local: $(tail -1 "$WORK/csv-local.log")"
ge "$(metric "$WORK/run-csv-local/metrics.jsonl" eval accuracy)" 0.7 || fail "csv local accuracy"
"$TFX_NODE" predict --run-dir "$WORK/run-libsvm" --input "$WORK/t10k.svm" --output "$WORK/pred.csv" >"$WORK/pred.log" 2>&1 || fail "predict on LibSVM: $(tail -1 "$WORK/pred.log")"
[ "$(head -1 "$WORK/pred.csv" | cut -d, -f1-3)" = "index,class,p0" ] || fail "CSV predictions lack their header"
[ "$(tail -n +2 "$WORK/pred.csv" | grep -c .)" = 1000 ] || fail "CSV predictions: want 1000 rows"
# Streaming: the 4 shard files a window at a time, each of the 2 workers reading whole files of its own.
small_mlp "$WORK/stream.json" data.format='"csv"' data.train.images="\"$WORK/train-*.csv\"" data.eval.images="\"$WORK/t10k.csv\"" \
  data.label_column='"label"' data.stream=true data.shard_by='"file"' data.shuffle_buffer=500 training.max_steps=300 \
  eval.every_steps=0 model.input_shape='[784]'
"$TFX_NODE" local --config "$WORK/stream.json" --run-dir "$WORK/run-stream" >"$WORK/stream.log" 2>&1 || fail "streamed local: $(tail -1 "$WORK/stream.log")"
acc=$(metric "$WORK/run-stream/metrics.jsonl" eval accuracy)
ge "$acc" 0.7 || fail "streamed, sharded by file: accuracy $acc"
echo "csv streamed, sharded by file over 2 workers: accuracy $acc"
experiment "$WORK/stream5.json" data.format='"csv"' data.train.images="\"$WORK/train-*.csv\"" data.eval.images="\"$WORK/t10k.csv\"" \
  data.label_column='"label"' data.shard_by='"file"' training.max_steps=10 model.input_shape='[784]'
out=$("$TFX_NODE" local --workers 5 --config "$WORK/stream5.json" --run-dir "$WORK/run-stream5" 2>&1); rc=$?
[ "$rc" = 2 ] || fail "5 workers over 4 files by file: exit $rc, want 2 (bad input)"
echo "$out" | grep -q "worker [0-9] exited with status 2: .*data.shard_by file: 4 file(s) for 5 workers" ||
  fail "a worker's config error not reported in its own words: $(echo "$out" | tail -3)"
grep -q "data.shard_by file: 4 file(s) for 5 workers" "$WORK"/run-stream5/logs/worker-*.log || fail "too few files not named in the worker logs"
experiment "$WORK/bad.json" data.format='"csv"' data.train.images="\"$WORK/train.csv\"" data.eval.images="\"$WORK/t10k.csv\"" data.label_column='"label"' model.input_shape='[100]'
out=$("$TFX_NODE" train --config "$WORK/bad.json" --run-dir "$WORK/run-bad" 2>&1); rc=$?
[ "$rc" = 2 ] || fail "mismatched input: exit $rc, want 2"
echo "$out" | grep -q "784 values per example, the model's input takes 100" || fail "mismatch not named: $out"
pass "csv and libsvm data formats"
