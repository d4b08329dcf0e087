#!/bin/bash
# data.train.follow (#28): a local sync cluster (2 ps, 2 workers) follows a directory with no epochs or max_steps.
# Files land by rename (a '.' name while written); the cluster trains on each once, spread over the workers, until
# Ctrl-C, which takes a final checkpoint; a restart reads on from there: only the new files are trained on, and the
# workers' examples_seen (across restarts) add up to the rows landed. The table is capped (max_rows: 400 rows a ps of 5000 ids) and the
# checkpoints are incremental, so the restart also restores a chain of deltas.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/follow_setup.sh"
# follow FILE...: starts the cluster, lands the files one by one, each once the workers' examples_seen reach the
# rows landed so far (they report while the stream is dry), then Ctrl-C's the process group and waits for the exit.
follow() {
  setsid "$TFX_NODE" local --config "$WORK/follow.json" --run-dir "$WORK/run" >>"$WORK/local.log" 2>&1 &
  local lp=$! f
  PIDS+=("$lp")
  for f in "$@"; do
    land "$f"
    landed=$((landed + $(wc -l <"$WORK/parts/$f.libsvm")))
    wait_for 240 near "$landed" || fail "examples_seen $(seen), rows landed $landed"
    wait_for 60 checkpointed || fail "no checkpoint of the dry stream's step (every_secs 1): $(ls "$WORK/run/checkpoints")"
  done
  kill -INT -- -"$lp"
  wait_exit 120 "$lp" || fail "Ctrl-C did not stop the following cluster"
}
landed=0
follow part-0 part-1 part-2
has_ckpt "$WORK/run" || fail "no checkpoint after Ctrl-C"
s1=$(seen)
grep -q '"examples_seen"' "$WORK/run/metrics.jsonl" || fail "train records carry no examples_seen"
follow part-3 part-4 part-5
s2=$(seen)
[ "$s2" -le 816 ] || fail "after the restart examples_seen is $s2 of 816 rows: a file was trained on twice"
grep -q "PS-RESTORE-ROWS" "$WORK"/run/logs/ps-*.log || fail "the restart restored no rows"
grep -q "checkpoint delta" "$WORK"/run/logs/ps-*.log || fail "no incremental checkpoint was written"
rows=$(grep -ho "PS-TABLE table [^ ]* at step [0-9]*: [0-9]* rows" "$WORK"/run/logs/ps-*.log | awk '{print $(NF-1)}' | sort -n | tail -1)
[ "$rows" -le 400 ] || fail "a ps held $rows rows of a table capped at 400"
# tfx-node plan states the memory the cap implies, the same row size the ps states when it makes the table
"$TFX_NODE" plan --config "$WORK/follow.json" --ps 2 >"$WORK/plan.txt" 2>&1 || fail "plan: $(tail -1 "$WORK/plan.txt")"
row=$(grep -ho "PS-TABLE-CAP table embedding_bag_1/embeddings: max_rows 400 (about [0-9.]* MiB of rows at [0-9]* bytes" \
  "$WORK"/run/logs/ps-0.log | head -1 | awk '{print $(NF-1)}')
[ -n "$row" ] || fail "no PS-TABLE-CAP line in the ps log"
grep -q "embedding_bag_1/embeddings  *max_rows 400 x $row bytes a row = .* MiB a ps at most" "$WORK/plan.txt" ||
  fail "plan does not state the cap of 400 rows x $row bytes: $(cat "$WORK/plan.txt")"
pass "followed: $s1 then $s2 examples of 336 and 816 rows landed, each file once across a Ctrl-C; <= 400 rows a ps"
