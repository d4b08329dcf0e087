#!/bin/bash
# The HTTP page (#30, item 14): under `tfx-node local` it listens on loopback only (as the line it prints says),
# a node started with --bind HOST serves it on HOST, and 80 slow clients (a header line every 5 s, the
# slowloris pattern) cannot hold /metrics from everyone else: idle connections close after 3 s.
. "$(dirname "$0")/lib.sh"
port=$(free_port)
"$TFX_NODE" local --config "$EXAMPLE" --run-dir "$WORK/run" --max-steps 1000000 --set eval.every_steps=0 \
  --set checkpoint.every_steps=0 --set observe.http_port="$port" >"$WORK/local.log" 2>&1 &
PIDS+=($!)
sup=$!
wait_for 120 curl -sf "http://127.0.0.1:$port/metrics" -o /dev/null || fail "the master's page never answered on $port"
listen=$(ss -ltnH "sport = :$port" | awk '{print $4}')
[ "$listen" = "127.0.0.1:$port" ] || fail "the local cluster's page listens on '$listen', not 127.0.0.1:$port"

# 80 slow clients: each sends a request line and then one header line every 5 s, never finishing the request.
python3 - "$port" >"$WORK/slow.log" 2>&1 <<'PY' &
import socket, sys, time
port = int(sys.argv[1])
socks = []
for i in range(80):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    socks.append(s)
print("connected", len(socks), flush=True)
for _ in range(6):
    time.sleep(5)
    for s in socks:
        try:
            s.sendall(b"X-Slow: 1\r\n")
        except OSError:
            pass
PY
PIDS+=($!)
slow=$!
wait_for 60 grep -q "connected 80" "$WORK/slow.log" || fail "the slow clients did not connect: $(cat "$WORK/slow.log")"
sleep 6 # past the first slow header line: the slow clients have been idle for more than the timeout
for i in 1 2 3; do
  curl -sf --max-time 20 "http://127.0.0.1:$port/metrics" | grep -q '^tfx_' ||
    fail "/metrics did not answer with 80 slow clients connected (try $i)"
done
kill "$slow" 2>/dev/null
kill -INT "$sup"
wait_for 120 bash -c "! kill -0 $sup 2>/dev/null" || fail "the cluster did not stop after SIGINT"

# A node given --bind serves its page there (a ps on its own: it listens before any peer comes).
ps_port=$(free_port)
http=$(free_port)
TF_CONFIG="{\"cluster\":{\"ps\":[\"127.0.0.1:$ps_port\"]},\"task\":{\"type\":\"ps\",\"index\":0}}" \
  "$TFX_NODE" --config "$EXAMPLE" --run-dir "$WORK/ps" --bind 127.0.0.1 --http-port "$http" >"$WORK/ps.log" 2>&1 &
PIDS+=($!)
psp=$!
wait_for 60 curl -sf "http://127.0.0.1:$http/metrics" -o /dev/null || fail "the ps's page never answered"
listen=$(ss -ltnH "sport = :$http" | awk '{print $4}')
[ "$listen" = "127.0.0.1:$http" ] || fail "a ps started with --bind 127.0.0.1 serves its page on '$listen'"
kill -TERM "$psp"
wait_for 60 bash -c "! kill -0 $psp 2>/dev/null" || fail "the ps did not stop on SIGTERM"
pass "the page binds where it says, and slow clients do not hold it"
