#!/bin/bash
# tfx-node serve (#29): TensorFlow Serving's REST API over a run. Dense: the served probabilities are predict's on
# the same checkpoint (every digit predict prints), an instance's answer is the same bits alone, in a batch of 64 and
# among concurrent requests (batched together); with "top_k" the K most probable labels and their scores; bad
# bodies are 400 with a JSON error, one over 64 MiB 413; a corrupt newer checkpoint is logged while the old model
# serves on; a resumed run's newer checkpoint is picked up (its answers are predict's on it); SIGTERM stops it cleanly.
# Sparse: lazy tables of a 2-ps cluster read in place from the row files answer what the export (tables gathered
# whole, untrained rows at their initial values) answers, for LibSVM lines with ids never trained; the checkpoints
# are incremental, so the newest is a delta read with its chain.
. "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
IMG=/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz
[ -f "$IMG" ] || skip "no Fashion-MNIST at $IMG"
experiment "$WORK/mlp.json" checkpoint.every_steps=100 eval.every_steps=0 training.report_every=100
"$TFX_NODE" train --config "$WORK/mlp.json" --run-dir "$WORK/mlp" --max-steps 200 >"$WORK/train.log" 2>&1 ||
  fail "train: $(tail -1 "$WORK/train.log")"
fmnist_queries 64 "$WORK/q.idx"
"$TFX_NODE" predict --run-dir "$WORK/mlp" --input "$WORK/q.idx" --output "$WORK/p.jsonl" >"$WORK/predict.log" 2>&1 ||
  fail "predict: $(tail -1 "$WORK/predict.log")"
port=$(free_port)
"$TFX_NODE" serve --run-dir "$WORK/mlp" --port "$port" >"$WORK/serve.log" 2>&1 &
SP=$!
PIDS+=($SP)
URL=http://127.0.0.1:$port/v1/models/fashion_mnist_mlp
wait_for 60 curl -sf "$URL" -o "$WORK/status.json" || fail "serve never answered GET $URL"
grep -q '"step": 200' "$WORK/status.json" || fail "GET $URL: $(cat "$WORK/status.json")"
listen=$(ss -ltnH "sport = :$port" | awk '{print $4}')
[ "$listen" = "127.0.0.1:$port" ] || fail "serve without --bind listens on '$listen', want 127.0.0.1:$port"

python3 - "$WORK/q.idx" "$WORK/p.jsonl" "$URL:predict" <<'PY' || fail "dense: served predictions differ"
import json, struct, sys, threading, urllib.request
f32 = lambda v: struct.unpack("f", struct.pack("f", v))[0]  # the float the server printed, exactly
px = open(sys.argv[1], "rb").read()[16:]
inst = [list(px[i * 784:(i + 1) * 784]) for i in range(64)]
def ask(rows):
    req = urllib.request.Request(sys.argv[3], json.dumps({"instances": rows}).encode())
    return json.load(urllib.request.urlopen(req, timeout=120))
batch = ask(inst)
assert batch["step"] == 200, batch["step"]
want = [json.loads(l)["probabilities"] for l in open(sys.argv[2])]
for i, (g, w) in enumerate(zip(batch["predictions"], want)):
    assert ["%.6g" % f32(v) for v in g] == ["%.6g" % v for v in w], ("instance", i, g, w)
req = urllib.request.Request(sys.argv[3], json.dumps({"instances": inst[:8], "top_k": 3}).encode())
top = json.load(urllib.request.urlopen(req, timeout=120))["predictions"]
assert len(top) == 8, len(top)
for i, t in enumerate(top):  # top_k: the 3 most probable labels of the full answer, highest first, same bits
    full = batch["predictions"][i]
    want = sorted(range(len(full)), key=lambda c: (-full[c], c))[:3]
    assert t["labels"] == want and t["scores"] == [full[c] for c in want], ("top_k", i, t, want)
alone = [None] * 16
def one(i): alone[i] = ask([inst[i]])["predictions"][0]
threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
[t.start() for t in threads]; [t.join() for t in threads]
assert alone == batch["predictions"][:16], "an instance's answer depends on what it was batched with"
PY
for body in '{"instances": [[1,2,3]]}' '{"instances": ' 'not json' '{"nothing": 1}'; do
  code=$(curl -s -o "$WORK/err.json" -w '%{http_code}' -d "$body" "$URL:predict")
  [ "$code" = 400 ] || fail "bad body '$body' answered $code, want 400"
  python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['error']" "$WORK/err.json" ||
    fail "bad body '$body': no JSON error: $(cat "$WORK/err.json")"
