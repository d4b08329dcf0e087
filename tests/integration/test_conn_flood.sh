#!/bin/bash
# File descriptors under a connection flood (#30 item 13): with the default soft limit of 1024 open files,
# 1500 idle TCP connections to ps 0 of a training cluster used to exhaust the ps (its I/O thread at 100%, status
# unanswered, a checkpoint failing with "Too many open files"). tfx-node raises its soft RLIMIT_NOFILE to the hard
# limit at start, so while 1500 connections are held the ps answers status, training goes on, a checkpoint is
# written, and the run stops cleanly.
. "$(dirname "$0")/lib.sh"
N_CONN=1500
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge $((N_CONN + 600)) ] || skip "the hard open-file limit ($hard) is below $((N_CONN + 600))"
ulimit -Sn 1024 # what a default system gives a process; the cluster starts with it
experiment "$WORK/exp.json" training.max_steps=100000 eval.every_steps=0 checkpoint.every_steps=100 \
  checkpoint.min_interval_secs=0 training.report_every=50 cluster.local_transport=tcp
start_ps_cluster "$WORK/exp.json"
export TFX_SECURITY_SERVER_KEY=$RUN/keys/server.key TFX_SECURITY_CLIENT_KEY=$RUN/keys/client.key
limit=$(awk '/Max open files/ {print $4}' "/proc/$PS_PID/limits")
[ "$limit" = unlimited ] || [ "$limit" -gt 1024 ] || fail "ps 0 kept the soft open-file limit of $limit"
# The flood: N_CONN idle connections to ps 0, held until the file $WORK/release appears.
python3 - "$PS_ADDR" "$N_CONN" "$WORK/release" >"$WORK/conns.txt" 2>&1 <<'PY' &
import os, resource, socket, sys, time
addr, n, release = sys.argv[1], int(sys.argv[2]), sys.argv[3]
host, port = addr.replace("tcp://", "").rsplit(":", 1)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
conns = []
for _ in range(n):
    s = socket.create_connection((host, int(port)), timeout=10)
    conns.append(s)
print("held", len(conns), flush=True)
while not os.path.exists(release):
    time.sleep(0.2)
PY
FL=$!
PIDS+=($FL)
wait_for 120 grep -q "held $N_CONN" "$WORK/conns.txt" || fail "the flood did not open $N_CONN connections: $(cat "$WORK/conns.txt")"
open=$(ls "/proc/$PS_PID/fd" | wc -l)
# (the newest complete checkpoint: a directory still being written has no manifest yet)
step0=$(step); [ "$step0" != none ] || step0=0; ck0=$(ls -d "$RUN"/checkpoints/ckpt-*/manifest.json 2>/dev/null | tail -1)
out=$("$TFX_NODE" status --address "$PS_ADDR" 2>&1) || fail "ps 0 did not answer status under $N_CONN connections: $out"
wait_for 300 sh -c "[ \"\$(ls -d '$RUN'/checkpoints/ckpt-*/manifest.json 2>/dev/null | tail -1)\" != '$ck0' ]" ||
  fail "no new checkpoint under the flood (newest $ck0)"
stepped() { [ "$(step)" != none ] && [ "$(step)" -gt "$step0" ]; }
wait_for 300 stepped
step1=$(step)
[ "$step1" -gt "$step0" ] || fail "training stalled under the flood (step $step0 -> $step1)"
grep -l "Too many open files" "$RUN"/logs/*.log && fail "a process ran out of file descriptors"
touch "$WORK/release"
kill -TERM "$LP"
wait "$LP" || fail "the run did not stop cleanly after the flood: $(tail -3 "$WORK/local.log")"
pass "ps 0 (open-file limit $limit) held $open descriptors under $N_CONN idle connections, answered status, wrote a checkpoint, and trained from step $step0 to $step1"
