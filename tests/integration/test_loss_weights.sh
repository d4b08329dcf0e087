#!/bin/bash
# Loss weights (#25): on a 150-row CSV read by feature columns, data.weight_key with every weight 1 and
# model.class_weights of ones train bit for bit as without them (keys unset: training unchanged); weights of 2
# (class or example), or label smoothing, change the trained variables; a weight column a run cannot read is refused
# naming it (exit 2).
. "$(dirname "$0")/lib.sh"
python3 "$PYLIB/blobs_csv.py" "$WORK/ones.csv" 11 1
python3 "$PYLIB/blobs_csv.py" "$WORK/twos.csv" 11 2
FEATURES='[{"key": "a", "type": "numeric"}, {"key": "b", "type": "numeric"}, {"key": "c", "type": "numeric"}, {"key": "d", "type": "numeric"}]'
run() { # run NAME CSV KEY=VALUE...: 30 steps of a 4-8-3 MLP on CSV; the kernel of its first layer into NAME.vals
  local name=$1 csv=$2; shift 2
  experiment "$WORK/$name.json" data.format='"csv"' data.train.images="\"$WORK/$csv\"" data.eval.images="\"$WORK/$csv\"" \
    data.label_column='"label"' data.scale=1 model.features="$FEATURES" model.input_shape='[4]' \
    model.layers='[{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]' \
    training.batch_size=8 training.max_steps=30 eval.every_steps=0 checkpoint.every_steps=0 "$@"
  "$TFX_NODE" train --config "$WORK/$name.json" --run-dir "$WORK/run-$name" >"$WORK/$name.log" 2>&1 || return 1
  var_values "$WORK/run-$name" dense_1/kernel >"$WORK/$name.vals"
}
run plain ones.csv || fail "train: $(tail -1 "$WORK/plain.log")"
run unit ones.csv data.weight_key='"w"' model.class_weights='[1, 1, 1]' || fail "unit weights: $(tail -1 "$WORK/unit.log")"
cmp -s "$WORK/plain.vals" "$WORK/unit.vals" || fail "weights of 1 do not train bit for bit as no weights"
run twos twos.csv data.weight_key='"w"' || fail "example weights 2: $(tail -1 "$WORK/twos.log")"
cmp -s "$WORK/plain.vals" "$WORK/twos.vals" && fail "example weights of 2 changed nothing"
run cw ones.csv model.class_weights='[1, 2, 1]' || fail "class weights: $(tail -1 "$WORK/cw.log")"
cmp -s "$WORK/plain.vals" "$WORK/cw.vals" && fail "model.class_weights [1, 2, 1] changed nothing"
run ls ones.csv model.label_smoothing=0.1 || fail "label smoothing: $(tail -1 "$WORK/ls.log")"
cmp -s "$WORK/plain.vals" "$WORK/ls.vals" && fail "model.label_smoothing 0.1 changed nothing"
run bad ones.csv data.weight_key='"nope"'
rc=$?
[ $rc != 0 ] && grep -q "nope" "$WORK/bad.log" || fail "an unknown weight column: exit $rc, $(tail -1 "$WORK/bad.log")"
pass "unit weights are bit-identical to none; example weights, class weights and label smoothing change training; a missing weight column is named"