done
head -c $((65 << 20)) /dev/zero | tr '\0' ' ' >"$WORK/big.json"
code=$(curl -s -o "$WORK/err.json" -w '%{http_code}' --data-binary @"$WORK/big.json" "$URL:predict")
rm -f "$WORK/big.json"
[ "$code" = 413 ] && grep -q '"error"' "$WORK/err.json" || fail "a 65 MiB body answered $code: $(cat "$WORK/err.json")"
# Two Content-Length headers that differ (RFC 7230 3.3.2; a smuggling vector): 400, before the body is read.
python3 - "$port" "${URL#http://127.0.0.1:$port}:predict" <<'PY' || fail "two different Content-Length headers were not refused"
import socket, sys
body = b'{"instances": [[' + b",".join([b"0"] * 784) + b"]]}"
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
s.sendall(b"POST " + sys.argv[2].encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          + b"Content-Length: %d\r\nContent-Length: 5\r\n\r\n" % len(body) + body)
status = s.recv(4096).split(b"\r\n")[0]
print(status.decode())
sys.exit(0 if b" 400 " in status else 1)
PY
code=$(curl -s -o "$WORK/err.json" -w '%{http_code}' "http://127.0.0.1:$port/v1/models/nobody")
[ "$code" = 404 ] || fail "an unknown model answered $code, want 404"

# A newer checkpoint that is corrupt is named in the log; the model served stays.
bad=$WORK/mlp/checkpoints/ckpt-000000009999
cp -r "$WORK/mlp/checkpoints/ckpt-000000000200" "$bad"
printf 'XXXX' | dd of="$bad/ps-0.shard" bs=1 seek=40 conv=notrunc 2>/dev/null
wait_for 20 grep -q SERVE-SWAP-FAIL "$WORK/serve.log" || fail "the corrupt step 9999 was not reported"
curl -sf "$URL" | grep -q '"step": 200' || fail "after the corrupt checkpoint: $(curl -s "$URL")"
rm -rf "$bad"
# The run resumes to 300 while serve runs: its new checkpoint is served.
"$TFX_NODE" train --config "$WORK/mlp.json" --run-dir "$WORK/mlp" --max-steps 300 >"$WORK/train2.log" 2>&1 ||
  fail "resume: $(tail -1 "$WORK/train2.log")"
wait_for 20 sh -c "curl -sf '$URL' | grep -q '\"step\": 300'" || fail "serve did not move to step 300: $(curl -s "$URL")"
# ... with the new weights: its answers are predict's on checkpoint 300 (which differ from 200's)
"$TFX_NODE" predict --run-dir "$WORK/mlp" --checkpoint 300 --input "$WORK/q.idx" --output "$WORK/p300.jsonl" \
  >"$WORK/predict300.log" 2>&1 || fail "predict at 300: $(tail -1 "$WORK/predict300.log")"
cmp -s "$WORK/p.jsonl" "$WORK/p300.jsonl" && fail "predict at 300 equals 200's: the check below proves nothing"
python3 "$PYLIB/served_as_predicted.py" "$WORK/q.idx" "$WORK/p300.jsonl" "$URL:predict" 300 ||
  fail "after the swap to step 300, the served predictions are not predict's on checkpoint 300"
curl -sf "http://127.0.0.1:$port/metrics" >"$WORK/metrics.txt" || fail "/metrics"
grep -q '^tfx_serve_model_step{role="serve",index="0"} 300' "$WORK/metrics.txt" || fail "metrics: step"
grep -q '^tfx_serve_model_swap_failures_total{role="serve",index="0"} 1' "$WORK/metrics.txt" || fail "metrics: failures"
grep -q '^tfx_serve_request_seconds_count' "$WORK/metrics.txt" || fail "metrics: no latency histogram"
kill -TERM $SP
wait_exit 30 $SP || fail "serve did not stop cleanly on SIGTERM"

# Sparse: a lazy-table LR on 2 ps; LibSVM lines, some with ids never trained.
python3 "$(dirname "$0")/sparse_data.py" "$WORK" --train 1500 --test 64
experiment "$WORK/lr.json" name='"lr"' model.input_shape='[1048576]' \
  model.layers='[{"type": "embedding_bag", "units": 4, "combiner": "sum"}]' model.loss='"softmax_cross_entropy"' \
  data.format='"libsvm"' data.train.images="\"$WORK/train.libsvm\"" data.eval.images="\"$WORK/test.libsvm\"" \
  data.scale=1 optimizer.name='"adagrad"' optimizer.learning_rate=0.5 training.batch_size=32 training.epochs=2 \
  eval.every_steps=0 checkpoint.incremental=true checkpoint.every_steps=2 checkpoint.min_interval_secs=0
