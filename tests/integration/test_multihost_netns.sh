#!/bin/bash
# Multi-host: every role runs in its own network namespace with its own address, as on separate machines.
# Five role namespaces (chief, ps0, ps1, worker0, worker1) hang off a bridge that lives in a sixth namespace;
# the test creates all six (unique names per run) and deletes them on exit. TF_CONFIG names only those
# addresses, every role uses the same port (possible only on distinct hosts), and the short run completes.
# Afterwards the kernel's counters say where the traffic went: across every role's link, and never over
# loopback. No link is made in the caller's namespace, and no traffic leaves the namespaces of the test.
# Needs root (CAP_NET_ADMIN) and iproute2; prints SKIP and exits 77 (CTest: skipped) only when the machine cannot do that.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || skip "not root: network namespaces need CAP_NET_ADMIN"
command -v ip >/dev/null || skip "iproute2 ('ip') is not installed"

TAG=tfx-mh-$$-$RANDOM            # namespace prefix, unique per run
BR=$TAG-br                       # the namespace holding the bridge (the "switch")
ROLES=(chief ps0 ps1 worker0 worker1)
declare -A ADDR=([chief]=10.213.0.10 [ps0]=10.213.0.20 [ps1]=10.213.0.21 [worker0]=10.213.0.30 [worker1]=10.213.0.31)
PORT=2222
MADE=()                          # namespaces this run created, deleted by the trap

netns_cleanup() {
  local ns p
  trap '' TERM INT HUP           # a second signal must not cut the cleanup short
  { for ns in "${MADE[@]}"; do   # kill what still runs inside our namespaces (by pid), then drop them
      for p in $(ip netns pids "$ns"); do kill -9 "$p"; done
    done
    for p in "${PIDS[@]}"; do kill -9 "$p"; wait "$p"; done
  } 2>/dev/null                  # (quiet: bash's "Killed" notices)
  for ns in "${MADE[@]}"; do [ -e "/run/netns/$ns" ] && ip netns del "$ns"; done
}
trap 'rc=$?; netns_cleanup; cleanup $rc' EXIT
trap 'exit 143' TERM INT HUP     # run the EXIT trap on a watchdog's signal too

# mkns NAME: recorded before it exists, so that a signal between the two cannot leak it.
mkns() { MADE+=("$1"); ip netns add "$1" 2>"$WORK/netns.err" || { unset 'MADE[-1]'; return 1; }; }
mkns "$BR" || skip "cannot create a network namespace: $(cat "$WORK/netns.err")"
ip -n "$BR" link add br0 type bridge 2>"$WORK/netns.err" || skip "no bridge support: $(cat "$WORK/netns.err")"
ip -n "$BR" link set lo up && ip -n "$BR" link set br0 up || fail "bring up the bridge"
i=0
for r in "${ROLES[@]}"; do
  ns=$TAG-$r
  mkns "$ns" || fail "ip netns add $ns: $(cat "$WORK/netns.err")"
  # The veth pair is born in the bridge namespace, its far end moved straight into the role's namespace.
  ip -n "$BR" link add "p$i" type veth peer name eth0 netns "$ns" 2>"$WORK/netns.err" \
    || { [ "$i" = 0 ] && skip "no veth support: $(cat "$WORK/netns.err")"; fail "veth for $r: $(cat "$WORK/netns.err")"; }
  ip -n "$BR" link set "p$i" master br0 && ip -n "$BR" link set "p$i" up || fail "attach p$i to the bridge"
  ip -n "$ns" link set lo up && ip -n "$ns" addr add "${ADDR[$r]}/24" dev eth0 && ip -n "$ns" link set eth0 up \
    || fail "configure $r"
  i=$((i + 1))
done
# Wait until every link is up at both ends (with STP off, bridge ports forward as soon as they are up).
up() { [ "$(ip netns exec "$1" cat "/sys/class/net/$2/operstate")" = up ]; }
i=0
for r in "${ROLES[@]}"; do
  ok=0
  for _ in $(seq 1 50); do up "$TAG-$r" eth0 && up "$BR" "p$i" && { ok=1; break; }; sleep 0.1; done
  [ "$ok" = 1 ] || fail "$r's link is not up"
  i=$((i + 1))
