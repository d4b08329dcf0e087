#!/bin/bash
# A followed directory others can write into (data.on_error skip): a symbolic link to a file outside it is never
# read (none of that file's lines reaches a log); a file whose name holds a newline is read, its name escaped in
# every log line (no line is forged); a file landing late is named by its name (DATA-FOLLOW-LATE); `rm -rf DIR; mkdir DIR` is
# waited for (DATA-FOLLOW-GONE), not a stop: the files landing in the new directory are trained on and Ctrl-C then
# stops the run with exit 0.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/follow_setup.sh"
python3 - "$WORK/follow.json" <<'PY'
import json, sys
exp = json.load(open(sys.argv[1]))
exp["data"]["on_error"] = "skip"
json.dump(exp, open(sys.argv[1], "w"))
PY
for i in $(seq 1 50); do echo "SECRET-ROW-$i root:x:0:0:secret"; done >"$WORK/secret"
setsid "$TFX_NODE" local --config "$WORK/follow.json" --run-dir "$WORK/run" >"$WORK/local.log" 2>&1 &
lp=$!
PIDS+=("$lp")
land part-0
ln -s "$WORK/secret" "$WORK/in/part-1.libsvm"
forged=$'part-3\nFORGED-LINE.libsvm'
cp "$WORK/parts/part-3.libsvm" "$WORK/in/.f.tmp" && mv "$WORK/in/.f.tmp" "$WORK/in/$forged"
landed=$((96 + 144))
wait_for 240 near "$landed" || fail "examples_seen $(seen), rows landed $landed"
! grep -rq "SECRET-ROW" "$WORK/run" "$WORK/local.log" || fail "a line of the linked file reached a log"
! grep -rqa "^FORGED-LINE" "$WORK/run/logs" || fail "a file name forged a log line"
grep -q 'part-3\\x0aFORGED-LINE' "$WORK"/run/logs/worker-*.log || fail "the newline of the name was not escaped"
# A file landing late (sorting before the last one taken) is never read, and said so.
cp "$WORK/parts/part-1.libsvm" "$WORK/in/.l.tmp" && mv "$WORK/in/.l.tmp" "$WORK/in/part-0a.libsvm"
wait_for 60 grep -q "DATA-FOLLOW-LATE .*/in/part-0a.libsvm landed after 'part-3" "$WORK"/run/logs/worker-0.log ||
  fail "no DATA-FOLLOW-LATE for a file that landed late: $(grep -h DATA-FOLLOW "$WORK"/run/logs/worker-0.log | tail -3)"
rm -rf "$WORK/in"
wait_for 60 grep -q DATA-FOLLOW-GONE "$WORK"/run/logs/worker-0.log ||
  fail "no DATA-FOLLOW-GONE once the directory was removed"
kill -0 "$lp" 2>/dev/null || fail "the run ended when its directory was removed: $(tail -3 "$WORK/local.log")"
mkdir "$WORK/in"
land part-4
landed=$((landed + 160))
wait_for 240 near "$landed" || fail "examples_seen $(seen), rows landed $landed, after the directory came back"
kill -INT -- -"$lp"
wait_exit 120 "$lp" || fail "Ctrl-C did not stop the following cluster: exit $?"
[ "$(grep -c MASTER-SIGNAL "$WORK/run/logs/master-0.log")" = 1 ] ||
  fail "MASTER-SIGNAL before the Ctrl-C: $(grep MASTER-SIGNAL "$WORK/run/logs/master-0.log")"
pass "a link out of the followed directory was not read, a newline in a name was escaped, and the directory removed and made again was waited for ($(seen) of $landed rows trained on)"
