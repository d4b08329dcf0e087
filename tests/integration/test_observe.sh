#!/bin/bash
# Watching a run: during `tfx-node local` the master serves /metrics (Prometheus text format: checked by
# promtool when installed, else by a strict parser here), /status (JSON with the cluster and the plan) and /
# (the live page); the run leaves a TensorBoard event file that an independent decoder (below, straight from
# the TFRecord and protobuf wire formats) reads back equal to metrics.jsonl; `tfx-node runs` lists the run.
. "$(dirname "$0")/lib.sh"
small_mlp "$WORK/exp.json" training.max_steps=1500 eval.every_steps=500 training.report_every=100
"$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$WORK/runs/r1" >"$WORK/local.log" 2>&1 &
PIDS+=($!)
url=""
# Generous bounds (a loaded 2-core CI machine under ASan): the run is still going, so waiting costs nothing.
address() { url=$(grep -o 'http://127.0.0.1:[0-9]*' "$WORK/local.log" | head -1); [ -n "$url" ]; }
wait_for 120 address || fail "local printed no address"
stepped() { curl -sf "$url/metrics" >"$WORK/metrics.txt" && grep -q '^tfx_global_step{role="master",index="0"} [1-9]' "$WORK/metrics.txt"; }
wait_for 120 stepped
grep -q '^tfx_global_step{role="master",index="0"} [1-9]' "$WORK/metrics.txt" || fail "/metrics has no global step: $(head -5 "$WORK/metrics.txt")"
if command -v promtool >/dev/null; then promtool check metrics <"$WORK/metrics.txt" || fail "promtool rejects /metrics"; fi
python3 - "$WORK/metrics.txt" <<'PY' || fail "/metrics is not valid exposition text or lacks a family"
import re, sys
types, samples, links = {}, {}, {}
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if line.startswith("# HELP "): continue
    m = re.match(r"# TYPE ([a-z_][a-z0-9_]*) (gauge|counter)$", line)
    if m: types[m.group(1)] = m.group(2); continue
    m = re.match(r'([a-z_][a-z0-9_]*)\{role="(master|ps|worker)",index="([0-9]+)"(?:,metric="[a-z0-9_.]+")?(,transport="(ipc|tcp)",security="([a-z-]+)")?\} (NaN|[-+0-9.eE]+)$', line)
    assert m, line
    if m.group(4):
        links[(m.group(2), int(m.group(3)))] = (m.group(5), m.group(6))
        continue
    assert m.group(1) in types, line
    assert (types[m.group(1)] == "counter") == m.group(1).endswith("_total"), line
    samples[(m.group(1), m.group(2), int(m.group(3)))] = float(m.group(7))
need = [("tfx_global_step", "master", 0), ("tfx_seconds_since_checkpoint", "master", 0),
        ("tfx_stale_gradients_dropped_total", "ps", 0), ("tfx_stale_gradients_dropped_total", "ps", 1),
        ("tfx_rejected_frames_total", "ps", 1), ("tfx_rejected_requests_total", "ps", 0),
        ("tfx_pulls_served_total", "ps", 0), ("tfx_restarts_total", "worker", 1), ("tfx_restarts_total", "master", 0)]
need += [(f"tfx_nan_{k}_pushes_total", "ps", p) for k in ("rejected", "skipped") for p in (0, 1)]
missing = [k for k in need if k not in samples]
assert not missing, missing
assert all(samples[(f"tfx_nan_{k}_pushes_total", "ps", p)] == 0 for k in ("rejected", "skipped") for p in (0, 1)), \
    "the master shows NaN pushes in a run without any"
