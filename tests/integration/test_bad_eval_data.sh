#!/bin/bash
# Eval data the model cannot score: a real Fashion-MNIST eval labels file with one label (example 1234) set to 12,
# outside the 10 classes, and a CSV file with an embedding id outside its table. Such an example used to count as
# a silent miss; now the trainer, the master and the evaluator log an error naming the label and record no eval
# accuracy (training goes on; the final "done:" line says why it has none), `tfx-node evaluate` fails naming it,
# and `tfx-node predict` refuses the bad id, writing no output.
source "$(dirname "$0")/lib.sh"
D=/usr/share/datasets/fashion-mnist
python3 - "$D/t10k-labels-idx1-ubyte.gz" "$WORK/bad-labels-idx1-ubyte" <<'PY'
import gzip, sys
raw = bytearray(gzip.open(sys.argv[1]).read())
raw[8 + 1234] = 12  # IDX: an 8-byte header, then one byte per label
open(sys.argv[2], "wb").write(raw)
PY
experiment "$WORK/exp.json" training.max_steps=100 eval.every_steps=50 checkpoint.every_steps=50 \
  training.report_every=50 data.eval.labels="\"$WORK/bad-labels-idx1-ubyte\"" \
  "validation=[{\"name\": \"bad\", \"images\": \"$D/t10k-images-idx3-ubyte.gz\", \"labels\": \"$WORK/bad-labels-idx1-ubyte\", \"every_steps\": 50}]"
WANT="example 1234: label 12 is outside the model's 10 classes [0, 10)"

# no_eval RUN: the run trained (train records) but recorded no eval or validation accuracy.
no_eval() {
  python3 - "$1/metrics.jsonl" <<'PY' || fail "$1: metrics.jsonl"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert any(r["kind"] == "train" for r in recs), "no train records"
bad = [r for r in recs if r["kind"] in ("eval", "validation.bad")]
assert not bad, bad
PY
}
# logged LOG ID: LOG has an ERROR line with ID naming the file, the example and the bad label.
logged() {
  grep " ERROR $2 " "$1" | grep -F "$WORK/bad-labels-idx1-ubyte" | grep -qF ": $WANT" ||
    fail "$1 lacks an ERROR $2 naming the file and the label: $(grep -m3 EVAL "$1")"
}

"$TFX_NODE" train --config "$WORK/exp.json" --run-dir "$WORK/run1" >"$WORK/train.log" 2>&1 || fail "train: $(tail -2 "$WORK/train.log")"
logged "$WORK/train.log" TRAIN-EVAL-DATA
logged "$WORK/train.log" TRAIN-VALIDATE-DATA
no_eval "$WORK/run1"
DONE="eval accuracy n/a (eval data refused, see the log)"
grep -q "^done: step 100, $DONE" "$WORK/train.log" || fail "train's done line: $(grep done: "$WORK/train.log")"
out=$("$TFX_NODE" evaluate --run-dir "$WORK/run1" 2>&1) && fail "evaluate scored the bad eval file: $out"
echo "$out" | grep -qF "eval data $WORK/bad-labels-idx1-ubyte: $WANT" || fail "evaluate: $out"
out=$("$TFX_NODE" evaluate --run-dir "$WORK/run1" --data bad 2>&1) && fail "evaluate --data bad: $out"
echo "$out" | grep -qF "eval data $WORK/bad-labels-idx1-ubyte: $WANT" || fail "evaluate --data bad: $out"

"$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$WORK/run2" >"$WORK/local.log" 2>&1 || fail "local: $(tail -2 "$WORK/local.log")"
logged "$WORK/run2/logs/master-0.log" MASTER-EVAL-DATA
logged "$WORK/run2/logs/master-0.log" MASTER-VALIDATE-DATA
no_eval "$WORK/run2"
grep -q "done: step 100, $DONE" "$WORK/local.log" || fail "local's done line: $(grep done: "$WORK/local.log")"

# The evaluator task of a TF_CONFIG cluster (the chief leaves evaluation to it).
c0=$(free_port) p0=$(free_port) w0=$(free_port) e0=$(free_port)
cluster="\"cluster\":{\"chief\":[\"127.0.0.1:$c0\"],\"ps\":[\"127.0.0.1:$p0\"],\"worker\":[\"127.0.0.1:$w0\"],\"evaluator\":[\"127.0.0.1:$e0\"]}"
experiment "$WORK/exp3.json" training.max_steps=100 checkpoint.every_steps=50 training.report_every=50 \
  data.eval.labels="\"$WORK/bad-labels-idx1-ubyte\""
