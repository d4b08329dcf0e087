#!/bin/bash
# Sparse models in one process: a 4-class logistic regression over 2^20 hashed features (LibSVM, an embedding_bag
# first layer) learns a planted model to >= 0.85 accuracy (chance 0.25) without a dense row, read whole or
# streamed; a local cluster trains it; evaluate and predict read the same sparse file; training resumes from its
# checkpoint; bad sparse input (an index past D, a NaN value, a bad
# combiner) exits 2 naming the file and line, and leaves no run behind.
. "$(dirname "$0")/lib.sh"
python3 "$(dirname "$0")/sparse_data.py" "$WORK"
printf '1 3:1\n2 5:1 1048577:2\n' >"$WORK/bad-index.libsvm"
printf '1 3:1\n0 4:nan\n' >"$WORK/bad-nan.libsvm"
exp() { # exp OUT TRAIN KEY=VALUE...
  local out=$1 train=$2; shift 2
  experiment "$out" model.input_shape='[1048576]' \
    model.layers='[{"type": "embedding_bag", "units": 4, "combiner": "sum"}]' model.loss='"softmax_cross_entropy"' \
    data.format='"libsvm"' data.train.images="\"$train\"" data.eval.images="\"$WORK/test.libsvm\"" data.scale=1 \
    optimizer.name='"adagrad"' optimizer.learning_rate=0.5 training.batch_size=32 training.epochs=3 \
    training.report_every=100 eval.every_steps=0 "$@"
}
exp "$WORK/lr.json" "$WORK/train.libsvm"
"$TFX_NODE" train --config "$WORK/lr.json" --run-dir "$WORK/run" >"$WORK/train.log" 2>&1 || fail "train: $(tail -1 "$WORK/train.log")"
acc=$(metric "$WORK/run/metrics.jsonl" eval accuracy)
ge "$acc" 0.85 || fail "sparse logistic regression reached accuracy $acc, want >= 0.85 (chance: 0.25)"
[ "$(metric "$WORK/run/metrics.jsonl" eval step)" = 563 ] || fail "3 epochs of 6000 at 32 a step are 563 steps"
ls "$WORK"/run/checkpoints/ckpt-000000000563/manifest.json >/dev/null || fail "no final checkpoint"
"$TFX_NODE" evaluate --config "$WORK/lr.json" --run-dir "$WORK/run" >"$WORK/eval.log" 2>&1 || fail "evaluate: $(tail -1 "$WORK/eval.log")"
eacc=$(grep -o "accuracy [0-9.]*" "$WORK/eval.log" | tail -1 | cut -d' ' -f2)
python3 -c "import sys; sys.exit(0 if '$eacc' and abs(float('$eacc') - $acc) < 1e-4 else 1)" ||
  fail "evaluate's accuracy '$eacc' disagrees with training's $acc: $(tail -2 "$WORK/eval.log")"
"$TFX_NODE" predict --config "$WORK/lr.json" --run-dir "$WORK/run" --input "$WORK/test.libsvm" --output "$WORK/p.csv" \
  >"$WORK/predict.log" 2>&1 || fail "predict: $(tail -1 "$WORK/predict.log")"
[ "$(wc -l <"$WORK/p.csv")" = 1001 ] || fail "predict wrote $(wc -l <"$WORK/p.csv") lines for 1000 examples"
# A run resumes from its checkpoint: 1 more epoch is 188 more steps.
"$TFX_NODE" train --config "$WORK/lr.json" --run-dir "$WORK/run" --set training.epochs=4 >"$WORK/more.log" 2>&1 ||
  fail "resume: $(tail -1 "$WORK/more.log")"
grep -q "TRAIN-RESUME resumed from .*ckpt-000000000563 at step 563" "$WORK/more.log" || fail "did not resume at 563"
[ "$(metric "$WORK/run/metrics.jsonl" eval step)" = 750 ] || fail "4 epochs end at step 750"
# Streamed (a window of 2000 examples at a time, rows kept as CSR): the same model learns as well.
exp "$WORK/stream.json" "$WORK/train.libsvm" data.stream=true data.shuffle_buffer=2000
"$TFX_NODE" train --config "$WORK/stream.json" --run-dir "$WORK/run-stream" >"$WORK/stream.log" 2>&1 ||
  fail "streamed: $(tail -1 "$WORK/stream.log")"
