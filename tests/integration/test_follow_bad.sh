#!/bin/bash
# data.on_error (#28): a followed directory in which one file has a line that does not parse (line 7) and a label
# outside the classes (record 20). With data.on_error skip the local cluster (1 ps, 2 workers) trains on, each bad
# record named by file and line or record in a DATA-BAD-RECORD warning and counted once (bad_records in the train
# records, tfx_bad_records_total on /metrics, which also shows the workers' rolling AUC and log loss); every other
# row is trained on; the chief's merged rolling records (kind rolling) cover the union of the workers' windows. With stop (the default) the run fails, naming the file and line.
. "$(dirname "$0")/lib.sh"
mkdir -p "$WORK/parts" "$WORK/in" "$WORK/in2"
python3 - "$WORK/parts" <<'PY'
import random, sys
random.seed(5)
for f in range(3):
    with open(f"{sys.argv[1]}/part-{f}.libsvm", "w") as out:
        for r in range(80):
            label = random.randrange(2)
            ids = sorted(set(random.sample(range(1, 200), 4) + [300 + label]))
            line = f"{label} " + " ".join(f"{i}:1" for i in ids)
            if f == 1 and r == 6: line = "1 5:1 oops"
            if f == 1 and r == 19: line = "7 " + line.split(" ", 1)[1]
            out.write(line + "\n")
PY
cat >"$WORK/follow.json" <<JSON
{"name": "follow-bad", "model": {"input_shape": [400], "loss": "softmax_cross_entropy",
  "layers": [{"type": "embedding_bag", "units": 2, "combiner": "sum"}]},
 "data": {"format": "libsvm", "train": {"follow": "$WORK/in"}, "eval": {"images": "$WORK/parts/part-0.libsvm"},
  "scale": 1, "on_error": "skip"},
 "optimizer": {"name": "adagrad", "learning_rate": 0.1},
 "checkpoint": {"every_steps": 1000, "keep_max": 2},
 "training": {"mode": "sync", "batch_size": 8, "report_every": 5, "seed": 1, "progressive_window": 100},
 "eval": {"every_steps": 0}}
JSON
# last FIELD: the sum over workers of their last FIELD in the train records (-1: none yet).
last() { python3 "$PYLIB/train_sum.py" "$WORK/run/metrics.jsonl" "$1"; }
setsid "$TFX_NODE" local --config "$WORK/follow.json" --run-dir "$WORK/run" --ps 1 --workers 2 >"$WORK/local.log" 2>&1 &
lp=$!
PIDS+=("$lp")
for f in 0 1 2; do cp "$WORK/parts/part-$f.libsvm" "$WORK/in/.p.tmp" && mv "$WORK/in/.p.tmp" "$WORK/in/part-$f.libsvm"; done
near() { [ "$(last examples_seen)" -ge $((238 - 2 * 8)) ] && [ "$(last bad_records)" -ge 2 ]; }
wait_for 240 near || fail "examples_seen $(last examples_seen), bad_records $(last bad_records) of 238 rows, 2 bad"
url=$(grep -o 'http://127.0.0.1:[0-9]*' "$WORK/local.log" | head -1)
curl -sf "$url/metrics" >"$WORK/metrics.txt" || fail "no /metrics at '$url'"
kill -INT -- -"$lp"
wait_exit 120 "$lp" || fail "Ctrl-C did not stop the following cluster"
[ "$(last bad_records)" = 2 ] || fail "bad_records $(last bad_records), want 2 (each counted once)"
grep -q "DATA-BAD-RECORD .*part-1.libsvm: line 7.*skipped" "$WORK"/run/logs/worker-*.log || fail "line 7 not named"
grep -q "DATA-BAD-RECORD .*part-1.libsvm: record 19: label 7 is outside" "$WORK"/run/logs/worker-*.log ||
  fail "the bad label not named: $(grep -h DATA-BAD "$WORK"/run/logs/worker-*.log)"
grep -q '^tfx_bad_records_total{role="master",index="0"} 2$' "$WORK/metrics.txt" ||
  fail "/metrics: $(grep bad_records "$WORK/metrics.txt")"
grep -qE '^tfx_rolling_auc\{role="master",index="0"\} 0\.[0-9]+' "$WORK/metrics.txt" ||
  fail "/metrics: no rolling AUC: $(grep rolling "$WORK/metrics.txt")"
# the chief's merged rolling records: each over the union of the workers' last windows (of up to 100 examples)
python3 - "$WORK/run/metrics.jsonl" >"$WORK/merged.txt" <<'PY' || fail "merged rolling records: $(cat "$WORK/merged.txt")"
import json, sys
last, merged = {}, []
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("kind") == "train" and "rolling_examples" in r: last[r["worker"]] = r
    if r.get("kind") == "rolling":
        n = sum(w["rolling_examples"] for w in last.values())
        ll = sum(w["rolling_examples"] * w["rolling_log_loss"] for w in last.values()) / n
        assert r["workers"] == len(last) and r["rolling_examples"] == n, (r, n)
        assert abs(r["rolling_log_loss"] - ll) < 1e-6 * max(1, ll), (r, ll)
        assert 0 <= r["rolling_auc"] <= 1, r
        merged.append(r)
assert len(merged) >= 2 and merged[-1]["rolling_examples"] > 100 and merged[-1]["workers"] == 2, merged[-3:]
print(len(merged), "merged records; the last", merged[-1])
PY
grep -qE '^tfx_rolling_examples\{role="master",index="0"\} (1[0-9][0-9]|200)$' "$WORK/metrics.txt" ||
  fail "/metrics: the merged window is not over both workers' (of 100 examples each): $(grep rolling "$WORK/metrics.txt")"
# stop (the default): the run fails naming the file and line
cp "$WORK/parts/part-1.libsvm" "$WORK/in2/part-1.libsvm"
sed -e "s|$WORK/in\"|$WORK/in2\"|" -e 's/"on_error": "skip"/"on_error": "stop"/' "$WORK/follow.json" >"$WORK/stop.json"
timeout 300 "$TFX_NODE" local --config "$WORK/stop.json" --run-dir "$WORK/run-stop" --ps 1 --workers 1 \
  >"$WORK/stop.log" 2>&1 && fail "the run went on past a bad record with data.on_error stop"
grep -rq "part-1.libsvm: line 7" "$WORK/stop.log" "$WORK"/run-stop/logs/ || fail "stop: the bad line not named: $(tail -3 "$WORK/stop.log")"
pass "on_error skip: 2 bad records named and counted once, $(last examples_seen) of 238 rows trained; $(cut -d' ' -f1-2 "$WORK/merged.txt") merged rolling; stop fails naming part-1.libsvm line 7"
