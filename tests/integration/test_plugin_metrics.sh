#!/bin/bash
# Metrics of a plugin's own (include/tfx/plugin.h's tfx_plugin_metrics; tests/integration/metrics_plugin.c):
# seen (sum: the examples), label0_frac (mean: the fraction with label 0) and max_label (the plugin's own merge:
# the largest label), each checked exactly against the data read here independently. `tfx-node train` writes them
# into its train, eval and validation records and the TensorBoard events; a `local` cluster computes them on the
# workers (each report's window; each worker's slice of the eval set, eval.distributed) and the chief merges
# them into metrics.jsonl and /metrics. A table with a state too large or a missing callback is refused naming
# the metric (exit 2); a NaN value is logged naming it and left out of the record, the run going on. `tfx-node
# evaluate` records them too.
. "$(dirname "$0")/lib.sh"
PLUG=${TFX_METRICS_PLUGIN:-$(dirname "$TFX_NODE")/tests/integration/libtfx_test_metrics0.so}
[ -f "$PLUG" ] || skip "no test plugin at $PLUG (built by CMake with the tests)"
D=/usr/share/datasets/fashion-mnist
[ -f "$D/t10k-labels-idx1-ubyte.gz" ] || skip "no Fashion-MNIST at $D"
EX=$SRC/examples/fashion_mnist_plugin.json
# The eval labels' exact figures: examples, the fraction of label 0, the largest label; the same for the first 1000.
read -r N FRAC MAX N1K FRAC1K MAX1K < <(python3 - "$D/t10k-labels-idx1-ubyte.gz" <<'PY'
import gzip, sys
y = gzip.open(sys.argv[1]).read()[8:]
print(len(y), y.count(0) / len(y), max(y), 1000, y[:1000].count(0) / 1000, max(y[:1000]))
PY
)
# check RUN KIND: every KIND record has seen, label0_frac and max_label as the data says (eval: the whole set).
check_eval() {
  python3 - "$1/metrics.jsonl" "$2" "$3" "$4" "$5" <<'PY'
import json, sys
path, kind, n, frac, mx = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
recs = [json.loads(l) for l in open(path) if json.loads(l)["kind"] == kind]
assert recs, "no %s record" % kind
for r in recs:
    assert r["seen"] == n and abs(r["label0_frac"] - frac) < 1e-9 and r["max_label"] == mx, (r, n, frac, mx)
PY
}
# check_train RUN BATCH: each train record's seen is its window's examples; per worker they add up to examples_seen.
check_train() {
  python3 - "$1/metrics.jsonl" "$2" "$3" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["kind"] == "train"]
batch, every = int(sys.argv[2]), int(sys.argv[3])
assert recs and all("seen" in r and "label0_frac" in r and r["max_label"] <= 9 for r in recs), recs[:2]
assert all(r["seen"] % batch == 0 and 0 < r["seen"] <= batch * every for r in recs), [r["seen"] for r in recs]
for w in {r.get("worker", 0) for r in recs}:
    mine = [r for r in recs if r.get("worker", 0) == w]
    last = mine[-1].get("examples_seen", mine[-1]["step"] * batch)
    assert sum(r["seen"] for r in mine) == last, (w, [r["seen"] for r in mine], last)
PY
}
val="[{\"name\": \"head\", \"images\": \"$D/t10k-images-idx3-ubyte.gz\", \"labels\": \"$D/t10k-labels-idx1-ubyte.gz\", \"batches\": 1}]"
"$TFX_NODE" train --config "$EX" --run-dir "$WORK/train" --set model.plugin="\"$PLUG\"" --set training.max_steps=50 \
  --set training.report_every=20 --set training.batch_size=32 --set eval.every_steps=0 --set "validation=$val" \
  >"$WORK/train.log" 2>&1 || fail "train: $(tail -2 "$WORK/train.log")"
check_eval "$WORK/train" eval "$N" "$FRAC" "$MAX" || fail "train: eval records"
check_eval "$WORK/train" validation.head "$N1K" "$FRAC1K" "$MAX1K" || fail "train: validation records (first 1000)"
check_train "$WORK/train" 32 20 || fail "train: train records"
"$TFX_NODE" evaluate --run-dir "$WORK/train" >"$WORK/evaluate.log" 2>&1 || fail "evaluate: $(tail -2 "$WORK/evaluate.log")"
[ "$(grep -c '"kind": "eval"' "$WORK/train/metrics.jsonl")" = 2 ] && check_eval "$WORK/train" eval "$N" "$FRAC" "$MAX" ||
  fail "evaluate: its eval record"
PYTHONPATH=$(dirname "$0") python3 - "$(ls "$WORK"/train/events.out.tfevents.* | head -1)" "$N" <<'PY' || fail "events lack the plugin's metrics"
import struct, sys
from tfevents import record, fields
data = open(sys.argv[1], "rb").read(); i = 0; tags = {}
while i < len(data):
    payload, i = record(data, i)
    for f, v in fields(payload):
        if f == 5:
            for sf, sv in fields(v):
                kv = dict(fields(sv))
                tags[kv[1].decode()] = struct.unpack("<f", kv[2])[0]
