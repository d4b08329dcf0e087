#!/bin/bash
# tfx-node spool (#28): standard input into a directory a run follows. 250 lines with --lines 100 land as three
# files (100, 100, 50 lines) under names that sort in input order, no dot file left; a second spool's files sort
# after the first's; their concatenation is the input; a run following the directory trains on every row
# (examples_seen), and with no --out the command fails naming it.
. "$(dirname "$0")/lib.sh"
python3 "$(dirname "$0")/sparse_data.py" "$WORK" --train 320 --test 50
head -250 "$WORK/train.libsvm" | "$TFX_NODE" spool --out "$WORK/in" --lines 100 2>"$WORK/spool.log" ||
  fail "spool: $(cat "$WORK/spool.log")"
tail -70 "$WORK/train.libsvm" | "$TFX_NODE" spool --out "$WORK/in" --lines 100 2>>"$WORK/spool.log" ||
  fail "spool: $(cat "$WORK/spool.log")"
counts=$(for f in $(ls "$WORK/in"); do wc -l <"$WORK/in/$f"; done | tr '\n' ' ')
[ "$counts" = "100 100 50 70 " ] || fail "lines a file in name order: $counts (want 100 100 50 70)"
[ -z "$(ls -A "$WORK/in" | grep '^\.')" ] || fail "a dot file stayed: $(ls -A "$WORK/in")"
cmp -s <(cat "$WORK"/in/*) "$WORK/train.libsvm" || fail "the files in name order are not the input"
"$TFX_NODE" spool </dev/null 2>"$WORK/noout.log" && fail "spool without --out succeeded"
grep -q "spool needs --out DIR" "$WORK/noout.log" || fail "no --out: $(cat "$WORK/noout.log")"
experiment "$WORK/exp.json" model.input_shape='[1048576]' \
  model.layers='[{"type": "embedding_bag", "units": 4, "combiner": "sum"}]' model.loss='"softmax_cross_entropy"' \
  data.format='"libsvm"' data.train.follow="\"$WORK/in\"" data.eval.images="\"$WORK/test.libsvm\"" data.scale=1 \
  optimizer.name='"adagrad"' training.batch_size=16 training.report_every=4 eval.every_steps=0 \
  checkpoint.every_steps=1000
seen() { local v; v=$(metric "$WORK/run/metrics.jsonl" train examples_seen 2>/dev/null); [ "${v:-none}" = none ] && v=0; echo "${v%.*}"; }
all_seen() { [ "$(seen)" -ge 320 ]; }
setsid "$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$WORK/run" --ps 1 --workers 1 >"$WORK/local.log" 2>&1 &
lp=$!
PIDS+=("$lp")
wait_for 240 all_seen || fail "examples_seen $(seen) of 320 spooled rows"
kill -INT -- -"$lp"
wait_exit 120 "$lp" || fail "Ctrl-C did not stop the following cluster"
pass "2 spools: 4 files (100 100 50 70 lines) in input order; a following run trained on all $(seen) rows"
