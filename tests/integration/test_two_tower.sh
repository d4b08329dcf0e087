#!/bin/bash
# Two-tower retrieval on this machine's Debian dependencies (scripts/debian_deps.py, examples/debian_two_tower.json):
# one epoch ranks the held-out packages' dependencies better than the popularity baseline (recall_50 above 1.2x
# baseline_recall_50, both in the eval record; a tenth of the test pairs, across the packages).
source "$(dirname "$0")/lib.sh"

command -v apt-cache >/dev/null || skip "no apt-cache on this machine (Debian's package lists are the data)"
python3 "$TFX_SOURCE_DIR/scripts/debian_deps.py" "$WORK/deps" >"$WORK/deps.log" 2>&1 || fail "debian_deps.py"
[ "$(wc -l <"$WORK/deps/train.csv")" -gt 20000 ] || skip "apt-cache knows too few packages: $(cat "$WORK/deps.log")"
awk "NR == 1 || NR % 10 == 0" "$WORK/deps/test.csv" >"$WORK/test.csv"
"$TFX_NODE" train --config "$TFX_SOURCE_DIR/examples/debian_two_tower.json" --run-dir "$WORK/run" \
  --set data.train.images="$WORK/deps/train.csv" --set data.eval.images="$WORK/test.csv" \
  >"$WORK/train.log" 2>&1 || fail "train: $(tail -3 "$WORK/train.log")"
r=$(metric "$WORK/run/metrics.jsonl" eval recall_50)
b=$(metric "$WORK/run/metrics.jsonl" eval baseline_recall_50)
r10=$(metric "$WORK/run/metrics.jsonl" eval recall_10)
[ "$r10" != none ] || fail "no recall_10 in the eval record"
ge "$r" "$(python3 -c "print(1.2 * $b)")" || fail "recall_50 $r is not 1.2x the popularity baseline's $b"
pass "two-tower recall_10 $r10, recall_50 $r against the popularity baseline's $b"
