#!/bin/bash
# tfx-node local: sync, async (whole and in parts) and sync with a backup worker each train (a real signal in 300
# steps), with 5+ real processes; bad experiment keys are rejected with exit 2 naming the key. The modes train
# lib.sh's small_mlp unless they name their model (MAKE_EXP=experiment: the example's).
. "$(dirname "$0")/lib.sh"
run_mode() {
  local name=$1 workers=$2; shift 2
  "${MAKE_EXP:-small_mlp}" "$WORK/$name.json" training.max_steps=300 eval.every_steps=0 training.report_every=100 "$@"
  "$TFX_NODE" local --config "$WORK/$name.json" --workers "$workers" --run-dir "$WORK/run-$name" >"$WORK/$name.log" 2>&1 \
    || fail "$name: $(tail -2 "$WORK/$name.log")"
  local acc; acc=$(metric "$WORK/run-$name/metrics.jsonl" eval accuracy)
  ge "$acc" "${MIN_ACC:-0.75}" || fail "$name: accuracy $acc < ${MIN_ACC:-0.75}"
  echo "$name: accuracy $acc"
}
run_mode sync 2 training.mode=sync
run_mode async 2 training.mode=async
run_mode backup 3 training.mode=sync training.replicas_to_aggregate=2
# Async push-pulls in pipelined parts (bench/datapath's fast path at 4 MiB and up), forced on by a small part size;
# without replicas (with them a push-pull goes whole: a part is not sent again to a promoted backup).
run_mode parts 2 training.mode=async training.push_part_bytes=16384 cluster.replicas=0
grep -q "PUSH-PARTS .* in [0-9]* pipelined parts" "$WORK/run-parts/logs/worker-0.log" || fail "parts: no push-pull went in parts"
# ssp in parts: a worker too far ahead gets its last part's reply parked (then carrying every value).
run_mode ssp_parts 2 training.mode=ssp training.staleness=1 training.push_part_bytes=16384 cluster.replicas=0
grep -h "PS-STOP" "$WORK"/run-backup/logs/ps-*.log | grep -q "[1-9][0-9]* stale dropped" || fail "backup worker: no stale gradient dropped"
grep -q "PS-STOP stopping at step 300" "$WORK/run-sync/logs/ps-0.log" || fail "sync: ps did not stop at step 300"
# Async stops at max_steps, not one past when both workers push the last step together.
grep -q "PS-STOP stopping at step 300:" "$WORK/run-async/logs/ps-0.log" || fail "async: $(grep PS-STOP "$WORK/run-async/logs/ps-0.log")"
# Without a TTY, one progress line per report step for the cluster (not one per worker), labelled as `train` does.
[ "$(grep -c '^step ' "$WORK/sync.log")" = 3 ] && grep -q "^step 100/300 " "$WORK/sync.log" && grep -q "^step 300/300 " "$WORK/sync.log" ||
  fail "sync progress lines: $(grep '^step ' "$WORK/sync.log")"
# The workers' step-time breakdown (src/worker/timing.c): every train line has it, its parts add up to the step.
python3 - "$WORK/run-sync/metrics.jsonl" <<'PY' || fail "sync: step-time breakdown missing or inconsistent in metrics.jsonl"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
assert lines, "no train lines"
for m in lines:
    parts = m["row_pull_ms"] + m["compute_ms"] + m["push_pull_ms"] + m["other_ms"]
    assert m["compute_ms"] > 0 and m["push_pull_ms"] > 0 and abs(parts - m["step_ms"]) <= 1e-3 * m["step_ms"], m
PY
grep -q "WORKER-TIMING steps=300 " "$WORK/run-sync/logs/worker-0.log" || fail "sync: no WORKER-TIMING line for 300 steps"
# The embedding example, narrower (4-wide embeddings, 16 hidden units: 100 KB a ps, no page faults a step under ASan).
MAKE_EXP=experiment EXAMPLE=$SRC/examples/fashion_mnist_embedding.json run_mode embedding 2 training.mode=sync \
  'model.layers=[{"type": "embedding", "input_dim": 256, "units": 4}, {"type": "dense", "units": 16, "activation": "relu"},
    {"type": "dense", "units": 10}]'
EXAMPLE=$SRC/examples/fashion_mnist_embedding.json "$TFX_NODE" plan --config "$SRC/examples/fashion_mnist_embedding.json" --ps 2 | grep -q "embedding_1/embeddings/part_1" || fail "embedding table not partitioned"
run_mode batchnorm 2 training.mode=sync 'model.layers=[{"type":"flatten"},{"type":"dense","units":32},{"type":"batch_norm"},{"type":"relu"},{"type":"dense","units":10}]'
var_values "$WORK/run-batchnorm" batch_norm_1/moving_mean >"$WORK/moving_mean.txt" || fail "inspect moving_mean"
all_zero "$WORK/moving_mean.txt" && fail "moving statistics were not assigned at the ps"
MAKE_EXP=experiment MIN_ACC=0.5 run_mode frozen 2 training.mode=sync 'training.trainable="dense_2,dense_3"' training.max_steps=100
# Frozen dense_1 keeps its initial values (a bias starts at zero anyway: the kernel tells). Its initial values are
# those of a 1-step run at learning rate 0 (initialization depends only on the seed and the variable's name);
# dense_2, which trains, must differ from its own, or the comparison could not see a change.
"$TFX_NODE" train --config "$WORK/frozen.json" --run-dir "$WORK/run-init" --max-steps 1 --set optimizer.learning_rate=0 \
  >"$WORK/init.log" 2>&1 || fail "initial values: $(tail -1 "$WORK/init.log")"
for v in dense_1/kernel dense_2/kernel; do
  var_values "$WORK/run-frozen" $v >"$WORK/frozen-${v%/*}.txt" && var_values "$WORK/run-init" $v >"$WORK/init-${v%/*}.txt" ||
    fail "inspect $v"
done
cmp -s "$WORK/frozen-dense_1.txt" "$WORK/init-dense_1.txt" || fail "dense_1/kernel, outside training.trainable, changed"
cmp -s "$WORK/frozen-dense_2.txt" "$WORK/init-dense_2.txt" && fail "dense_2/kernel, in training.trainable, did not change"
experiment "$WORK/bad.json" training.bogus=1
out=$("$TFX_NODE" local --config "$WORK/bad.json" --run-dir "$WORK/run-bad" 2>&1); rc=$?
[ "$rc" = 2 ] || fail "unknown key: exit $rc, want 2"
echo "$out" | grep -q "training.bogus" || fail "unknown key not named: $out"
# More replicas to aggregate than workers: refused before any process starts or any file is written (the
# master found it after local had started the cluster: #30, item 18).
experiment "$WORK/replicas.json" training.mode='"sync"' training.replicas_to_aggregate=3
out=$("$TFX_NODE" local --workers 2 --config "$WORK/replicas.json" --run-dir "$WORK/run-replicas" 2>&1); rc=$?
[ "$rc" = 2 ] || fail "replicas_to_aggregate 3 over 2 workers: exit $rc, want 2"
echo "$out" | grep -q "training.replicas_to_aggregate 3 exceeds the 2 worker(s)" || fail "replicas not named: $out"
echo "$out" | grep -q "LOCAL-START" && fail "local started the cluster before refusing: $out"
[ ! -e "$WORK/run-replicas" ] || fail "a refused local wrote $(ls -A "$WORK/run-replicas" | tr '\n' ' ')"
pass "local sync / async / backup"
