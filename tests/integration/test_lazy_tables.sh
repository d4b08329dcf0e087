#!/bin/bash
# Lazy tables on the parameter servers: an embedding_bag's table is placed one share per ps (ids mod n_ps) and
# travels by the rows a batch touches. A local cluster (2 ps, 2 workers) learns the planted sparse set; its
# checkpoint holds each ps's rows (ps-K.rows) and `evaluate` rebuilt from them scores exactly what the chief
# scored through row pulls; a batch's rows riding on the push-pull before it train the same run bit for bit as
# row pulls of their own; the run resumes onto 3 ps (rows re-partitioned by id); a ps killed with kill -9 mid-run
# is restarted, the cluster rolls back to the checkpoint and still finishes and learns.
. "$(dirname "$0")/lib.sh"
python3 "$(dirname "$0")/sparse_data.py" "$WORK"
experiment "$WORK/lr.json" model.input_shape='[1048576]' \
  model.layers='[{"type": "embedding_bag", "units": 4, "combiner": "sum"}]' model.loss='"softmax_cross_entropy"' \
  data.format='"libsvm"' data.train.images="\"$WORK/train.libsvm\"" data.eval.images="\"$WORK/test.libsvm\"" \
  data.scale=1 optimizer.name='"adagrad"' optimizer.learning_rate=0.5 training.batch_size=32 training.epochs=3 \
  training.report_every=50 eval.every_steps=0 checkpoint.every_steps=100
"$TFX_NODE" plan --config "$WORK/lr.json" --ps 2 >"$WORK/plan.txt" 2>&1 || fail "plan: $(tail -1 "$WORK/plan.txt")"
grep -q "embedding_bag_1/embeddings/mod_0 *ids % 2 == 0 of 1048576 (lazy" "$WORK/plan.txt" || fail "plan: $(cat "$WORK/plan.txt")"
grep -q "embedding_bag_1/embeddings/mod_1 *ids % 2 == 1 of 1048576 (lazy" "$WORK/plan.txt" || fail "plan: no share on ps 1"
"$TFX_NODE" plan --config "$WORK/lr.json" --ps 2 --set placement.table_partition=range >"$WORK/plan-range.txt" 2>&1
grep -q "embedding_bag_1/embeddings/range_1 *ids 524288..1048576 of 1048576 (lazy" "$WORK/plan-range.txt" ||
  fail "range plan: $(cat "$WORK/plan-range.txt")"
# Range partitioning trains the same model to the same figures (the same math, other ps).
"$TFX_NODE" local --config "$WORK/lr.json" --run-dir "$WORK/run-range" --ps 2 --workers 2 \
  --set placement.table_partition=range >"$WORK/range.log" 2>&1 || fail "range cluster: $(tail -2 "$WORK/range.log")"

"$TFX_NODE" local --config "$WORK/lr.json" --run-dir "$WORK/run" --ps 2 --workers 2 >"$WORK/local.log" 2>&1 ||
  fail "local cluster: $(tail -2 "$WORK/local.log")"
acc=$(metric "$WORK/run/metrics.jsonl" eval accuracy); step=$(metric "$WORK/run/metrics.jsonl" eval step)
[ "$step" = 282 ] || fail "3 epochs of 6000 at 64 a step are 282 steps, the run ended at $step"
ge "$acc" 0.85 || fail "the cluster reached accuracy $acc, want >= 0.85 (chance 0.25)"
[ "$(metric "$WORK/run-range/metrics.jsonl" eval accuracy)" = "$acc" ] ||
  fail "range partitioning reached $(metric "$WORK/run-range/metrics.jsonl" eval accuracy), mod $acc"
# A batch's rows ride on the push-pull of the step before (training.rows_with_push, the default): read once the
# step is applied, they are the rows a row pull of their own would get, so the run is the same bit for bit.
"$TFX_NODE" local --config "$WORK/lr.json" --run-dir "$WORK/run-pull" --ps 2 --workers 2 \
  --set training.rows_with_push=false >"$WORK/pull.log" 2>&1 || fail "row pulls: $(tail -2 "$WORK/pull.log")"
python3 - "$WORK/run/metrics.jsonl" "$WORK/run-pull/metrics.jsonl" <<'PY' || fail "rows with the push-pull: see above"
import json, sys
runs = [[json.loads(l) for l in open(p) if l.strip()] for p in sys.argv[1:]]
key = lambda r: (r["kind"], r.get("worker", -1), r["step"])
pick = lambda recs: sorted(((key(r), r.get("loss"), r.get("accuracy")) for r in recs if r["kind"] in ("train", "eval")))
assert pick(runs[0]) == pick(runs[1]), "losses and accuracies differ with and without rows_with_push"
ride, own = ([r for r in recs if r["kind"] == "train"] for recs in runs)
assert all(r["row_pull_ms"] == 0 for r in ride[2:]), "rows pulled on their own with rows_with_push: %s" % ride[2]
assert all(r["row_pull_ms"] > 0 for r in own), "no row pull time without rows_with_push"
PY
ck="$WORK/run/checkpoints/ckpt-000000000282"
[ -s "$ck/ps-0.rows" ] && [ -s "$ck/ps-1.rows" ] || fail "the checkpoint holds no row files: $(ls "$ck")"
grep -q '"rows"' "$ck/manifest.json" || fail "the manifest lists no row files"
# The table rebuilt from the row files (every other row at its initial value) scores what the chief scored.
"$TFX_NODE" evaluate --run-dir "$WORK/run" >"$WORK/eval.log" 2>&1 || fail "evaluate: $(tail -1 "$WORK/eval.log")"
printf -v want "%.4f" "$acc"
grep -q "accuracy $want " "$WORK/eval.log" || fail "evaluate from the row files: $(tail -1 "$WORK/eval.log"), chief $want"
"$TFX_NODE" inspect "$WORK/run" | grep "embedding_bag_1/embeddings " | grep -q "by id (lazy)" || fail "inspect: no lazy table"

