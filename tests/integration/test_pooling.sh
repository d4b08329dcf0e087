#!/bin/bash
# Pooling with Keras's strides and padding: `tfx-node model` shows each pooling layer's output shape (TensorFlow's
# 'same' is ceil(in / stride), 'valid' is (in - pool) / stride + 1, strides left out is pool_size), a pool larger
# than its input with 'valid' is refused naming the layer, and a CNN with overlapping padded pools trains.
source "$(dirname "$0")/lib.sh"

LAYERS='[{"type": "conv2d", "filters": 8, "kernel_size": 3, "padding": "same", "activation": "relu"},
 {"type": "max_pool2d", "pool_size": 3, "strides": 2, "padding": "same"},
 {"type": "avg_pool2d", "pool_size": 3, "strides": 1},
 {"type": "max_pool2d", "pool_size": 2},
 {"type": "avg_pool2d", "pool_size": 4, "strides": 3, "padding": "same"},
 {"type": "flatten"}, {"type": "dense", "units": 10}]'
experiment "$WORK/pool.json" model.input_shape='[28, 28, 1]' model.layers="$LAYERS" optimizer.name='"adam"' \
  optimizer.learning_rate=0.01 training.batch_size=32
"$TFX_NODE" model --config "$WORK/pool.json" >"$WORK/model.txt" 2>&1 || fail "tfx-node model: $(cat "$WORK/model.txt")"
shape() { grep "^$1 " "$WORK/model.txt" | grep -o '\[[^]]*\]' | head -1 | tr -d ' '; }
for want in "max_pool2d_1 [14,14,8]" "avg_pool2d_1 [12,12,8]" "max_pool2d_2 [6,6,8]" "avg_pool2d_2 [2,2,8]" \
  "flatten_1 [32]"; do
  set -- $want
  [ "$(shape "$1")" = "$2" ] || fail "$1: output $(shape "$1"), want $2: $(cat "$WORK/model.txt")"
done

experiment "$WORK/bad.json" model.input_shape='[4, 4, 1]' \
  model.layers='[{"type": "max_pool2d", "pool_size": 5, "strides": 1}, {"type": "flatten"}, {"type": "dense", "units": 10}]'
out=$("$TFX_NODE" model --config "$WORK/bad.json" 2>&1) && fail "a 5x5 'valid' pool on a 4x4 input was accepted: $out"
echo "$out" | grep -qF "layer max_pool2d_1: pool 5 larger than input 4x4 (padding 'valid')" || fail "refusal: $out"

"$TFX_NODE" train --config "$WORK/pool.json" --run-dir "$WORK/run" --set training.max_steps=400 \
  --set eval.every_steps=400 >"$WORK/train.log" 2>&1 || fail "train: $(tail -3 "$WORK/train.log")"
acc=$(metric "$WORK/run/metrics.jsonl" eval accuracy)
ge "$acc" 0.6 || fail "a CNN with overlapping 'same' pools reached eval accuracy $acc after 400 steps"
pass "pooling shapes 14/12/6/2 as Keras; oversized 'valid' pool refused; CNN with strided padded pools trained to $acc"
