#!/bin/bash
# TF_CONFIG errors exit 2 naming the field; a ps from a Kubeflow-shaped TF_CONFIG answers status, survives
# random and truncated frames (counted, no crash, no state change) and exits 0 on SIGTERM.
. "$(dirname "$0")/lib.sh"
expect_config_error() {
  local want=$1 tfc=$2 out rc
  out=$(TF_CONFIG=$tfc timeout 10 "$TFX_NODE" 2>&1); rc=$?
  [ "$rc" = 2 ] || fail "TF_CONFIG $tfc: exit $rc, want 2 ($out)"
  echo "$out" | grep -q "$want" || fail "TF_CONFIG $tfc: message lacks '$want': $out"
}
expect_config_error "index 3 out of range" '{"cluster":{"ps":["127.0.0.1:1"]},"task":{"type":"ps","index":3}}'
expect_config_error "malformed JSON at offset" '{"cluster":{"ps":["127.0.0.1:1"]},"task":{"type":"ps","index":0'
expect_config_error "port 'x'" '{"cluster":{"ps":["127.0.0.1:x"]},"task":{"type":"ps","index":0}}'
expect_config_error "unknown job" '{"cluster":{"gpu":["127.0.0.1:1"]},"task":{"type":"ps","index":0}}'
expect_config_error "duplicate address" '{"cluster":{"ps":["h:1","h:1"]},"task":{"type":"ps","index":0}}'
expect_config_error "may not both" '{"cluster":{"chief":["a:1"],"master":["b:1"],"ps":["c:1"]},"task":{"type":"ps","index":0}}'
expect_config_error "no such job" '{"cluster":{"ps":["c:1"]},"task":{"type":"worker","index":0}}'
"$TFX_NODE" --version | grep -q "tfx-node" || fail "--version"
"$TFX_NODE" --help | grep -q "local" || fail "--help"
# Each command has its own --help: its usage line and the common options, not the whole list.
for cmd in train local evaluate predict export search; do
  out=$("$TFX_NODE" "$cmd" --help) || fail "$cmd --help"
  echo "$out" | head -1 | grep -q "^usage: tfx-node $cmd " || fail "$cmd --help: $(echo "$out" | head -1)"
  echo "$out" | grep -q "^  $cmd " || fail "$cmd --help lacks its usage line"
  ! echo "$out" | grep -q "^  keygen " || fail "$cmd --help prints every command"
  echo "$out" | grep -q "^options:" || fail "$cmd --help lacks the options"
  ! echo "$out" | grep -q "^  --role=" || fail "$cmd --help lists the roles' options, which it does not take"
done
"$TFX_NODE" export --help | grep -q "^  --run-dir=" || fail "export --help lacks --run-dir"
"$TFX_NODE" export --help | grep -q "^  --http-port=" && fail "export --help lists --http-port"
"$TFX_NODE" local --help | grep -q "^  --http-port=" || fail "local --help lacks --http-port"
"$TFX_NODE" --help train | head -1 | grep -q "^usage: tfx-node train " || fail "--help train is train's help"

p0=$(free_port); p1=$(free_port); p2=$(free_port)
tfc="{\"cluster\":{\"chief\":[\"127.0.0.1:$p0\"],\"ps\":[\"127.0.0.1:$p1\"],\"worker\":[\"127.0.0.1:$p2\"]},\"task\":{\"type\":\"ps\",\"index\":0},\"environment\":\"cloud\"}"
hp=$(free_port)
TF_CONFIG=$tfc "$TFX_NODE" --http-port "$hp" >"$WORK/ps.log" 2>&1 &
pid=$!; PIDS+=($pid)
for _ in $(seq 1 50); do "$TFX_NODE" status --address "127.0.0.1:$p1" >"$WORK/status.txt" 2>&1 && break; sleep 0.2; done
grep -q "role=ps index=0 state=waiting-for-plan" "$WORK/status.txt" || fail "status: $(cat "$WORK/status.txt")"
"$TFX_FUZZER" "127.0.0.1:$p1" 500 >"$WORK/fuzz.log" 2>&1 || fail "fuzzer: $(tail -1 "$WORK/fuzz.log")"
kill -0 "$pid" || fail "ps died under random frames"
"$TFX_NODE" status --address "127.0.0.1:$p1" >"$WORK/status2.txt" 2>&1 || fail "ps stopped answering after random frames"
grep -q "bad_frames=[1-9]" "$WORK/status2.txt" || fail "bad frames not counted: $(cat "$WORK/status2.txt")"
grep -q "shards=0" "$WORK/status2.txt" || fail "random frames changed state: $(cat "$WORK/status2.txt")"
curl -sf "http://127.0.0.1:$hp/metrics" | grep -q '^tfx_ps_bad_frames_total{role="ps",index="0"} [1-9]' || fail "ps /metrics does not count the bad frames"
curl -sf "http://127.0.0.1:$hp/status" | python3 -c "import json,sys; d=json.load(sys.stdin); assert d['role']=='ps' and d['state']=='waiting-for-plan', d" || fail "ps /status"
kill -TERM "$pid"
wait_exit 60 "$pid"; rc=$?
[ "$rc" = 124 ] && fail "ps still running 60 s after SIGTERM"
[ "$rc" = 0 ] || fail "ps exited $rc after SIGTERM"
grep -q "PS-STOP" "$WORK/ps.log" || fail "no PS-STOP log line"
# sd_notify: a ps under a (simulated) Type=notify unit says READY and reports its state.
sock=$WORK/notify.sock
python3 - "$sock" >"$WORK/notify.txt" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind(sys.argv[1]); s.settimeout(10)
end = time.time() + 10
while time.time() < end:
    try: msg = s.recv(4096).decode()
    except socket.timeout: break
    print(msg.replace("\n", " | "), flush=True)
    if "READY=1" in msg: break
PY
lpid=$!
for _ in $(seq 1 50); do [ -S "$sock" ] && break; sleep 0.1; done
p3=$(free_port)
NOTIFY_SOCKET=$sock TF_CONFIG="{\"cluster\":{\"ps\":[\"127.0.0.1:$p3\"]},\"task\":{\"type\":\"ps\",\"index\":0}}" "$TFX_NODE" >"$WORK/ps2.log" 2>&1 &
pid2=$!; PIDS+=($pid2)
wait "$lpid"
kill -TERM "$pid2"; wait "$pid2"
grep -q "READY=1 | STATUS=ps: waiting for the plan" "$WORK/notify.txt" || fail "no sd_notify READY: $(cat "$WORK/notify.txt")"
pass "foundation"
