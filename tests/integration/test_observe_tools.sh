#!/bin/bash
# Watching a run with the real tools: Debian's Prometheus server scrapes the master of a running local cluster
# (every second) and its query API returns the global step series, rising and above 0; headless Chromium loads
# the master's page and its screenshot shows the three plots drawn (pixels of each plot's line colour counted).
. "$(dirname "$0")/lib.sh"
command -v prometheus >/dev/null || fail "prometheus is not installed (scripts/install-deps.sh)"
command -v chromium >/dev/null || fail "chromium is not installed (scripts/install-deps.sh)"
experiment "$WORK/exp.json" training.max_steps=50000 eval.every_steps=100 training.report_every=20 checkpoint.every_steps=100000
"$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$WORK/run" >"$WORK/local.log" 2>&1 &
LOCAL=$!
PIDS+=($LOCAL)
stop_local() { kill -TERM "$LOCAL" 2>/dev/null; wait "$LOCAL"; }
url_seen() { url=$(grep -o 'http://127.0.0.1:[0-9]*' "$WORK/local.log" | head -1); [ -n "$url" ]; }
wait_for 60 url_seen || { stop_local; fail "local printed no address"; }
port=${url##*:}

prom=$(free_port)
cat >"$WORK/prometheus.yml" <<EOF
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: tfx
    scrape_interval: 1s
    static_configs: [{targets: ["127.0.0.1:$port"]}]
EOF
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address="127.0.0.1:$prom" >"$WORK/prometheus.log" 2>&1 &
PIDS+=($!)
api="http://127.0.0.1:$prom/api/v1"
# steps_ok: the scraped global step series has at least 3 samples, never falling, the last above 0.
steps_ok() {
  local now; now=$(date +%s)
  curl -sfG "$api/query_range" --data-urlencode 'query=tfx_global_step{job="tfx",role="master",index="0"}' \
    --data-urlencode "start=$((now - 120))" --data-urlencode "end=$now" --data-urlencode step=1 >"$WORK/range.json" &&
    python3 - "$WORK/range.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == "success" and len(r["data"]["result"]) == 1, r
vals = [float(v) for _, v in r["data"]["result"][0]["values"]]
sys.exit(0 if len(vals) >= 3 and vals[-1] > 0 and vals == sorted(vals) and vals[-1] > vals[0] else 1)
PY
}
wait_for 180 steps_ok || { stop_local; fail "Prometheus has no rising step series: $(cat "$WORK/range.json"; tail -3 "$WORK/prometheus.log")"; }
curl -sfG "$api/query" --data-urlencode 'query=up{job="tfx"}' | grep -q '"value":\[[0-9.]*,"1"\]' ||
  { stop_local; fail "Prometheus does not see the target up"; }

# The page polls /status every 2 s; shoot once there are 10 reports over 3 s (the throughput plot takes rates
# over gaps of 0.5 s) and 2 evaluations.
history_ok() {
  curl -sf "$url/status" | python3 -c "
import json, sys
h = json.load(sys.stdin)['history']
sys.exit(0 if len(h['train']) >= 10 and h['train'][-1][3] - h['train'][0][3] >= 3 and len(h['eval']) >= 2 else 1)"
}
wait_for 180 history_ok || { stop_local; fail "/status never had 10 reports over 3 s and 2 evaluations"; }
timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
  --user-data-dir="$WORK/chromium" --window-size=1400,600 --virtual-time-budget=8000 \
  --screenshot="$WORK/page.png" "$url/" >"$WORK/chromium.log" 2>&1
[ -s "$WORK/page.png" ] || { stop_local; fail "chromium wrote no screenshot: $(tail -3 "$WORK/chromium.log")"; }
stop_local
python3 - "$WORK/page.png" <<'PY' || fail "the screenshot does not show three drawn plots"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
i, idat = 8, b""
while i < len(data):
    n, kind = struct.unpack(">I4s", data[i:i + 8]); body = data[i + 8:i + 8 + n]; i += 12 + n
    if kind == b"IHDR": w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
    if kind == b"IDAT": idat += body
assert depth == 8 and ctype in (2, 6), (depth, ctype)
bpp = 3 if ctype == 2 else 4
raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0; b = prev[x]; c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line); prev = line
colours = {"loss #c33": (204, 51, 51), "accuracy #36c": (51, 102, 204), "throughput #393": (51, 153, 51)}
found = {}
for name, rgb in colours.items():
    xs = [x for row in rows for x in range(w) if all(abs(row[x * bpp + k] - rgb[k]) <= 24 for k in range(3))]
    found[name] = (len(xs), min(xs, default=0), max(xs, default=0))
# Each plot is a 2-px line across its canvas: many pixels, spread over well over 100 px of width.
bad = {k: v for k, v in found.items() if v[0] < 150 or v[2] - v[1] < 100}
assert not bad, found
print("plot pixels (count, min x, max x):", found)
PY
pass "Prometheus scraped the step series; Chromium's screenshot shows the three plots"