"$TFX_NODE" local --config "$WORK/lr.json" --run-dir "$WORK/lr" --ps 2 --workers 2 >"$WORK/local.log" 2>&1 ||
  fail "local cluster: $(tail -2 "$WORK/local.log")"
compgen -G "$WORK/lr/checkpoints/ckpt-*/ps-1.rows" >/dev/null || fail "the checkpoint holds no row files"
# A delta read in place with its chain answers what its export (the chain gathered whole) answers.
delta=
for d in "$WORK"/lr/checkpoints/ckpt-*; do
  [ "$(od -An -tu4 -j8 -N4 "$d/ps-1.rows" | tr -d ' ')" = 2 ] && delta=$d
done
[ -n "$delta" ] || fail "no checkpoint of the incremental run is a delta: $(ls "$WORK/lr/checkpoints")"
"$TFX_NODE" export --run-dir "$WORK/lr" --checkpoint "$delta" --out "$WORK/dexp" >"$WORK/dexport.log" 2>&1 ||
  fail "export of $delta: $(tail -1 "$WORK/dexport.log")"
for src in "--run-dir $WORK/lr --checkpoint $delta" "--export $(ls -d "$WORK"/dexp/*)"; do
  # shellcheck disable=SC2086 # (two words each)
  "$TFX_NODE" predict $src --input "$WORK/test.libsvm" --output "$WORK/dp-$((n = ${n:-0} + 1)).jsonl" \
    >"$WORK/dpredict.log" 2>&1 || fail "predict $src: $(tail -1 "$WORK/dpredict.log")"
done
cmp -s "$WORK/dp-1.jsonl" "$WORK/dp-2.jsonl" || fail "the delta $delta read in place answers otherwise than its export"
"$TFX_NODE" export --run-dir "$WORK/lr" --out "$WORK/exp" >"$WORK/export.log" 2>&1 || fail "export: $(tail -1 "$WORK/export.log")"
p1=$(free_port)
p2=$(free_port)
"$TFX_NODE" serve --run-dir "$WORK/lr" --port "$p1" >"$WORK/serve-lr.log" 2>&1 &
S1=$!
PIDS+=($S1)
"$TFX_NODE" serve --export "$(ls -d "$WORK"/exp/*)" --port "$p2" --max-batch 1 >"$WORK/serve-exp.log" 2>&1 &
S2=$!
PIDS+=($S2)
wait_for 60 curl -sf "http://127.0.0.1:$p1/v1/models/lr" -o /dev/null || fail "sparse serve never answered"
wait_for 60 curl -sf "http://127.0.0.1:$p2/v1/models/lr" -o /dev/null || fail "export serve never answered"
grep -q "rows indexed" "$WORK/serve-lr.log" || fail "no row index: $(cat "$WORK/serve-lr.log")"
python3 - "$WORK/test.libsvm" "$p1" "$p2" <<'PY' || fail "sparse: the row files answer otherwise than the export"
import json, sys, urllib.request
lines = [l.strip() for l in open(sys.argv[1])][:32]
lines += ["1 7:0.5 1048576:1", "3:2 999999:1"]  # ids no example holds: rows never trained
def ask(port):
    url = "http://127.0.0.1:%s/v1/models/lr:predict" % port
    req = urllib.request.Request(url, json.dumps({"instances": lines}).encode())
    return [["%.9g" % v for v in p] for p in json.load(urllib.request.urlopen(req, timeout=120))["predictions"]]
a, b = ask(sys.argv[2]), ask(sys.argv[3])
assert len(a) == 34 and a == b, [(i, x, y) for i, (x, y) in enumerate(zip(a, b)) if x != y][:3]
PY
kill -TERM $S1 $S2 # stopped cleanly, so that LeakSanitizer reads their heaps
wait_exit 30 $S1 || fail "sparse serve did not stop cleanly"
wait_exit 30 $S2 || fail "export serve did not stop cleanly"
pass "serve: predict's answers, batched or alone; 400s; corrupt checkpoint kept out; followed to 300; lazy rows in place; a delta read with its chain as its export"