# Resume onto 3 ps: each takes its share of the rows (ids mod 3) and its dense shards from every file.
"$TFX_NODE" local --config "$WORK/lr.json" --run-dir "$WORK/run" --ps 3 --workers 2 --set training.epochs=4 \
  >"$WORK/resume.log" 2>&1 || fail "resume onto 3 ps: $(tail -2 "$WORK/resume.log")"
grep -q "MASTER-RESUME resuming from .*ckpt-000000000282" "$WORK/run/logs/master-0.log" || fail "no resume at 282"
grep -q "MASTER-RESUME-REPARTITION .* written by 2 ps; the cluster has 3" "$WORK/run/logs/master-0.log" ||
  fail "the resume onto 3 ps was not logged as such"
# ps 2 holds only a share of the table, and no file of its own in a checkpoint of 2 ps: it starts at the step too
grep -q "PS-INIT ps instance 2: .* step 282 restored" "$WORK/run/logs/ps-2.log" ||
  fail "ps 2 did not resume at step 282: $(grep -h 'PS-INIT ps instance 2' "$WORK/run/logs/ps-2.log" | tail -1)"
grep -q "training from global step 282" "$WORK"/run/logs/worker-0.log ||
  fail "worker 0 did not resume at step 282: $(grep -h 'training from' "$WORK"/run/logs/worker-0.log | tail -1)"
racc=$(metric "$WORK/run/metrics.jsonl" eval accuracy)
[ "$(metric "$WORK/run/metrics.jsonl" eval step)" = 375 ] || fail "4 epochs end at 375"
ge "$racc" 0.85 || fail "after resuming onto 3 ps the accuracy is $racc"

# Async: every push applies at once to the rows it carries.
"$TFX_NODE" local --config "$WORK/lr.json" --run-dir "$WORK/run-async" --ps 2 --workers 2 --set training.mode=async \
  >"$WORK/async.log" 2>&1 || fail "async cluster: $(tail -2 "$WORK/async.log")"
aacc=$(metric "$WORK/run-async/metrics.jsonl" eval accuracy)
# Async runs differ by timing (sync ones never), so the bar is the same-seed sync run's accuracy less a margin
# below their spread: 60 runs (release, release on one core, ASan) gave 0.810-0.873 against sync's 0.869, and a
# fresh machine 0.815. Async that learns nothing stays near chance (0.25).
ge "$aacc" "$(python3 -c "print($acc - 0.12)")" || fail "async reached accuracy $aacc, the sync run $acc (want >= sync - 0.12)"

# kill -9 of a ps holding rows: restarted, rolled back to the checkpoint, the run still ends and learns.
"$TFX_NODE" local --config "$WORK/lr.json" --run-dir "$WORK/run-kill" --ps 2 --workers 2 --set training.epochs=20 \
  --set checkpoint.every_steps=200 >"$WORK/kill.log" 2>&1 &
LP=$!; PIDS+=($LP)
# A complete checkpoint first, polled tightly (a release build trains the 1875 steps in a few seconds), then ps 1,
# the workers held until it is dead (kill_ps_at), so the kill lands inside the run however fast it trains.
for _ in $(seq 6000); do has_ckpt "$WORK/run-kill" || ! kill -0 "$LP" 2>/dev/null && break; sleep 0.02; done
has_ckpt "$WORK/run-kill" || fail "no checkpoint to kill after: $(tail -2 "$WORK/kill.log")"
kill_ps_at "$WORK/kill.log" "$WORK/run-kill" 0 "$LP" 1
wait "$LP" || fail "the run did not survive kill -9 of ps 1: $(tail -3 "$WORK/kill.log")"
grep -q "ps 1 exited\|ps 1 .*signal\|LOCAL-RESTART ps 1" "$WORK/kill.log" || fail "the supervisor saw no ps exit"
kacc=$(metric "$WORK/run-kill/metrics.jsonl" eval accuracy)
[ "$(metric "$WORK/run-kill/metrics.jsonl" eval step)" = 1875 ] || fail "20 epochs end at 1875"
ge "$kacc" 0.85 || fail "after kill -9 of a ps the accuracy is $kacc"
pass "lazy tables: 2 ps by id, accuracy $acc (evaluate from row files agrees), resumed onto 3 ps $racc, after kill -9 of a ps $kacc, async $aacc"
