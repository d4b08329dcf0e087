#!/bin/bash
# The recommendation examples on a small planted click log in Criteo's layout (recsys_data.py): logistic
# regression learns the first-order part, DLRM (examples/criteo_dlrm.json: a dot interaction) also the pairwise
# part and beats it, DCN-v2 (criteo_dcnv2.json: cross layers) beats it too, and DIN (criteo_din.json: target
# attention over the hist sequence column) also learns the history's match with the item and beats DLRM. Histories
# longer than max_len are truncated and counted (DATA-SEQ-TRUNCATED), empty ones and items never seen in training
# give finite losses.
source "$(dirname "$0")/lib.sh"

python3 "$(dirname "$0")/recsys_data.py" "$WORK" --train 20000 --test 4000 || fail "recsys_data.py"
D=(--set data.train.images="$WORK/train.csv" --set data.eval.images="$WORK/test.csv" --set training.epochs=2
  --set training.report_every=50)
for i in $(seq 0 25); do D+=(--set "model.features[$i].hash_bucket_size=4096"); done # 30 tokens a column here
declare -A A
for m in lr dlrm dcnv2 din; do
  S=()
  [ $m = din ] && S=(--set "model.features[26].hash_bucket_size=4096" --set "model.features[27].hash_bucket_size=4096")
  "$TFX_NODE" train --config "$TFX_SOURCE_DIR/examples/criteo_$m.json" --run-dir "$WORK/$m" "${D[@]}" "${S[@]}" \
    >"$WORK/$m.log" 2>&1 || fail "criteo_$m: $(tail -3 "$WORK/$m.log")"
  A[$m]=$(metric "$WORK/$m/metrics.jsonl" eval auc)
  ll=$(metric "$WORK/$m/metrics.jsonl" eval log_loss)
  python3 -c "import math, sys; sys.exit(0 if math.isfinite(float('$ll')) else 1)" 2>/dev/null \
    || fail "criteo_$m: eval log_loss $ll"
done
summary="auc lr=${A[lr]} dlrm=${A[dlrm]} dcnv2=${A[dcnv2]} din=${A[din]}"
ge "${A[dlrm]}" "$(python3 -c "print(${A[lr]} + 0.02)")" || fail "DLRM does not beat LR by 0.02: $summary"
ge "${A[dcnv2]}" "$(python3 -c "print(${A[lr]} + 0.01)")" || fail "DCN-v2 does not beat LR by 0.01: $summary"
ge "${A[din]}" "$(python3 -c "print(${A[dlrm]} + 0.02)")" || fail "DIN does not beat DLRM by 0.02: $summary"
grep -q "DATA-SEQ-TRUNCATED.*train.csv: [1-9][0-9]* ids past" "$WORK/din.log" \
  || fail "no count of the histories' ids past max_len: $(grep -c . "$WORK/din.log") lines"
pass "$summary; long histories truncated and counted"
