#!/bin/bash
# tfx-node serve under a connection flood (#29, "slow clients, 1 000 concurrent connections"): with 1 000 idle TCP
# connections and 40 slow clients (one header byte every second) held against it, a real client's requests are
# answered with predict's probabilities, GET and /metrics answer, nothing runs out of file descriptors; the idle
# connections are closed by the server's timeout, and SIGTERM stops it cleanly.
. "$(dirname "$0")/lib.sh"
N_CONN=1000
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge $((N_CONN + 200)) ] || skip "the hard open-file limit ($hard) is below $((N_CONN + 200))"
ulimit -Sn 1024 # what a default system gives a process; serve starts with it and raises its own
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
IMG=/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz
[ -f "$IMG" ] || skip "no Fashion-MNIST at $IMG"
experiment "$WORK/mlp.json" checkpoint.every_steps=20 eval.every_steps=0 training.report_every=20
"$TFX_NODE" train --config "$WORK/mlp.json" --run-dir "$WORK/mlp" --max-steps 20 >"$WORK/train.log" 2>&1 ||
  fail "train: $(tail -1 "$WORK/train.log")"
fmnist_queries 8 "$WORK/q.idx"
"$TFX_NODE" predict --run-dir "$WORK/mlp" --input "$WORK/q.idx" --output "$WORK/p.jsonl" >"$WORK/predict.log" 2>&1 ||
  fail "predict: $(tail -1 "$WORK/predict.log")"
port=$(free_port)
"$TFX_NODE" serve --run-dir "$WORK/mlp" --port "$port" >"$WORK/serve.log" 2>&1 &
SP=$!
PIDS+=($SP)
URL=http://127.0.0.1:$port/v1/models/fashion_mnist_mlp
wait_for 60 curl -sf "$URL" -o /dev/null || fail "serve never answered GET $URL"
# The flood: N_CONN idle connections and 40 slowloris clients, held until $WORK/release appears.
python3 - "$port" "$N_CONN" "$WORK/release" >"$WORK/flood.txt" 2>&1 <<'PY' &
import os, resource, socket, sys, time
port, n, release = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(n)]
slow = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(40)]
for s in slow:
    s.sendall(b"POST /v1/models/fashion_mnist_mlp:predict HTTP/1.1\r\nHost: x\r\n")
print("held", len(idle) + len(slow), flush=True)
while not os.path.exists(release):
    for s in slow:
        try:
            s.sendall(b"X")
        except OSError:
            pass
    time.sleep(1)
closed = 0
for s in idle:
    s.setblocking(False)
    try:
        closed += s.recv(1) == b""
    except BlockingIOError:
        pass
    except OSError:
        closed += 1
print("closed by the server", closed, flush=True)
PY
FL=$!
PIDS+=($FL)
wait_for 120 grep -q "held $((N_CONN + 40))" "$WORK/flood.txt" || fail "the flood did not connect: $(cat "$WORK/flood.txt")"
# Every connection is taken in at once (not left in the listen backlog until others time out).
taken() { [ "$(ls "/proc/$SP/fd" | wc -l)" -ge "$N_CONN" ]; }
wait_for 60 taken || fail "serve took in only $(ls "/proc/$SP/fd" | wc -l) descriptors of $N_CONN + 40 connections"
open=$(ls "/proc/$SP/fd" | wc -l)
python3 - "$WORK/q.idx" "$WORK/p.jsonl" "$URL:predict" <<'PY' || fail "requests under the flood failed or differ from predict"
import json, struct, sys, threading, urllib.request
f32 = lambda v: struct.unpack("f", struct.pack("f", v))[0]
px = open(sys.argv[1], "rb").read()[16:]
inst = [list(px[i * 784:(i + 1) * 784]) for i in range(8)]
want = [["%.6g" % v for v in json.loads(l)["probabilities"]] for l in open(sys.argv[2])]
got = [None] * 8
def ask(i):
    req = urllib.request.Request(sys.argv[3], json.dumps({"instances": [inst[i]]}).encode())
    got[i] = ["%.6g" % f32(v) for v in json.load(urllib.request.urlopen(req, timeout=120))["predictions"][0]]
threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
[t.start() for t in threads]; [t.join() for t in threads]
assert got == want, [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if g != w][:2]
PY
curl -sf "$URL" | grep -q '"step": 20' || fail "GET under the flood: $(curl -s "$URL")"
curl -sf "http://127.0.0.1:$port/metrics" | grep -q '^tfx_serve_requests_total' || fail "/metrics under the flood"
# The server's idle timeout (10 s) closes the flood's connections (the idle ones are counted once released).
few() { [ "$(ls "/proc/$SP/fd" | wc -l)" -lt $((N_CONN / 10)) ]; }
wait_for 120 few || fail "serve still holds $(ls "/proc/$SP/fd" | wc -l) descriptors 120 s into the flood"
touch "$WORK/release"
wait_exit 60 "$FL" || fail "the flood did not end"
closed=$(sed -n 's/^closed by the server //p' "$WORK/flood.txt")
[ "${closed:-0}" -ge $((N_CONN * 9 / 10)) ] || fail "only ${closed:-0} of $N_CONN idle connections were closed by the server"
grep -l "Too many open files" "$WORK"/*.log && fail "serve ran out of file descriptors"
kill -TERM "$SP"
wait_exit 30 "$SP" || fail "serve did not stop cleanly after the flood: $(tail -3 "$WORK/serve.log")"
pass "serve held $open descriptors under $N_CONN idle connections and 40 slow clients, answered predict's probabilities, GET and /metrics, and closed $closed idle connections by its timeout"
