#!/bin/bash
# CURVE: keygen writes key pairs (secret 0600, never overwritten); loose secret keys are refused naming file and
# mode; in a secured TF_CONFIG cluster (master + ps, the worker not yet started) clients without a key, with an
# unknown key, or with the wrong server key get 0 of N status/register/pull/push attempts through, the cluster's
# state is unchanged and the refusals are logged and counted; then the worker joins with the cluster's keys and
# the run trains to the end. `tfx-node local` secures its cluster with generated keys by default, and
# `status --config RUN/experiment.json` asks it (without keys it cannot).
. "$(dirname "$0")/lib.sh"
: "${TFX_INTRUDER:?set TFX_INTRUDER to the tfx-intruder binary}"
K=$WORK/keys
"$TFX_NODE" keygen --out "$K" --name server >"$WORK/keygen.txt" || fail "keygen"
"$TFX_NODE" keygen --out "$K/nodes" --name node >/dev/null || fail "keygen node"
"$TFX_NODE" keygen --out "$WORK/evil" --name evil >/dev/null || fail "keygen evil"
[ "$(stat -c %a "$K/server.key")" = 600 ] || fail "server.key has mode $(stat -c %a "$K/server.key"), want 600"
[ "$(stat -c %a "$K/server.pub")" = 644 ] || fail "server.pub mode"
grep -q "public key: $K/server.pub" "$WORK/keygen.txt" || fail "keygen output: $(cat "$WORK/keygen.txt")"
grep -q "secret-key" "$K/server.pub" && fail "the .pub file holds the secret key"
before=$(md5sum <"$K/server.key")
out=$("$TFX_NODE" keygen --out "$K" --name server 2>&1) && fail "keygen overwrote a key"
echo "$out" | grep -q "server.pub exists" || fail "keygen over an existing key: $out"
[ "$(md5sum <"$K/server.key")" = "$before" ] || fail "keygen changed an existing key"
out=$("$TFX_NODE" keygen --name x 2>&1) && fail "keygen without --out"
echo "$out" | grep -qF "keygen needs --out DIR" || fail "keygen without --out failed without naming why: $out"

# A secret key that group or others may read is refused, naming the file and its mode (exit 2, bad input).
cp "$K/server.key" "$WORK/loose.key"; chmod 640 "$WORK/loose.key"
p0=$(free_port)
out=$(TFX_SECURITY_SERVER_KEY=$WORK/loose.key TF_CONFIG="{\"cluster\":{\"ps\":[\"127.0.0.1:$p0\"]},\"task\":{\"type\":\"ps\",\"index\":0}}" \
  timeout 20 "$TFX_NODE" 2>&1); rc=$?
[ "$rc" = 2 ] || fail "a ps with a loose key exited $rc: $out"
echo "$out" | grep -q "key file $WORK/loose.key holds a secret key but has mode 0640" || fail "loose key message: $out"
experiment "$WORK/loose.json" "security.server_key=\"$WORK/loose.key\""
out=$(timeout 20 "$TFX_NODE" local --config "$WORK/loose.json" --run-dir "$WORK/run-loose" 2>&1); rc=$?
[ "$rc" = 2 ] || fail "local with a loose key exited $rc: $out"
echo "$out" | grep -q "mode 0640" || fail "local loose key message: $out"
ls "$WORK/run-loose/logs/"*.log >/dev/null 2>&1 && fail "local started processes despite a loose key"

# A secured TF_CONFIG cluster: every node has the server key and its client key; the servers admit keys/nodes/*.pub.
small_mlp "$WORK/exp.json" training.max_steps=200 eval.every_steps=0 training.report_every=50 \
  cluster.register_timeout_s=300