done

lo_bytes() { ip netns exec "$1" cat /sys/class/net/lo/statistics/tx_bytes; }
declare -A LO0
for r in "${ROLES[@]}"; do LO0[$r]=$(lo_bytes "$TAG-$r"); done

experiment "$WORK/exp.json" training.max_steps=150 eval.every_steps=0 training.report_every=50 || fail "cannot write the experiment"
a() { echo "\"${ADDR[$1]}:$PORT\""; }
cluster="\"cluster\":{\"chief\":[$(a chief)],\"ps\":[$(a ps0),$(a ps1)],\"worker\":[$(a worker0),$(a worker1)]}"
start() { # start ROLE TYPE INDEX ARGS...: tfx-node inside ROLE's namespace
  local r=$1 type=$2 index=$3; shift 3
  timeout -k 5 120 ip netns exec "$TAG-$r" env TF_CONFIG="{$cluster,\"task\":{\"type\":\"$type\",\"index\":$index}}" \
    "$TFX_NODE" --run-dir "$WORK/run" "$@" >"$WORK/$r.log" 2>&1 &
  PIDS+=($!); NAMES+=("$r")
}
NAMES=()
start ps0 ps 0
start ps1 ps 1
start worker0 worker 0
start worker1 worker 1
start chief chief 0 --config "$WORK/exp.json"
for i in 4 0 1 2 3; do           # the chief first: the run is done when it exits
  wait "${PIDS[$i]}"; rc=$?
  [ "$rc" = 124 ] && fail "${NAMES[$i]} still running after 120 s"
  [ "$rc" = 0 ] || fail "${NAMES[$i]} exited $rc"
done

# The chief reached each ps at its own namespace's address, not at loopback.
for p in 0 1; do
  grep -q "MASTER-PS-UP.*ps $p at tcp://${ADDR[ps$p]}:$PORT answers" "$WORK/chief.log" \
    || fail "the chief's log does not show ps $p answering at ${ADDR[ps$p]}:$PORT"
done
grep -q "MASTER-START.*listening on tcp://\*:$PORT; 2 ps, 2 worker(s)" "$WORK/chief.log" || fail "no MASTER-START for 2 ps, 2 workers"
for w in 0 1; do grep -q "MASTER-REGISTER worker $w registered" "$WORK/chief.log" || fail "worker $w never registered"; done
for w in 0 1; do grep -q "WORKER-DONE" "$WORK/worker$w.log" || fail "worker $w did not finish"; done
for p in 0 1; do grep -q "PS-STOP" "$WORK/ps$p.log" || fail "ps $p did not stop cleanly"; done
if grep -n "127\.0\.0\.1\|localhost" "$WORK"/*.log; then fail "a log names loopback"; fi
acc=$(metric "$WORK/run/metrics.jsonl" eval accuracy)
ge "$acc" 0.6 || fail "accuracy $acc after 150 steps"

# The kernel's view: every role's link carried traffic through the bridge, and no loopback carried any.
i=0
for r in "${ROLES[@]}"; do
  rx=$(ip netns exec "$BR" cat "/sys/class/net/p$i/statistics/rx_bytes")
  tx=$(ip netns exec "$BR" cat "/sys/class/net/p$i/statistics/tx_bytes")
  [ "$rx" -gt 4096 ] && [ "$tx" -gt 4096 ] || fail "$r's link carried little: rx $rx tx $tx bytes"
  lo=$(( $(lo_bytes "$TAG-$r") - ${LO0[$r]} ))
  [ "$lo" = 0 ] || fail "$r sent $lo bytes over loopback"
  i=$((i + 1))
done
pass "5 roles in 5 network namespaces at 10.213.0.0/24, all on port $PORT, trained over the bridge, none over loopback (accuracy $acc)"
