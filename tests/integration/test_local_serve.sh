#!/bin/bash
# tfx-node local --serve-port (#29 item 6): the run is served while it trains, by `tfx-node serve` beside the
# cluster; the master's /status names its URL and the live page links it; the server answers predictions at the
# step of a checkpoint the cluster wrote, and it stops with the cluster (no process left behind). With `local` held
# (SIGSTOP: its children go on, and the server is stopped only when it goes on), the cluster ends and the server
# moves to the final checkpoint: its answers are `predict`'s on that checkpoint, digit for digit.
. "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
IMG=/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz
[ -f "$IMG" ] || skip "no Fashion-MNIST at $IMG"
experiment "$WORK/exp.json" training.max_steps=600 checkpoint.every_steps=50 checkpoint.min_interval_secs=0 \
  eval.every_steps=0 training.report_every=50
RUN=$WORK/run
port=$(free_port)
"$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$RUN" --serve-port "$port" \
  >"$WORK/local.log" 2>&1 &
LP=$!
PIDS+=($LP)
URL=http://127.0.0.1:$port/v1/models/fashion_mnist_mlp
served() { curl -sf "$URL" -o "$WORK/model.json" && python3 -c "import json,sys; sys.exit(json.load(open(sys.argv[1]))['step'] < 50)" "$WORK/model.json"; }
wait_for 300 served || fail "no checkpoint served at $URL: $(cat "$WORK/model.json" 2>/dev/null; tail -3 "$RUN/logs/serve-0.log")"
step=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['step'])" "$WORK/model.json")
[ -f "$RUN/checkpoints/ckpt-$(printf %012d "$step")/manifest.json" ] || fail "step $step served is no checkpoint of the run"
python3 - "$IMG" "$URL:predict" <<'PY' || fail "the server beside the cluster did not answer a prediction"
import gzip, json, sys, urllib.request
px = gzip.open(sys.argv[1]).read()[16:16 + 784]
req = urllib.request.Request(sys.argv[2], json.dumps({"instances": [list(px)]}).encode())
r = json.load(urllib.request.urlopen(req, timeout=60))
p = r["predictions"][0]
assert len(p) == 10 and abs(sum(p) - 1) < 1e-4, p
PY
page=$(sed -n 's|.*live page, /metrics and /status at \(http://[^ ]*/\)$|\1|p' "$WORK/local.log" | head -1)
[ -n "$page" ] || fail "local printed no live page address"
status=$(curl -sf "${page}status") || fail "the master's /status did not answer"
echo "$status" | python3 -c "import json,sys; s=json.load(sys.stdin); assert s['serve'] == sys.argv[1], s['serve']" "$URL" ||
  fail "the master's /status does not name the server: $(echo "$status" | head -c 300)"
curl -sf "$page" | grep -q "served at" || fail "the live page has no link to the server"
grep -q "the model is served while it trains at $URL" "$WORK/local.log" || fail "local did not print the server's URL"
fmnist_queries 16 "$WORK/q.idx"
kill -STOP "$LP" || fail "could not hold local"
final() { curl -sf "$URL" -o "$WORK/model.json" && grep -q '"step": 600' "$WORK/model.json"; }
wait_for 300 final || fail "the server did not move to the final checkpoint: $(cat "$WORK/model.json"; tail -3 "$RUN/logs/serve-0.log")"
"$TFX_NODE" predict --run-dir "$RUN" --checkpoint 600 --input "$WORK/q.idx" --output "$WORK/p600.jsonl" \
  >"$WORK/predict.log" 2>&1 || fail "predict at 600: $(tail -1 "$WORK/predict.log")"
python3 -c 'import json,sys; sys.exit(all(abs(v - 0.1) < 1e-3 for l in open(sys.argv[1]) for v in json.loads(l)["probabilities"]))' \
  "$WORK/p600.jsonl" || fail "predict on the final checkpoint answers 0.1 for every class: the weights were not trained"
python3 "$PYLIB/served_as_predicted.py" "$WORK/q.idx" "$WORK/p600.jsonl" "$URL:predict" 600 ||
  fail "the served predictions are not predict's on the final checkpoint"
kill -CONT "$LP" || fail "could not release local"
wait_exit 300 "$LP" || fail "the run failed: $(tail -3 "$WORK/local.log")"
pgrep -f -- "serve --bind 127.0.0.1 --port $port" >/dev/null && fail "the server outlived the cluster"
grep -q "SERVE-SWAP\|SERVE-START" "$RUN/logs/serve-0.log" || fail "no serve log: $(tail -3 "$RUN/logs/serve-0.log")"
pass "local --serve-port: step $step served beside the cluster, linked from the live page, the final checkpoint served as predict answers it, stopped with the run"
