#!/bin/bash
# tfx-node serve against slowloris: 2 048 connections (every slot serve has) each trickling a header byte every
# 2 s, never finishing their headers, and never let go. libmicrohttpd's own timeout is one of inactivity, which
# they never meet; serve's header deadline (10 s from a connection's start) shuts them down
# (SERVE-HEADER-TIMEOUT, tfx_serve_header_timeouts_total), so a real client's request is answered while the
# attack goes on, instead of failing as long as it lasts.
. "$(dirname "$0")/lib.sh"
N_CONN=2048
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge $((N_CONN + 300)) ] || skip "the hard open-file limit ($hard) is below $((N_CONN + 300))"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
IMG=/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz
[ -f "$IMG" ] || skip "no Fashion-MNIST at $IMG"
small_mlp "$WORK/mlp.json" checkpoint.every_steps=5 eval.every_steps=0 training.report_every=5
"$TFX_NODE" train --config "$WORK/mlp.json" --run-dir "$WORK/mlp" --max-steps 5 >"$WORK/train.log" 2>&1 ||
  fail "train: $(tail -1 "$WORK/train.log")"
port=$(free_port)
"$TFX_NODE" serve --run-dir "$WORK/mlp" --port "$port" >"$WORK/serve.log" 2>&1 &
SP=$!
PIDS+=($SP)
URL=http://127.0.0.1:$port/v1/models/fashion_mnist_mlp
wait_for 60 curl -sf "$URL" -o /dev/null || fail "serve never answered GET $URL"
python3 - "$port" "$N_CONN" "$WORK/release" >"$WORK/slow.txt" 2>&1 <<'PY' &
import os, resource, socket, sys, time
port, n, release = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
slow = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST /v1/models/fashion_mnist_mlp:predict HTTP/1.1\r\nHost: x\r\n")
    slow.append(s)
print("held", len(slow), flush=True)
while not os.path.exists(release):
    for s in slow:
        try:
            s.sendall(b"X")
        except OSError:
            pass
    time.sleep(2)
PY
FL=$!
PIDS+=($FL)
wait_for 120 grep -qs "held $N_CONN" "$WORK/slow.txt" || fail "the attack did not connect: $(cat "$WORK/slow.txt")"
t0=$SECONDS
answered() { curl -sf -m 3 "$URL" -o /dev/null; }
wait_for 60 answered || fail "no request answered in 60 s of the attack"
waited=$((SECONDS - t0))
grep -q SERVE-HEADER-TIMEOUT "$WORK/serve.log" || fail "no SERVE-HEADER-TIMEOUT in the log"
# timeouts: the connections shut down for their headers so far, from /metrics (0: none yet or no answer).
timeouts() { curl -sf -m 3 "http://127.0.0.1:$port/metrics" | awk '/^tfx_serve_header_timeouts_total/ {print $2}'; }
most() { [ "$(timeouts || echo 0)" -ge $((N_CONN / 2)) ]; }
wait_for 60 most || fail "tfx_serve_header_timeouts_total $(timeouts), want most of $N_CONN"
n=$(timeouts)
touch "$WORK/release"
kill -TERM "$SP"
wait_exit 30 "$SP" || fail "serve did not stop cleanly on SIGTERM"
pass "under $N_CONN slowloris connections a request was answered after ${waited} s ($n connections shut down for their headers)"
