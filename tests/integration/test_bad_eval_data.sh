#!/bin/bash
# Eval data the model cannot score: a real Fashion-MNIST eval labels file with one label (record 1234) set to 12,
# outside the 10 classes, and a CSV file with an embedding id outside its table. Such an example used to count as
# a silent miss, then was found at the first evaluation (training went on, exit 0); now the labels are checked
# when the set is loaded: train, local, a TF_CONFIG chief and its evaluator task refuse with exit 2 naming the
# file, the record and the label before the run directory is written, and `tfx-node evaluate` on a run whose
# eval file turned bad refuses the same way (#30, item 16). `tfx-node predict` refuses the bad id, writing no
# output.
source "$(dirname "$0")/lib.sh"
D=/usr/share/datasets/fashion-mnist
python3 - "$D/t10k-labels-idx1-ubyte.gz" "$WORK/bad-labels-idx1-ubyte" <<'PY'
import gzip, sys
raw = bytearray(gzip.open(sys.argv[1]).read())
raw[8 + 1234] = 12  # IDX: an 8-byte header, then one byte per label
open(sys.argv[2], "wb").write(raw)
PY
BAD=$WORK/bad-labels-idx1-ubyte
experiment "$WORK/exp.json" training.max_steps=100 eval.every_steps=50 checkpoint.every_steps=50 \
  training.report_every=50 data.eval.labels="\"$BAD\""
experiment "$WORK/val.json" training.max_steps=100 eval.every_steps=50 checkpoint.every_steps=50 \
  "validation=[{\"name\": \"bad\", \"images\": \"$D/t10k-images-idx3-ubyte.gz\", \"labels\": \"$BAD\", \"every_steps\": 50}]"
WANT="$BAD: record 1234: label 12 is outside the model's 10 classes [0, 10)"

# refused WHAT RUN CMD...: CMD exits 2 naming the file, the record and the label, and RUN was never created.
refused() {
  local what=$1 run=$2
  shift 2
  out=$("$@" 2>&1); rc=$?
  [ "$rc" = 2 ] || fail "$what: exit $rc, want 2: $(echo "$out" | tail -2)"
  echo "$out" | grep -qF "$WANT" || fail "$what: the label not named: $(echo "$out" | tail -2)"
  [ ! -e "$run" ] || fail "$what: wrote $(ls -A "$run" | tr '\n' ' ')in the run directory"
}
refused "train, eval set" "$WORK/run1" "$TFX_NODE" train --config "$WORK/exp.json" --run-dir "$WORK/run1"
refused "train, validation set" "$WORK/run1" "$TFX_NODE" train --config "$WORK/val.json" --run-dir "$WORK/run1"
refused "local, eval set" "$WORK/run2" "$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$WORK/run2"
refused "local, validation set" "$WORK/run2" "$TFX_NODE" local --config "$WORK/val.json" --run-dir "$WORK/run2"

# evaluate: a good run whose saved eval file is then the bad one.
experiment "$WORK/good.json" training.max_steps=20 eval.every_steps=0 checkpoint.every_steps=20
"$TFX_NODE" train --config "$WORK/good.json" --run-dir "$WORK/run1" >"$WORK/train.log" 2>&1 || fail "train: $(tail -2 "$WORK/train.log")"
python3 - "$WORK/run1/config.json" "$BAD" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["data"]["eval"]["labels"] = sys.argv[2]
json.dump(c, open(sys.argv[1], "w"))
PY
out=$("$TFX_NODE" evaluate --run-dir "$WORK/run1" 2>&1); rc=$?
[ "$rc" = 2 ] || fail "evaluate scored the bad eval file: exit $rc: $out"
echo "$out" | grep -qF "$WANT" || fail "evaluate: $out"

# A TF_CONFIG cluster: its chief and its evaluator task each refuse the eval set at their start.
c0=$(free_port) p0=$(free_port) w0=$(free_port) e0=$(free_port)
cluster="\"cluster\":{\"chief\":[\"127.0.0.1:$c0\"],\"ps\":[\"127.0.0.1:$p0\"],\"worker\":[\"127.0.0.1:$w0\"],\"evaluator\":[\"127.0.0.1:$e0\"]}"
for task in evaluator chief ps worker; do
  TF_CONFIG="{$cluster,\"task\":{\"type\":\"$task\",\"index\":0}}" "$TFX_NODE" --run-dir "$WORK/run3" \
    $([ "$task" = evaluator ] || [ "$task" = chief ] && echo --config "$WORK/exp.json") >"$WORK/$task.log" 2>&1 &
  PIDS+=($!)
done
for i in 0 1; do
  wait "${PIDS[$i]}"; rc=$?
  [ "$rc" = 2 ] || fail "TF_CONFIG task $i exited $rc, want 2"
done
grep -qF "$WANT" "$WORK/evaluator.log" || fail "evaluator: $(tail -1 "$WORK/evaluator.log")"
grep -qF "$WANT" "$WORK/chief.log" || fail "chief: $(tail -1 "$WORK/chief.log")"
kill "${PIDS[2]}" "${PIDS[3]}" 2>/dev/null
[ ! -e "$WORK/run3/config.json" ] || fail "the chief wrote config.json before refusing its eval set"

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
pass "a label outside the classes: refused with exit 2 by train, local, chief, evaluator and evaluate, naming file and record, nothing written; predict refuses an id outside its table, leaving no output"
