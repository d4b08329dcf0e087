#!/bin/bash
# The experiment index: the master of a local run registers it in ROOT/tfx-runs.sqlite (read back here with
# Python's own sqlite3 module: status, config hash, the whole metrics series); `tfx-node runs` lists, filters
# (--where) and compares (--compare) runs, including one the index never saw (a single-process `train`);
# a --where that is not "metric op number" is refused; a run whose index is locked still trains, and a
# corrupt index only costs a warning (the table comes from metrics.jsonl) until --rebuild recreates it.
. "$(dirname "$0")/lib.sh"
root=$WORK/runs
small_mlp "$WORK/a.json" training.max_steps=300 eval.every_steps=100 training.report_every=50
small_mlp "$WORK/b.json" training.max_steps=200 eval.every_steps=100 training.report_every=50 optimizer.learning_rate=0.01
"$TFX_NODE" local --config "$WORK/a.json" --run-dir "$root/r1" >"$WORK/r1.log" 2>&1 || fail "local r1: $(tail -1 "$WORK/r1.log")"
python3 - "$root/tfx-runs.sqlite" "$root/r1/metrics.jsonl" <<'PY' || fail "the index does not hold r1 as metrics.jsonl has it"
import json, re, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
status, hash_, start, end, step = db.execute(
    "SELECT status, config_hash, start_time, end_time, last_step FROM runs WHERE id = 'r1'").fetchone()
assert status == "finished" and re.fullmatch("[0-9a-f]{8}", hash_) and end > start and step == 300, (status, hash_, step)
want = []
for line in open(sys.argv[2]):
    rec = json.loads(line)
    want += [(rec["kind"], rec["step"], k, v) for k, v in rec.items()
             if k not in ("kind", "step", "time") and isinstance(v, (int, float))]
got = db.execute("SELECT kind, step, name, value FROM series WHERE run = 'r1' ORDER BY rowid").fetchall()
assert len(got) == len(want) > 10, (len(got), len(want))
for g, w in zip(got, want):
    assert g[:3] == w[:3] and abs(g[3] - w[3]) <= 1e-6 * max(1, abs(w[3])), (g, w)
PY
"$TFX_NODE" train --config "$WORK/b.json" --run-dir "$root/r2" >"$WORK/r2.log" 2>&1 || fail "train r2: $(tail -1 "$WORK/r2.log")"

"$TFX_NODE" runs --root "$root" >"$WORK/list.txt" 2>&1 || fail "runs: $(cat "$WORK/list.txt")"
grep -q "^r1 *finished *300 " "$WORK/list.txt" || fail "runs does not list r1 as finished: $(cat "$WORK/list.txt")"
grep -q "^r2 *finished *200 " "$WORK/list.txt" || fail "runs does not list r2 (from its metrics.jsonl): $(cat "$WORK/list.txt")"
grep -q "^2 of 2 run(s)" "$WORK/list.txt" || fail "runs count: $(cat "$WORK/list.txt")"
"$TFX_NODE" runs --root "$root" --where 'step>250' | grep -q "^1 of 2" || fail "--where step>250"
# The filter on the last eval accuracy agrees with the files.
acc1=$(metric "$root/r1/metrics.jsonl" eval accuracy); acc2=$(metric "$root/r2/metrics.jsonl" eval accuracy)
want=$(python3 -c "print(sum(a >= $acc1 for a in ($acc1, $acc2)))")
"$TFX_NODE" runs --root "$root" --where "accuracy>=$acc1" >"$WORK/where.txt" || fail "--where accuracy"
grep -q "^$want of 2" "$WORK/where.txt" && grep -q "^r1 " "$WORK/where.txt" || fail "--where accuracy>=$acc1: $(cat "$WORK/where.txt")"
"$TFX_NODE" runs --root "$root" --compare r1 r2 >"$WORK/compare.txt" || fail "--compare"
grep -q "^eval.accuracy .*$(python3 -c "print('%.6g' % $acc1)") .*$(python3 -c "print('%.6g' % $acc2)")" "$WORK/compare.txt" &&
  grep -q "^config optimizer.learning_rate .*0.001 .*0.01" "$WORK/compare.txt" || fail "--compare: $(cat "$WORK/compare.txt")"