m0=$(free_port); p0=$(free_port); w0=$(free_port)
cluster="\"cluster\":{\"chief\":[\"127.0.0.1:$m0\"],\"ps\":[\"127.0.0.1:$p0\"],\"worker\":[\"127.0.0.1:$w0\"]}"
export TFX_SECURITY_SERVER_KEY=$K/server.key TFX_SECURITY_CLIENT_KEY=$K/nodes/node.key TFX_SECURITY_AUTHORIZED_KEYS=$K/nodes
start() { # start NAME TYPE ARGS...
  local name=$1 type=$2; shift 2
  TF_CONFIG="{$cluster,\"task\":{\"type\":\"$type\",\"index\":0}}" "$TFX_NODE" --run-dir "$WORK/run" "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
}
start ps ps
start master chief --config "$WORK/exp.json"
for _ in $(seq 1 100); do "$TFX_NODE" status --address "127.0.0.1:$m0" >"$WORK/m-status.txt" 2>&1 && break; sleep 0.2; done
grep -q "role=master .*state=waiting-for-cluster step=0 .*workers_registered=0" "$WORK/m-status.txt" || fail "master status: $(cat "$WORK/m-status.txt")"
grep -q "NET-CURVE" "$WORK/ps.log" || fail "the ps did not log its CURVE setting"
"$TFX_NODE" status --address "127.0.0.1:$p0" >"$WORK/p-before.txt" 2>&1 || fail "ps status with keys: $(cat "$WORK/p-before.txt")"
unset TFX_SECURITY_SERVER_KEY TFX_SECURITY_CLIENT_KEY TFX_SECURITY_AUTHORIZED_KEYS

# The status tool without keys cannot ask, and says why.
out=$("$TFX_NODE" status --address "127.0.0.1:$p0" 2>&1) && fail "status without keys got an answer: $out"
echo "$out" | grep -q "a secured cluster needs its keys" || fail "status without keys: $out"

# Strangers: no key, an unknown key, the right client key with the wrong server key.
N=5
intrude() { # intrude LABEL ADDRESS OP, with the caller's TFX_SECURITY_* environment
  local line; line=$("$TFX_INTRUDER" "127.0.0.1:$2" "$3" $N 2>&1) || fail "intruder $1 $3: $line"
  echo "$1 -> $3 at $2: $line"
  echo "$line" | grep -q "^$3: 0 of $N got through" || fail "$1 got through: $line"
}
for op in status register; do
  intrude "no key" "$m0" $op
  TFX_SECURITY_SERVER_KEY=$K/server.pub TFX_SECURITY_CLIENT_KEY=$WORK/evil/evil.key intrude "unknown key" "$m0" $op
done
for op in status pull push; do
  intrude "no key" "$p0" $op
  TFX_SECURITY_SERVER_KEY=$K/server.pub TFX_SECURITY_CLIENT_KEY=$WORK/evil/evil.key intrude "unknown key" "$p0" $op
  TFX_SECURITY_SERVER_KEY=$WORK/evil/evil.pub TFX_SECURITY_CLIENT_KEY=$K/nodes/node.key intrude "wrong server key" "$p0" $op
done
# The same tool with the cluster's keys does get through (so the zeros above mean something).
line=$(TFX_SECURITY_SERVER_KEY=$K/server.pub TFX_SECURITY_CLIENT_KEY=$K/nodes/node.key "$TFX_INTRUDER" "127.0.0.1:$p0" status $N)
echo "$line" | grep -q "^status: $N of $N got through (CURVE)" || fail "the cluster's own key was refused: $line"

# Nothing changed, and the refusals were counted and logged by both servers.
export TFX_SECURITY_SERVER_KEY=$K/server.pub TFX_SECURITY_CLIENT_KEY=$K/nodes/node.key
"$TFX_NODE" status --address "127.0.0.1:$m0" >"$WORK/m-after.txt" 2>&1 || fail "master status after: $(cat "$WORK/m-after.txt")"
grep -q "state=waiting-for-cluster step=0 .*workers_registered=0" "$WORK/m-after.txt" || fail "strangers changed the master: $(cat "$WORK/m-after.txt")"
"$TFX_NODE" status --address "127.0.0.1:$p0" >"$WORK/p-after.txt" 2>&1 || fail "ps status after"
for f in shards bytes pushes_applied stale_dropped rejected pulls_served bad_frames version; do
  a=$(grep -o " $f=[0-9.e+-]*" "$WORK/p-before.txt"); b=$(grep -o " $f=[0-9.e+-]*" "$WORK/p-after.txt")
  [ "$a" = "$b" ] || fail "strangers changed the ps's $f: before '$a', after '$b'"
