#!/bin/bash
# A table shared by two columns of one id space (examples/criteo_din.json: the target item's bag reads the history's
# table, "table": "e_hist") on a small planted click log (recsys_data.py): one process and 2 ps + 2 workers train it,
# each checkpoint holds the one table (e_hist/embeddings, no e_item/embeddings), split by rows over the ps in the
# cluster, and both learn the history's match with the item (AUC well above chance; test histories hold items never
# trained, and the losses stay finite); columns that disagree on the table's rows are refused before training,
# naming both bags.
source "$(dirname "$0")/lib.sh"

python3 "$(dirname "$0")/recsys_data.py" "$WORK" --train 20000 --test 4000 || fail "recsys_data.py"
D=(--set data.train.images="$WORK/train.csv" --set data.eval.images="$WORK/test.csv" --set training.report_every=10 --set training.epochs=2)
for i in $(seq 0 27); do D+=(--set "model.features[$i].hash_bucket_size=4096"); done
EXP="$TFX_SOURCE_DIR/examples/criteo_din.json"
"$TFX_NODE" train --config "$EXP" --run-dir "$WORK/one" "${D[@]}" >"$WORK/one.log" 2>&1 ||
  fail "one process: $(tail -3 "$WORK/one.log")"
"$TFX_NODE" local --config "$EXP" --ps 2 --workers 2 --run-dir "$WORK/cluster" "${D[@]}" >"$WORK/cluster.log" 2>&1 ||
  fail "cluster: $(tail -3 "$WORK/cluster.log")"
for run in one cluster; do
  "$TFX_NODE" inspect "$WORK/$run" >"$WORK/$run.vars" 2>&1 || fail "inspect $run: $(tail -1 "$WORK/$run.vars")"
  grep -q "^e_hist/embeddings " "$WORK/$run.vars" || fail "$run: no e_hist/embeddings: $(head -3 "$WORK/$run.vars")"
  ! grep -q "^e_item/embeddings" "$WORK/$run.vars" || fail "$run: the item's bag has a table of its own"
  ll=$(metric "$WORK/$run/metrics.jsonl" eval log_loss)
  python3 -c "import math, sys; sys.exit(0 if math.isfinite(float('$ll')) else 1)" 2>/dev/null || fail "$run: log_loss $ll"
done
grep "^e_hist/embeddings " "$WORK/cluster.vars" | grep -q "ps 0..1 by id (lazy)" || fail "the shared table is not split over both ps: $(grep '^e_hist' "$WORK/cluster.vars")"
one=$(metric "$WORK/one/metrics.jsonl" eval auc)
many=$(metric "$WORK/cluster/metrics.jsonl" eval auc)
ge "$one" 0.65 || fail "one process: AUC $one"
ge "$many" 0.65 || fail "cluster: AUC $many"
"$TFX_NODE" train --config "$EXP" --run-dir "$WORK/bad" "${D[@]}" --set "model.features[27].hash_bucket_size=2048" \
  >"$WORK/bad.log" 2>&1 && fail "a shared table over columns of 4096 and 2048 rows trained"
grep -q "layer e_item: shares the table of e_hist (4096 rows x 16 units), its own column and units give 2048 rows" \
  "$WORK/bad.log" || fail "no named error: $(tail -1 "$WORK/bad.log")"
pass "one table for hist and item: AUC one process $one, 2 ps + 2 workers $many; disagreeing columns refused"