assert tags.get("eval/seen") == int(sys.argv[2]) and tags.get("train/seen") == 320 and "train/max_label" in tags, tags
PY

# A cluster: the workers' windows and eval slices, merged by the chief; /metrics while it runs. The eval set is the
# test set reordered so that every label 9 is in the second half (worker 1's slice): max_label is 9 only when the
# chief merges worker 0's slice (largest 8) with the plugin's own maximum, not when it keeps worker 0's state.
python3 - "$D" "$WORK" <<'PY'
import gzip, sys
d, out = sys.argv[1], sys.argv[2]
img, lab = gzip.open(f"{d}/t10k-images-idx3-ubyte.gz").read(), gzip.open(f"{d}/t10k-labels-idx1-ubyte.gz").read()
order = sorted(range(len(lab) - 8), key=lambda i: lab[8 + i] == 9)
gzip.open(f"{out}/eval-images.gz", "wb").write(img[:16] + b"".join(img[16 + i * 784:16 + (i + 1) * 784] for i in order))
gzip.open(f"{out}/eval-labels.gz", "wb").write(lab[:8] + bytes(lab[8 + i] for i in order))
assert max(lab[8 + i] for i in order[:len(order) // 2]) == 8
PY
hp=$(free_port)
"$TFX_NODE" local --config "$EX" --run-dir "$WORK/run" --set model.plugin="\"$PLUG\"" --set training.max_steps=1000000 \
  --set data.eval.images="\"$WORK/eval-images.gz\"" --set data.eval.labels="\"$WORK/eval-labels.gz\"" \
  --set training.mode=async --set training.batch_size=32 --set training.report_every=20 --set eval.every_steps=200 \
  --set eval.distributed=true --set checkpoint.every_steps=0 --set observe.http_port="$hp" >"$WORK/local.log" 2>&1 &
PIDS+=($!)
scraped() {
  curl -sf "http://127.0.0.1:$hp/metrics" >"$WORK/metrics.txt" &&
    grep -q "^tfx_eval_metric{role=\"master\",index=\"0\",metric=\"seen\"} $N\$" "$WORK/metrics.txt" &&
    grep -q '^tfx_train_metric{role="master",index="0",metric="max_label"} [0-9]' "$WORK/metrics.txt"
}
wait_for 240 scraped || fail "/metrics never showed the plugin's metrics: $(grep -i metric "$WORK/metrics.txt" | tail -5)"
wait_for 120 grep -q "MASTER-EVAL.*by the workers" "$WORK/run/logs/master-0.log" || fail "no evaluation by the workers"
kill -TERM "${PIDS[0]}"
wait_exit 120 "${PIDS[0]}" >/dev/null
wait_for 5 grep -q '"kind": "eval"' "$WORK/run/metrics.jsonl" || fail "cluster: no eval record"
check_eval "$WORK/run" eval "$N" "$FRAC" "$MAX" || fail "cluster: eval records"
check_train "$WORK/run" 32 20 || fail "cluster: train records"
grep -q "PLUGIN-METRICS" "$WORK/run/logs/worker-0.log" || fail "worker 0 did not load the plugin's metrics"

# Bad tables are refused by name; a NaN value is logged and left out.
dir=$(dirname "$PLUG")
refused() { # refused LIB EXPECTED
  out=$("$TFX_NODE" model --config "$EX" --set model.plugin="\"$dir/$1\"" 2>&1); rc=$?
  [ "$rc" = 2 ] && echo "$out" | grep -qF "$2" || fail "$1: exit $rc: $out"
}
refused libtfx_test_metrics1.so "metric 1 'label0_frac' state_size is not 1 .. TFX_METRIC_STATE_MAX doubles"
refused libtfx_test_metrics2.so "metric 0 'seen' has no update callback"
"$TFX_NODE" train --config "$EX" --run-dir "$WORK/nan" --set model.plugin="\"$dir/libtfx_test_metrics3.so\"" \
  --set training.max_steps=10 --set training.report_every=5 --set eval.every_steps=0 >"$WORK/nan.log" 2>&1 ||
  fail "NaN metric: the run failed: $(tail -2 "$WORK/nan.log")"
grep -q "PLUGIN-METRIC .*max_label is not finite" "$WORK/nan.log" || fail "NaN metric not logged by name"
[ "$(metric "$WORK/nan/metrics.jsonl" eval max_label)" = none ] && [ "$(metric "$WORK/nan/metrics.jsonl" eval seen)" = "$N" ] ||
  fail "NaN metric: $(tail -1 "$WORK/nan/metrics.jsonl")"
pass "plugin metrics exact in train/eval/validation records, events, a cluster's merged records and /metrics; bad tables refused"
