#!/bin/bash
# Every role serves /metrics when given --http-port: here a chief, a ps and a worker started from TF_CONFIG.
# The worker's push and pull latency histograms pass promtool, their buckets are cumulative and end in +Inf =
# _count, and its byte counters equal the model's size times the pushes and pulls it counted (all labelled
# role="worker",index="0"); the ps shows its applied pushes; every process exits cleanly (sanitizers).
. "$(dirname "$0")/lib.sh"
small_mlp "$WORK/exp.json" training.max_steps=1000 eval.every_steps=500 training.report_every=50
c0=$(free_port); p0=$(free_port); w0=$(free_port)
cp=$(free_port); pp=$(free_port); wp=$(free_port)
cluster="\"cluster\":{\"chief\":[\"127.0.0.1:$c0\"],\"ps\":[\"127.0.0.1:$p0\"],\"worker\":[\"127.0.0.1:$w0\"]}"
start() { # start NAME TYPE ARGS...
  local name=$1 type=$2; shift 2
  TF_CONFIG="{$cluster,\"task\":{\"type\":\"$type\",\"index\":0}}" "$TFX_NODE" --run-dir "$WORK/run" "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
}
start chief chief --config "$WORK/exp.json" --http-port "$cp"
start ps ps --http-port "$pp"
start worker worker --http-port "$wp"
count='^tfx_push_latency_seconds_count{role="worker",index="0"} \([2-9][0-9]\|[0-9]\{3,\}\)$'
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$wp/metrics" >"$WORK/worker.txt" && grep -q "$count" "$WORK/worker.txt" && break
  kill -0 "${PIDS[2]}" 2>/dev/null || fail "the worker exited before 20 pushes were seen"
  sleep 0.2
done
grep -q "$count" "$WORK/worker.txt" || fail "worker /metrics never counted 20 pushes: $(grep push_latency "$WORK/worker.txt")"
curl -sf "http://127.0.0.1:$pp/metrics" >"$WORK/ps.txt" || fail "ps /metrics"
curl -sf "http://127.0.0.1:$cp/metrics" >"$WORK/chief.txt" || fail "chief /metrics"
for f in worker ps chief; do promtool check metrics <"$WORK/$f.txt" || fail "promtool rejects the $f's /metrics"; done
grep -q '^tfx_ps_pushes_applied_total{role="ps",index="0"} [1-9]' "$WORK/ps.txt" || fail "ps /metrics: no pushes applied"
python3 - "$WORK/worker.txt" <<'PY' || fail "worker /metrics"
import re, sys
model_bytes = 4 * (784 * 64 + 64 + 64 * 10 + 10)  # small_mlp's variables, float32
vals, buckets = {}, {}
for line in open(sys.argv[1]):
    if line.startswith("#"): continue
    m = re.match(r'(\w+)\{role="worker",index="0"(?:,le="([^"]+)")?\} (\S+)$', line)
    assert m, line
    name, le, v = m.group(1), m.group(2), float(m.group(3))
    if le is None: vals[name] = v
    else: buckets.setdefault(name, []).append((float(le), v))
for h in ("tfx_push_latency_seconds", "tfx_pull_latency_seconds"):
    b = buckets[h + "_bucket"]
    assert [le for le, _ in b] == sorted(le for le, _ in b) and b[-1][0] == float("inf"), b
    assert all(x[1] <= y[1] for x, y in zip(b, b[1:])), ("not cumulative", b)
    assert b[-1][1] == vals[h + "_count"] >= 1 and vals[h + "_sum"] > 0, (h, b[-1], vals)
pushes, pulls = vals["tfx_push_latency_seconds_count"], vals["tfx_pull_latency_seconds_count"]
assert vals["tfx_bytes_sent_total"] == pushes * model_bytes, (vals["tfx_bytes_sent_total"], pushes)
assert vals["tfx_bytes_received_total"] == (pushes + pulls) * model_bytes, (vals["tfx_bytes_received_total"], pushes, pulls)
assert vals["tfx_worker_steps_total"] >= 1 and vals["tfx_global_step"] >= 1, vals
assert vals["tfx_rejected_frames_total"] == 0, vals
PY
curl -sf "http://127.0.0.1:$wp/status" | python3 -c "import json, sys; s = json.load(sys.stdin); assert s['role'] == 'worker' and s['state'] == 'training', s" ||
  fail "worker /status"
for i in 0 1 2; do wait "${PIDS[$i]}" || fail "process $i exited with $?"; done
pass "worker, ps and chief /metrics: latency histograms, byte counters, labels"