done
cut -d' ' -f1-5 "$WORK/p-before.txt" >"$WORK/p1"; cut -d' ' -f1-5 "$WORK/p-after.txt" >"$WORK/p2"
cmp -s "$WORK/p1" "$WORK/p2" || fail "ps state changed: $(cat "$WORK/p1") -> $(cat "$WORK/p2")"
for why in "does not use CURVE" "is not authorized" "does not decrypt"; do
  grep -q "NET-REJECT .*$why" "$WORK/ps.log" || fail "the ps did not log a refusal: $why"
done
grep -q "NET-REJECT .*is not authorized" "$WORK/master.log" || fail "the master did not log the unknown key"
refused=$(grep -o "[0-9]* refused so far" "$WORK/ps.log" | tail -1 | tr -dc 0-9)
[ "${refused:-0}" -ge 8 ] || fail "the ps counted ${refused:-0} refusals, want at least 8"
echo "ps refusals counted: $refused"

# An authenticated but hostile peer: random frames with the cluster's keys are counted as bad frames.
"$TFX_FUZZER" "127.0.0.1:$p0" 100 >"$WORK/fuzz.log" 2>&1 || fail "fuzzer with keys: $(tail -1 "$WORK/fuzz.log")"

# The worker joins with the cluster's keys; the run trains to the end.
export TFX_SECURITY_SERVER_KEY=$K/server.key
start worker worker
wait "${PIDS[2]}" || fail "worker exited non-zero"
wait "${PIDS[1]}" || fail "master exited non-zero"
loss=$(metric "$WORK/run/metrics.jsonl" train loss); step=$(metric "$WORK/run/metrics.jsonl" eval step)
[ "$step" = 200 ] || fail "the secured cluster ended at step $step"
le "$loss" 1.2 || fail "the secured cluster did not learn: loss $loss"
unset TFX_SECURITY_SERVER_KEY TFX_SECURITY_CLIENT_KEY

# tfx-node local over Unix sockets (the default): a private 0700 directory, no keys; another uid cannot connect,
# and the directory is gone when the run ends.
small_mlp "$WORK/ipc.json" training.max_steps=300 eval.every_steps=0 training.report_every=50
timeout 300 "$TFX_NODE" local --config "$WORK/ipc.json" --run-dir "$WORK/run-ipc" --workers 1 --ps 1 >"$WORK/ipc.log" 2>&1 &
ip=$!; PIDS+=($ip)
wait_for 120 grep -q "LOCAL-SPAWN ps 0" "$WORK/ipc.log"
ips=$(grep -o "LOCAL-SPAWN ps 0: pid [0-9]* at unix:[^ ]*" "$WORK/ipc.log" | awk '{print $NF}')
[ -n "$ips" ] || fail "the default local cluster is not on Unix sockets: $(cat "$WORK/ipc.log")"
sockdir=$(dirname "${ips#unix:}")
[ "$(stat -c '%a %u' "$sockdir")" = "700 $(id -u)" ] || fail "socket directory $sockdir: $(stat -c '%a %u' "$sockdir")"
answers() { "$TFX_NODE" status --address "$ips" >"$WORK/i-status.txt" 2>&1; }
wait_for 120 answers
grep -q "role=ps index=0" "$WORK/i-status.txt" || fail "status over the Unix socket: $(cat "$WORK/i-status.txt")"
if [ "$(id -u)" != 0 ]; then
  skip_part "not root: cannot run a client as another uid (the other-user socket check)"
