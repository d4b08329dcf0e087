#!/bin/bash
# Memory before authentication: a stranger who reaches a ps's TCP port sends a ZMTP greeting offering CURVE and a
# frame header claiming 1.1 GB, then streams zeros, on three connections at once. Every socket accepts messages up
# to the bound its experiment implies (ZMQ_MAXMSGSIZE, src/net/net.c), so the ps closes each connection at the
# header: its RSS (sampled every 0.2 s) stays within 64 MB of its size before, training goes on, and the run
# finishes with exit 0. (At the old 2 GiB bound the three connections grew the ps by 256 MB each, what the
# intruder sends at most.)
. "$(dirname "$0")/lib.sh"
: "${TFX_INTRUDER:?set TFX_INTRUDER to the tfx-intruder binary}"
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16
experiment "$WORK/exp.json" training.max_steps=100000 eval.every_steps=0 checkpoint.every_steps=0 \
  training.report_every=50 cluster.local_transport=tcp
start_ps_cluster "$WORK/exp.json"
grep -q "NET-CURVE" "$RUN/logs/ps-0.log" || fail "ps 0 is not CURVE-secured: $(head -3 "$RUN/logs/ps-0.log")"
rss() { awk '/^VmRSS/ {print int($2 / 1024)}' "/proc/$PS_PID/status"; }
rss0=$(rss) step0=$(step)
"$TFX_INTRUDER" "$PS_ADDR" huge-frame 3 >"$WORK/intruder.txt" 2>&1 &
IP=$!
PIDS+=($IP)
peak=$rss0
while kill -0 "$IP" 2>/dev/null; do
  r=$(rss); [ "$r" -gt "$peak" ] && peak=$r
  sleep 0.2
done
wait "$IP" || fail "the intruder failed: $(cat "$WORK/intruder.txt")"
cat "$WORK/intruder.txt"
echo "ps RSS (MB): $rss0 before, $peak at most while the intruder sent"
kill -0 "$PS_PID" 2>/dev/null || fail "ps 0 died"
[ $((peak - rss0)) -le 64 ] || fail "ps RSS grew from $rss0 MB to $peak MB before any authentication"
grep -q "huge-frame: 3 of 3 connections closed" "$WORK/intruder.txt" || fail "the ps kept a huge frame's connection open"
for _ in $(seq 1 50); do [ "$(step)" -gt "$step0" ] && break; sleep 0.2; done
step1=$(step)
[ "$step1" -gt "$step0" ] || fail "training stalled (step $step0 -> $step1)"
kill -TERM "$LP"
wait "$LP" || fail "the run did not stop cleanly: $(tail -3 "$WORK/local.log")"

# A ps started from TF_CONFIG alone has no experiment to size its socket by: it accepts what
# TFX_CLUSTER_MAX_MESSAGE_BYTES says (else 64 MiB), fixed at bind. An experiment needing more is refused at INIT,
# naming the size to set, and the chief stops with that message (exit 2) instead of workers losing connections.
experiment "$WORK/small.json" training.max_steps=20 eval.every_steps=0 checkpoint.every_steps=0 \
  cluster.register_timeout_s=20 cluster.request_timeout_s=10
ports=()
for _ in 1 2 3; do ports+=("$(free_port)"); done
cluster="\"chief\":[\"127.0.0.1:${ports[0]}\"],\"ps\":[\"127.0.0.1:${ports[1]}\"],\"worker\":[\"127.0.0.1:${ports[2]}\"]"
start() { # TYPE LOG [ARGS...]: a node of that cluster, in the background ($! is its pid)
  local type=$1 log=$2; shift 2
  TF_CONFIG="{\"cluster\":{$cluster},\"task\":{\"type\":\"$type\",\"index\":0}}" "$TFX_NODE" "$@" >"$log" 2>&1 &
}
TFX_CLUSTER_MAX_MESSAGE_BYTES=1000000 start ps "$WORK/ps-small.log" --run-dir "$WORK/tfc"
PS=$!
start worker "$WORK/worker-small.log" --run-dir "$WORK/tfc"
W=$!
PIDS+=($PS $W)
start chief "$WORK/chief-small.log" --config "$WORK/small.json" --run-dir "$WORK/tfc"
C=$!
PIDS+=($C)
wait "$C"
rc=$?
[ "$rc" = 2 ] || fail "the chief exited $rc with a ps too small for its experiment: $(tail -3 "$WORK/chief-small.log")"
grep -q "NET-MAX-MESSAGE every socket accepts frames up to 1000000 bytes" "$WORK/ps-small.log" ||
  fail "the ps did not take TFX_CLUSTER_MAX_MESSAGE_BYTES: $(head -5 "$WORK/ps-small.log")"
grep -q "this ps accepts 1000000 .*TFX_CLUSTER_MAX_MESSAGE_BYTES=[0-9]" "$WORK/chief-small.log" ||
  fail "the chief's error does not say what to set: $(tail -2 "$WORK/chief-small.log")"
kill "$PS" "$W" 2>/dev/null
wait "$PS" "$W" 2>/dev/null
# The same cluster with a ps at the default bound trains.
start ps "$WORK/ps-default.log" --run-dir "$WORK/tfc"
PS=$!
start worker "$WORK/worker-default.log" --run-dir "$WORK/tfc"
W=$!
start chief "$WORK/chief-default.log" --config "$WORK/small.json" --run-dir "$WORK/tfc" --fresh
C=$!
PIDS+=($PS $W $C)
wait "$C" || fail "the chief failed with a ps at the default bound: $(tail -3 "$WORK/chief-default.log")"
grep -q "NET-MAX-MESSAGE every socket accepts frames up to 67108864 bytes (the default" "$WORK/ps-default.log" ||
  fail "the ps given no experiment did not take the 64 MiB default: $(head -5 "$WORK/ps-default.log")"
pass "3 connections claiming 1.1 GB closed at the header, ps RSS $rss0 -> at most $peak MB, training went from step $step0 to $step1; a ps too small for the experiment refused its INIT naming the size"