for task in evaluator chief ps worker; do
  TF_CONFIG="{$cluster,\"task\":{\"type\":\"$task\",\"index\":0}}" "$TFX_NODE" --run-dir "$WORK/run3" \
    $([ "$task" = evaluator ] || [ "$task" = chief ] && echo --config "$WORK/exp3.json") >"$WORK/$task.log" 2>&1 &
  PIDS+=($!)
done
for i in 0 1 2 3; do wait "${PIDS[$i]}" || fail "cluster process $i exited $?"; done
logged "$WORK/evaluator.log" EVALUATOR-EVAL-DATA
grep -q "done: step 100, eval accuracy n/a (the evaluator task evaluates)" "$WORK/chief.log" ||
  fail "chief's done line: $(grep done: "$WORK/chief.log")"
no_eval "$WORK/run3"

# predict: a CSV run whose embedding table has 10 rows, then an input row with id 15 in the second batch of 1000
# (rows of the first batch once reached the output before predict stopped).
python3 - "$WORK" <<'PY'
import random, sys
random.seed(7)
rows = [[random.randrange(10) for _ in range(4)] for _ in range(1500)]
open(sys.argv[1] + "/ids.csv", "w").write("a,b,c,d,label\n" + "".join("%d,%d,%d,%d,%d\n" % (*r, r[0] % 3) for r in rows))
rows[1234][2] = 15
open(sys.argv[1] + "/bad-ids.csv", "w").write("a,b,c,d,label\n" + "".join("%d,%d,%d,%d,0\n" % tuple(r) for r in rows))
PY
experiment "$WORK/emb.json" model.input_shape='[4]' data.format='"csv"' data.scale=1 training.max_steps=20 \
  eval.every_steps=0 data.train.images="\"$WORK/ids.csv\"" data.eval.images="\"$WORK/ids.csv\"" \
  model.layers='[{"type": "embedding", "input_dim": 10, "units": 4}, {"type": "dense", "units": 3}]'
"$TFX_NODE" train --config "$WORK/emb.json" --run-dir "$WORK/run4" >"$WORK/emb.log" 2>&1 || fail "embedding train: $(tail -2 "$WORK/emb.log")"
"$TFX_NODE" predict --run-dir "$WORK/run4" --input "$WORK/ids.csv" --output "$WORK/good.jsonl" >"$WORK/pred.log" 2>&1 ||
  fail "predict on good ids: $(tail -1 "$WORK/pred.log")"
"$TFX_NODE" predict --run-dir "$WORK/run4" --input "$WORK/ids.csv" >"$WORK/stdout.jsonl" 2>"$WORK/pred.log" ||
  fail "predict to stdout: $(tail -1 "$WORK/pred.log")"
cmp -s "$WORK/good.jsonl" "$WORK/stdout.jsonl" || fail "--output and stdout differ: $(diff "$WORK/good.jsonl" "$WORK/stdout.jsonl" | head -3)"
[ "$(wc -l <"$WORK/good.jsonl")" = 1500 ] && grep -q '^{"index": 1499,' "$WORK/good.jsonl" || fail "good.jsonl: $(tail -1 "$WORK/good.jsonl")"
# bad_predict OUT: predict on bad-ids.csv to OUT fails naming the file, the example and the id.
bad_predict() {
  out=$("$TFX_NODE" predict --run-dir "$WORK/run4" --input "$WORK/bad-ids.csv" --output "$1" 2>&1) &&
    fail "predict read id 15 of a 10-row table: $out"
  echo "$out" | grep -qF "bad-ids.csv: example 1234: embedding_1: id 15 is outside the table's 10 rows [0, 10)" || fail "predict: $out"
}
bad_predict "$WORK/bad.jsonl"
[ ! -e "$WORK/bad.jsonl" ] || fail "a failed predict left $(wc -l <"$WORK/bad.jsonl") rows in bad.jsonl"
cp "$WORK/good.jsonl" "$WORK/kept.jsonl"
bad_predict "$WORK/kept.jsonl"
cmp -s "$WORK/good.jsonl" "$WORK/kept.jsonl" || fail "a failed predict changed the existing output file"
leftover=$(ls "$WORK" | grep -E '^(bad|kept)\.jsonl\.') && fail "temporary files left behind: $leftover"
pass "a label outside the classes: logged by trainer, master and evaluator with no eval recorded, evaluate fails; predict refuses an id outside its table, leaving no output"
