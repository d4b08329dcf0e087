#!/bin/bash
# data.train.follow (#28): a local sync cluster (2 ps, 2 workers) follows a directory with no epochs or max_steps.
# Files land by rename (a '.' name while written); the cluster trains on each once, spread over the workers, until
# Ctrl-C, which takes a final checkpoint; a restart reads on from there: only the new files are trained on, and the
# workers' examples_seen (across restarts) add up to the rows landed. The table is capped (max_rows: 400 rows a ps of 5000 ids) and the
# checkpoints are incremental, so the restart also restores a chain of deltas: its rows, checked value for value
# (after_part-3a).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/follow_setup.sh"
CAP=400 # follow.json's max_rows
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
    ! declare -F "after_$f" >/dev/null || "after_$f"
  done
  kill -INT -- -"$lp"
  wait_exit 120 "$lp" || fail "Ctrl-C did not stop the following cluster"
}
# after_part-3a: the values restored. part-3a (part-3's first 32 rows) trained after the restart, the newest
# checkpoint (the first after a restore is full) holds the restored rows but those the steps since touched or
# evicted: each of its rows whose id neither part-3a nor part-2 names (the restarted workers train part-2's last
# partial batch again) must be in the checkpoint before the restart with the same values and Adagrad slots: a
# restore of the chain's base alone differs where a delta changed a row, and a row dropped there and brought back
# is found unless the steps since evicted it again.
after_part-3a() {
  local c
  past_s1() { c=$(newest_ckpt "$WORK/run") && [ "$((10#${c##*-}))" -gt "$S1" ]; }
  wait_for 120 past_s1 || fail "no checkpoint after the restart's first step (S1 $S1): $(ls "$WORK/run/checkpoints")"
  ckpt_digest "$c" --rows >"$WORK/rows-after.txt"
  python3 - "$WORK/rows-before.txt" "$WORK/rows-after.txt" "$WORK"/parts/part-{2,3a}.libsvm <<'PY' || fail "restore: $(tail -1 "$WORK/restore.txt")"
import sys
before = {tuple(l.split()[:2]): l.split()[2] for l in open(sys.argv[1])}
after = [l.split() for l in open(sys.argv[2])]
named = {int(t.split(":")[0]) + d for f in sys.argv[3:] for l in open(f) for t in l.split()[1:] for d in (-1, 0)}
kept = [(v, i, h) for v, i, h in after if int(i) not in named]
back = [r for r in kept if (r[0], r[1]) not in before]
changed = [r for r in kept if (r[0], r[1]) in before and before[(r[0], r[1])] != r[2]]
out = open(sys.argv[2].replace("rows-after", "restore"), "w")
print(f"{len(kept)} rows restored and not trained since, {len(back)} not in the checkpoint restored (evicted rows "
      f"brought back?), {len(changed)} with other values: {(back + changed)[:3]}", file=out)
sys.exit(1 if back or changed or len(kept) < 50 else 0)
PY
  echo "restore: $(cat "$WORK/restore.txt")"
}
landed=0
follow part-0 part-1 part-2
has_ckpt "$WORK/run" || fail "no checkpoint after Ctrl-C"
S1=$(newest_ckpt "$WORK/run") && ckpt_digest "$S1" --rows >"$WORK/rows-before.txt"
S1=$((10#${S1##*-}))
s1=$(seen)
grep -q '"examples_seen"' "$WORK/run/metrics.jsonl" || fail "train records carry no examples_seen"
head -32 "$WORK/parts/part-3.libsvm" >"$WORK/parts/part-3a.libsvm"
tail -n +33 "$WORK/parts/part-3.libsvm" >"$WORK/parts/part-3b.libsvm"
follow part-3a part-3b part-4 part-5
s2=$(seen)
[ "$s2" -le 816 ] || fail "after the restart examples_seen is $s2 of 816 rows: a file was trained on twice"
grep -q "PS-RESTORE-ROWS" "$WORK"/run/logs/ps-*.log || fail "the restart restored no rows"
grep -q "checkpoint delta" "$WORK"/run/logs/ps-*.log || fail "no incremental checkpoint was written"
rows=$(grep -ho "PS-TABLE table [^ ]* at step [0-9]*: [0-9]* rows" "$WORK"/run/logs/ps-*.log | awk '{print $(NF-1)}' | sort -n | tail -1)
[ "$rows" -le $CAP ] || fail "a ps held $rows rows of a table capped at $CAP"
# tfx-node plan states the memory the cap implies, the same row size the ps states when it makes the table
"$TFX_NODE" plan --config "$WORK/follow.json" --ps 2 >"$WORK/plan.txt" 2>&1 || fail "plan: $(tail -1 "$WORK/plan.txt")"
row=$(grep -ho "PS-TABLE-CAP table embedding_bag_1/embeddings: max_rows $CAP (about [0-9.]* MiB of rows at [0-9]* bytes" \
  "$WORK"/run/logs/ps-0.log | head -1 | awk '{print $(NF-1)}')
[ -n "$row" ] || fail "no PS-TABLE-CAP line in the ps log"
grep -q "embedding_bag_1/embeddings  *max_rows $CAP x $row bytes a row = .* MiB a ps at most" "$WORK/plan.txt" ||
  fail "plan does not state the cap of $CAP rows x $row bytes: $(cat "$WORK/plan.txt")"
pass "followed: $s1 then $s2 examples of 336 and 816 rows landed, each file once across a Ctrl-C; <= $CAP rows a ps"