# Not "metric op number": refused before any SQL, and the index is intact.
"$TFX_NODE" runs --root "$root" --where "accuracy>0.5'; DROP TABLE runs; --" >"$WORK/bad.txt" 2>&1
[ $? = 2 ] && grep -q "expected ',' or 'and' at offset 12" "$WORK/bad.txt" || fail "bad --where: $(cat "$WORK/bad.txt")"

# A locked index: the run trains anyway and says so; runs lists from the files.
python3 - "$root/tfx-runs.sqlite" "$WORK/unlock" <<'PY' &
import os, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
open(sys.argv[2] + ".held", "w").close()
deadline = time.time() + 300
while not os.path.exists(sys.argv[2]) and time.time() < deadline: time.sleep(0.1)
db.execute("ROLLBACK")
PY
PIDS+=($!)
for _ in $(seq 1 100); do [ -f "$WORK/unlock.held" ] && break; sleep 0.1; done
[ -f "$WORK/unlock.held" ] || fail "could not lock the index"
small_mlp "$WORK/c.json" training.max_steps=100 eval.every_steps=100 training.report_every=50
"$TFX_NODE" local --config "$WORK/c.json" --run-dir "$root/r3" >"$WORK/r3.log" 2>&1 || fail "local r3 with a locked index: $(tail -1 "$WORK/r3.log")"
grep -q "MASTER-INDEX.*locked by another process" "$root/r3/logs/master-0.log" || fail "r3: no warning about the locked index"
"$TFX_NODE" runs --root "$root" >"$WORK/locked.txt" 2>&1 || fail "runs with a locked index: $(cat "$WORK/locked.txt")"
grep -q "RUNS-INDEX.*locked" "$WORK/locked.txt" && grep -q "^r3 *finished *100 " "$WORK/locked.txt" || fail "runs, locked: $(cat "$WORK/locked.txt")"
touch "$WORK/unlock"; wait "${PIDS[-1]}"

# A corrupt index: a warning and the same table; --rebuild recreates it.
head -c 4096 /dev/urandom >"$root/tfx-runs.sqlite"
"$TFX_NODE" runs --root "$root" >"$WORK/corrupt.txt" 2>&1 || fail "runs with a corrupt index: $(cat "$WORK/corrupt.txt")"
grep -q "RUNS-INDEX.*--rebuild" "$WORK/corrupt.txt" && grep -q "^3 of 3 run(s)" "$WORK/corrupt.txt" || fail "corrupt: $(cat "$WORK/corrupt.txt")"
"$TFX_NODE" runs --root "$root" --rebuild >"$WORK/rebuilt.txt" 2>&1 || fail "--rebuild: $(cat "$WORK/rebuilt.txt")"
! grep -q "WARN" "$WORK/rebuilt.txt" && grep -q "^3 of 3 run(s)" "$WORK/rebuilt.txt" || fail "--rebuild: $(cat "$WORK/rebuilt.txt")"
python3 -c "import sqlite3, sys; n = sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM runs').fetchone()[0]; sys.exit(n != 3)" \
  "$root/tfx-runs.sqlite" || fail "the rebuilt index does not hold 3 runs"
# The table a person reads: a local run started today (wall clock, not a monotonic clock from 1970), took
# seconds (not decades), names its newest checkpoint, and a run cut short by --max-steps (local or train) is
# finished at that step, not incomplete.
"$TFX_NODE" local --config "$WORK/c.json" --run-dir "$root/r4" --max-steps 120 >"$WORK/r4.log" 2>&1 || fail "r4: $(tail -1 "$WORK/r4.log")"
"$TFX_NODE" train --config "$WORK/c.json" --run-dir "$root/r5" --max-steps 120 >"$WORK/r5.log" 2>&1 || fail "r5: $(tail -1 "$WORK/r5.log")"
(cd / && "$TFX_NODE" runs --root "$root") >"$WORK/table.txt" 2>&1 || fail "runs: $(cat "$WORK/table.txt")"
today=$(date +%Y-%m-%d)
for r in r4 r5; do
  row=$(grep "^$r " "$WORK/table.txt")
  echo "$row" | grep -q "^$r *finished *120 " || fail "$r cut short by --max-steps is not finished at 120: $row"
  echo "$row" | awk -v d="$today" '{ exit !($6 < 3600 && $7 == 120 && $9 == d) }' ||
    fail "$r: seconds, ckpt or start date wrong (want < 3600 s, ckpt 120, started $today): $row"
done
pass "index registration, runs --where/--compare, refused --where, locked and corrupt index, start time, ckpt and --max-steps runs"