assert samples[("tfx_pulls_served_total", "ps", 0)] > 0, "the master shows no pulls served by ps 0"
# The default local cluster: every link of the master over a Unix socket, guarded by the socket directory's mode.
assert links.get(("ps", 1)) == ("ipc", "unix-socket-permissions"), links
assert links.get(("worker", 1)) == ("ipc", "unix-socket-permissions"), links
# ... with kernel buffers raised past the 208 KiB ZeroMQ leaves Unix sockets at (the master's links to its peers).
assert samples.get(("tfx_ipc_links_sized_total", "master", 0), 0) >= 1, "no ipc link of the master was sized"
PY
# A killed worker is restarted by the supervisor, and the master's /metrics counts it.
wpid=$(sed -n 's/.*LOCAL-SPAWN worker 1: pid \([0-9]*\).*/\1/p' "$WORK/local.log" | head -1)
[ -n "$wpid" ] || fail "no pid for worker 1 in the local log"
kill -9 "$wpid"
restarted='^tfx_restarts_total{role="worker",index="1"} 1$'
for _ in $(seq 1 150); do curl -sf "$url/metrics" | grep -q "$restarted" && break; sleep 0.2; done
curl -sf "$url/metrics" | grep -q "$restarted" || fail "/metrics does not count the restart of worker 1"
curl -sf "$url/status" | python3 -c "
import json, sys
s = json.load(sys.stdin)
assert s['role'] == 'master' and len(s['ps']) == 2 and len(s['workers']) == 2 and s['plan'], s" || fail "/status"
curl -sf "$url/" | grep -q "<canvas" || fail "/ is not the page"
wait "${PIDS[0]}" || fail "local run failed: $(tail -1 "$WORK/local.log")"
ev=$(ls "$WORK"/runs/r1/events.out.tfevents.* | head -1)
[ -n "$ev" ] || fail "no event file"
PYTHONPATH=$(dirname "$0") python3 - "$ev" "$WORK/runs/r1/metrics.jsonl" <<'PY' || fail "event file does not match metrics.jsonl"
import json, struct, sys
from tfevents import record, fields
data = open(sys.argv[1], "rb").read(); i = 0; events = []
while i < len(data):
    payload, i = record(data, i)
    ev = {"scalars": {}}
    for f, v in fields(payload):
        if f == 2: ev["step"] = v
        if f == 3: ev["version"] = v.decode()
        if f == 5:
            for sf, sv in fields(v):
                tag = val = None
                for vf, vv in fields(sv):
                    if vf == 1: tag = vv.decode()
                    if vf == 2: val = struct.unpack("<f", vv)[0]
                ev["scalars"][tag] = val
    events.append(ev)
assert events[0].get("version") == "brain.Event:2", events[0]
evals = [e for e in events if "eval/accuracy" in e["scalars"]]
lines = [json.loads(l) for l in open(sys.argv[2]) if '"kind": "eval"' in l]
assert len(evals) == len(lines) >= 3, (len(evals), len(lines))
for e, l in zip(evals, lines):
    assert e.get("step", 0) == l["step"] and abs(e["scalars"]["eval/accuracy"] - l["accuracy"]) < 1e-6, (e, l)
# Each worker's training series under its own tags, never one series with two values at a step.
assert any("train/loss/worker_0" in e["scalars"] for e in events), [e["scalars"] for e in events[:3]]
assert any("train/loss/worker_1" in e["scalars"] for e in events)
assert not any("train/loss" in e["scalars"] or "train/worker" in e["scalars"] for e in events)
PY
# A scalar of exactly 0 is written (simple_value sits in a oneof, as in TensorFlow's summary.proto): a run at
# learning rate 0 has train/learning_rate = 0.0 in every train event, as metrics.jsonl has it.
"$TFX_NODE" train --config "$EXAMPLE" --run-dir "$WORK/runs/lr0" --max-steps 200 --set training.report_every=100 \
  --set optimizer.learning_rate=0 --set eval.every_steps=0 >"$WORK/lr0.log" 2>&1 || fail "lr0 run: $(tail -1 "$WORK/lr0.log")"
PYTHONPATH=$(dirname "$0") python3 - "$(ls "$WORK"/runs/lr0/events.out.tfevents.* | head -1)" <<'PY' || fail "a zero scalar is missing from the event file"
import struct, sys
from tfevents import record, fields
data = open(sys.argv[1], "rb").read(); i = 0; lrs = []
while i < len(data):
    payload, i = record(data, i)
    for f, v in fields(payload):
        if f == 5:
            for sf, sv in fields(v):
                kv = dict(fields(sv))
                if kv.get(1) == b"train/learning_rate":
                    assert 2 in kv, "train/learning_rate without a simple_value (a dropped 0)"
                    lrs.append(struct.unpack("<f", kv[2])[0])
assert lrs == [0.0, 0.0], lrs
PY
"$TFX_NODE" runs --root "$WORK/runs" | grep -q "^r1 .* 1500 " || fail "runs does not list r1: $("$TFX_NODE" runs --root "$WORK/runs")"
"$TFX_NODE" report --run-dir "$WORK/runs/r1" >"$WORK/report.log" 2>&1 || fail "report: $(cat "$WORK/report.log")"
python3 - "$WORK/runs/r1/report.html" <<'PY' || fail "report.html"
import re, sys
h = open(sys.argv[1]).read()
lines = re.findall(r'<polyline[^>]*points="([^"]*)"', h)
assert len(lines) == 2 and all(len(l.split()) >= 3 for l in lines), lines
assert "dense_1/kernel" in h and "held by" in h and "max_steps" in h and "://" not in h.split("<body>")[1]
PY
pass "metrics endpoint, status, page, TensorBoard events, runs, report"