else
  # Another user (nobody) is refused by the kernel before ZeroMQ sees a byte.
  command -v setpriv >/dev/null || fail "setpriv (util-linux) is not installed: the other-user socket check cannot run"
  out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c "
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print('connected')
except OSError as e:
    print('refused:', e.strerror)" "${ips#unix:}" 2>&1)
  echo "$out" | grep -q "refused: Permission denied" || fail "another uid reached the ps socket: $out"
fi
wait "$ip" || fail "ipc local run: $(tail -3 "$WORK/ipc.log")"
grep -q "NET-IPC" "$WORK/run-ipc/logs/ps-0.log" || fail "ps-0 did not say it runs over Unix sockets"
grep -q "NET-PLAINTEXT" "$WORK/run-ipc/logs/"*.log && fail "a Unix-socket cluster warned about plaintext"
[ ! -e "$sockdir" ] || fail "the socket directory $sockdir outlived its run"
[ "$(metric "$WORK/run-ipc/metrics.jsonl" eval step)" = 300 ] || fail "the ipc local run did not finish"

# tfx-node local over TCP: CURVE by default, with keys it generates in RUN/keys.
small_mlp "$WORK/local.json" training.max_steps=300 eval.every_steps=0 training.report_every=50 \
  cluster.local_transport='"tcp"'
timeout 300 "$TFX_NODE" local --config "$WORK/local.json" --run-dir "$WORK/run-local" --workers 1 --ps 1 >"$WORK/local.log" 2>&1 &
lp=$!; PIDS+=($lp)
# While it trains, the status tool asks its ps with the run's own experiment (keys included); without, it cannot.
wait_for 120 grep -q "LOCAL-SPAWN ps 0" "$WORK/local.log"
lps=$(grep -o "LOCAL-SPAWN ps 0: pid [0-9]* at [0-9.:]*" "$WORK/local.log" | awk '{print $NF}')
[ -n "$lps" ] || fail "no LOCAL-SPAWN line for ps 0: $(cat "$WORK/local.log")"
answers_l() { "$TFX_NODE" status --address "$lps" --config "$WORK/run-local/experiment.json" >"$WORK/l-status.txt" 2>&1; }
wait_for 120 answers_l
grep -q "role=ps index=0" "$WORK/l-status.txt" || fail "status --config RUN/experiment.json: $(cat "$WORK/l-status.txt")"
out=$("$TFX_NODE" status --address "$lps" 2>&1) && fail "status without keys got an answer from the secured local cluster"
echo "$out" | grep -q "a secured cluster needs its keys" || fail "status without keys (local cluster): $out"
wait "$lp" || fail "secured local run: $(tail -3 "$WORK/local.log")"
for k in server client; do
  [ "$(stat -c %a "$WORK/run-local/keys/$k.key")" = 600 ] || fail "local $k.key mode $(stat -c %a "$WORK/run-local/keys/$k.key")"
done
[ "$(stat -c %a "$WORK/run-local/keys")" = 700 ] || fail "local keys directory mode"
for f in master-0 ps-0 worker-0; do
  grep -q "NET-CURVE CURVE on every socket" "$WORK/run-local/logs/$f.log" || fail "$f did not use CURVE"
done
[ "$(metric "$WORK/run-local/metrics.jsonl" eval step)" = 300 ] || fail "local secured run did not finish"
grep -q '"server_key": "'"$WORK"'/run-local/keys/server.key"' "$WORK/run-local/experiment.json" || fail "experiment.json lacks the keys"
# The next run of the directory reuses its keys, and checks them: a loosened one stops it before any process starts.
chmod 644 "$WORK/run-local/keys/client.key"
out=$(timeout 60 "$TFX_NODE" local --config "$WORK/local.json" --run-dir "$WORK/run-local" --max-steps 400 2>&1); rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q "run-local/keys/client.key holds a secret key but has mode 0644" ||
  fail "local over a loosened key: exit $rc: $out"
# A ps with no keys at all runs plaintext, with a warning.
p1=$(free_port)
TF_CONFIG="{\"cluster\":{\"ps\":[\"127.0.0.1:$p1\"]},\"task\":{\"type\":\"ps\",\"index\":0}}" "$TFX_NODE" >"$WORK/plain.log" 2>&1 &
pid=$!; PIDS+=($pid)
wait_for 120 grep -q NET-PLAINTEXT "$WORK/plain.log"
grep -q "WARN NET-PLAINTEXT no CURVE keys configured" "$WORK/plain.log" || fail "no plaintext warning: $(cat "$WORK/plain.log")"
kill -TERM "$pid"; wait "$pid"
pass "CURVE: strangers refused and counted, state unchanged, secured clusters train, loose keys refused"
