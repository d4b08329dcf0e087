#!/bin/bash
# Resource limits under a flood: while a local cluster trains, one client floods ps 0 with PULL requests (each
# answered with every variable it holds) and another with STATUS requests, never reading a reply. The ps stays
# fair and bounded: the flood is real (each flooder sent requests, and the ps's pulls_served counter rose by more
# than the workers' own pulls), a third client's STATUS requests are all answered (within 2 s, judged only
# without ASan), training goes on, the ps's RSS (sampled every second) grows by no more than its send queue can
# hold (replies to a peer that does not read stop at the high-water mark of 1000 messages per peer, each at most
# the ps's bytes), and the run finishes with exit 0.
. "$(dirname "$0")/lib.sh"
: "${TFX_FLOOD:?set TFX_FLOOD to the tfx-flood binary}"
FLOOD_S=${TFX_FLOOD_SECONDS:-20}
# A small ASan quarantine, so that RSS measures what the ps holds rather than freed memory kept for checking.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16
experiment "$WORK/exp.json" training.max_steps=100000 eval.every_steps=0 checkpoint.every_steps=0 \
  training.report_every=50 cluster.request_timeout_s=10 cluster.local_transport=tcp
start_ps_cluster "$WORK/exp.json"
# The flooders and the probe are authenticated clients of the secured cluster (its keys from RUN/keys): the
# flood is about fairness and bounded memory, not about strangers (test_security covers those).
export TFX_SECURITY_SERVER_KEY=$RUN/keys/server.key TFX_SECURITY_CLIENT_KEY=$RUN/keys/client.key
rss() { awk '/^VmRSS/ {print int($2 / 1024)}' "/proc/$PS_PID/status"; }
# ps_stat NAME: a counter of ps 0's status reply.
ps_stat() { "$TFX_NODE" status --address "$PS_ADDR" 2>/dev/null | grep -o "$1=[0-9.]*" | head -1 | cut -d= -f2; }
rss0=$(rss)
step0=$(step)
served0=$(ps_stat pulls_served); bytes=$(ps_stat bytes)
[ -n "$served0" ] && [ -n "$bytes" ] || fail "ps 0's status has no pulls_served or bytes: $("$TFX_NODE" status --address "$PS_ADDR" 2>&1)"
"$TFX_FLOOD" flood "$PS_ADDR" pull "$FLOOD_S" >"$WORK/flood-pull.txt" 2>&1 &
F1=$!
"$TFX_FLOOD" flood "$PS_ADDR" status "$FLOOD_S" >"$WORK/flood-status.txt" 2>&1 &
F2=$!
PIDS+=($F1 $F2)
"$TFX_FLOOD" probe "$PS_ADDR" $((FLOOD_S * 2)) 500 >"$WORK/probe.txt" 2>&1 &
PR=$!
PIDS+=($PR)
peak=$rss0 series=""
while kill -0 "$F1" 2>/dev/null; do
  r=$(rss); [ "$r" -gt "$peak" ] && peak=$r
  series+=" $r"
  sleep 1
done
wait "$F1" "$F2" || fail "the flooder failed: $(cat "$WORK"/flood-*.txt)"
wait "$PR" || fail "the probe failed: $(cat "$WORK/probe.txt")"
step1=$(step)
served1=$(ps_stat pulls_served)
cat "$WORK"/flood-*.txt "$WORK/probe.txt"
echo "ps RSS (MB) before: $rss0; every second of the flood:$series"
kill -0 "$PS_PID" 2>/dev/null || fail "ps 0 died under the flood"
grep -q "answered $((FLOOD_S * 2)) of $((FLOOD_S * 2))," "$WORK/probe.txt" || fail "a status request went unanswered: $(cat "$WORK/probe.txt")"
for k in pull status; do
  n=$(sed -n "s/^sent \([0-9]*\) $k requests.*/\1/p" "$WORK/flood-$k.txt")
  [ -n "$n" ] && [ "$n" -ge 100 ] || fail "the $k flooder sent ${n:-no} requests: $(cat "$WORK/flood-$k.txt")"
done
# Each training step is one pull per worker (2): what the ps served beyond that came from the flood.
flood_pulls=$(( ${served1%.*} - ${served0%.*} - 2 * (step1 - step0) ))
[ "$flood_pulls" -ge 50 ] || fail "the ps served $flood_pulls flood pulls ($served0 -> $served1 served, steps $step0 -> $step1)"
lat=$(sed -n 's/.*max latency \([0-9]*\) ms/\1/p' "$WORK/probe.txt")
if ldd "$TFX_NODE" | grep -q libasan; then
  echo "latency not judged under ASan (max $lat ms)"
else
  [ "$lat" -le 2000 ] || fail "a status request waited $lat ms behind the flood"
fi
# The bound: the pull flooder's send queue (1000 replies of at most the ps's bytes) plus the status flooder's and
# the request queues (small messages), and 64 MB for the allocator.
limit=$(( (1000 * ${bytes%.*} >> 20) + 64 ))
[ $((peak - rss0)) -le "$limit" ] || fail "ps RSS grew from $rss0 MB to $peak MB under the flood (bound $limit MB)"
[ "$step1" -gt "$step0" ] || fail "training stalled under the flood (step $step0 -> $step1)"
kill -TERM "$LP"
wait "$LP" || fail "the run did not stop cleanly after the flood: $(tail -3 "$WORK/local.log")"
pass "ps served $flood_pulls flood pulls and answered every probe (max $lat ms), RSS $rss0 -> peak $peak MB (bound $limit), training went from step $step0 to $step1"