sacc=$(metric "$WORK/run-stream/metrics.jsonl" eval accuracy)
ge "$sacc" 0.85 || fail "streamed sparse logistic regression reached accuracy $sacc, want >= 0.85"
# Feature columns over the CSV twin (hashed tokens weighted by their values), read whole and streamed in two
# files, one per shard, learn it as well.
head -3001 "$WORK/train.csv" >"$WORK/train-0.csv"; (head -1 "$WORK/train.csv"; tail -n +3002 "$WORK/train.csv") >"$WORK/train-1.csv"
cols() { # cols OUT TRAIN KEY=VALUE...
  local out=$1 train=$2; shift 2
  experiment "$out" model.features='[{"key": "tokens", "type": "hash", "hash_bucket_size": 65536, "separator": " ",
    "weight_key": "values"}]' model.layers='[{"type": "embedding_bag", "inputs": "tokens", "units": 4}]' \
    data.format='"csv"' data.label_column='"label"' data.train.images="\"$train\"" \
    data.eval.images="\"$WORK/test.csv\"" data.scale=1 optimizer.name='"adagrad"' optimizer.learning_rate=0.5 \
    training.batch_size=32 training.epochs=3 training.report_every=100 eval.every_steps=0 "$@"
}
cols "$WORK/cols.json" "$WORK/train.csv"
"$TFX_NODE" train --config "$WORK/cols.json" --run-dir "$WORK/run-cols" >"$WORK/cols.log" 2>&1 || fail "columns: $(tail -1 "$WORK/cols.log")"
cacc=$(metric "$WORK/run-cols/metrics.jsonl" eval accuracy)
ge "$cacc" 0.85 || fail "feature columns reached accuracy $cacc, want >= 0.85"
cols "$WORK/cols-stream.json" "$WORK/train-*.csv" data.stream=true data.shuffle_buffer=1000
"$TFX_NODE" train --config "$WORK/cols-stream.json" --run-dir "$WORK/run-cols-stream" >"$WORK/cols-stream.log" 2>&1 ||
  fail "streamed columns: $(tail -1 "$WORK/cols-stream.log")"
csacc=$(metric "$WORK/run-cols-stream/metrics.jsonl" eval accuracy)
ge "$csacc" 0.85 || fail "streamed feature columns reached accuracy $csacc, want >= 0.85"
# A local cluster (1 ps, 2 workers, each its shard of the records) trains the same model.
"$TFX_NODE" local --config "$WORK/lr.json" --run-dir "$WORK/run-local" --workers 2 --ps 1 --max-steps 40 \
  >"$WORK/local.log" 2>&1 || fail "local cluster: $(tail -1 "$WORK/local.log")"
[ "$(metric "$WORK/run-local/metrics.jsonl" eval step)" = 40 ] || fail "the cluster did not evaluate at step 40"
lacc=$(metric "$WORK/run-local/metrics.jsonl" eval accuracy)
ge "$lacc" 0.3 || fail "the cluster's accuracy after 40 steps is $lacc (chance 0.25)"
# FTRL at the ps (its two slots, l1's exact zeros, over lazy rows) is the single-process rule: a cluster of one
# worker and one ps ends 100 steps with the same train and eval loss as `train`, to every printed digit.
exp "$WORK/ftrl.json" "$WORK/train.libsvm" optimizer.name='"ftrl"' optimizer.learning_rate=0.5 optimizer.l1=0.001
"$TFX_NODE" train --config "$WORK/ftrl.json" --run-dir "$WORK/run-ftrl1" --max-steps 100 >"$WORK/ftrl1.log" 2>&1 ||
  fail "ftrl train: $(tail -1 "$WORK/ftrl1.log")"
"$TFX_NODE" local --config "$WORK/ftrl.json" --run-dir "$WORK/run-ftrlc" --workers 1 --ps 1 --max-steps 100 \
  >"$WORK/ftrlc.log" 2>&1 || fail "ftrl cluster: $(tail -1 "$WORK/ftrlc.log")"
for k in "train loss" "eval loss" "eval accuracy"; do
  a=$(metric "$WORK/run-ftrl1/metrics.jsonl" $k) b=$(metric "$WORK/run-ftrlc/metrics.jsonl" $k)
  [ "$a" != none ] && [ "$a" = "$b" ] || fail "ftrl: $k $b in the cluster, $a in one process"
done
# Bad input: exit 2, the file and line named, no run directory written.
bad() { # bad NAME EXPECTED-MESSAGE CONFIG-KEY=VALUE...
  local name=$1 want=$2; shift 2
  exp "$WORK/$name.json" "$WORK/$name.libsvm" "$@"
  set +e
  "$TFX_NODE" train --config "$WORK/$name.json" --run-dir "$WORK/run-$name" >"$WORK/$name.log" 2>&1
  local rc=$?
  set -e
  [ "$rc" = 2 ] || fail "$name: exit $rc, want 2: $(tail -1 "$WORK/$name.log")"
  grep -q -- "$want" "$WORK/$name.log" || fail "$name: no '$want' in: $(tail -1 "$WORK/$name.log")"
  [ ! -e "$WORK/run-$name" ] || fail "$name: a run directory was written"
}
bad bad-index "bad-index.libsvm: line 2, column 7: index 1048577 exceeds dim 1048576"
bad bad-nan "bad-nan.libsvm: line 2, column 3: '4:nan': the value is not a finite number"
cp "$WORK/train.libsvm" "$WORK/combiner.libsvm"
bad combiner "combiner 'max' (want sum, mean, sqrtn or sequence)" \
  model.layers='[{"type": "embedding_bag", "units": 4, "combiner": "max"}]'
pass "sparse logistic regression: accuracy $acc in 563 steps ($sacc streamed, $lacc after 40 cluster steps; feature columns $cacc, streamed $csacc), evaluate/predict/resume on CSR, bad input exits 2"
