#!/bin/bash
# checkpoint.save_initial (#25 item 7): a fresh run checkpoints its initial weights at step 0, in one process
# (train) and in a cluster (local: the chief, before any worker has the plan); the step-0 checkpoint holds the
# initial weights (not the trained ones), a run can be exported from it, and without the key there is none.
. "$(dirname "$0")/lib.sh"
experiment "$WORK/exp.json" eval.every_steps=0 training.report_every=10 training.seed=3
ck0=checkpoints/ckpt-000000000000
"$TFX_NODE" train --config "$WORK/exp.json" --run-dir "$WORK/plain" --max-steps 20 >"$WORK/plain.log" 2>&1 ||
  fail "train without save_initial failed"
[ ! -e "$WORK/plain/$ck0" ] || fail "a step-0 checkpoint without checkpoint.save_initial"
"$TFX_NODE" train --config "$WORK/exp.json" --run-dir "$WORK/one" --max-steps 20 --set checkpoint.save_initial=true \
  >"$WORK/one.log" 2>&1 || fail "train with save_initial failed"
[ -f "$WORK/one/$ck0/manifest.json" ] || fail "train: no step-0 checkpoint"
var=$("$TFX_NODE" inspect "$WORK/one/$ck0" 2>&1 | grep -oE '[A-Za-z0-9_]+/kernel' | head -1)
[ -n "$var" ] || fail "inspect names no kernel in the step-0 checkpoint"
var_values "$WORK/one/$ck0" "$var" >"$WORK/w0" || fail "step-0 values"
var_values "$WORK/one" "$var" >"$WORK/w20" || fail "step-20 values"
cmp -s "$WORK/w0" "$WORK/w20" && fail "the step-0 checkpoint holds the trained weights"
all_zero "$WORK/w0" && fail "the step-0 checkpoint holds zeros, not the initial weights"
"$TFX_NODE" export --run-dir "$WORK/one" --checkpoint 0 --out "$WORK/x0" >"$WORK/x0.log" 2>&1 || fail "export --checkpoint 0"
"$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$WORK/cl" --max-steps 20 --set checkpoint.save_initial=true \
  >"$WORK/cl.log" 2>&1 || fail "local with save_initial failed"
[ -f "$WORK/cl/$ck0/manifest.json" ] || fail "local: no step-0 checkpoint"
var_values "$WORK/cl/$ck0" "$var" >"$WORK/c0" || fail "cluster step-0 values"
cmp -s "$WORK/c0" "$WORK/w0" || fail "the cluster's step-0 checkpoint differs from train's (same seed, initial weights)"
pass "checkpoint.save_initial: step-0 checkpoints of the initial weights in train and local, equal to each other"
