#!/bin/bash
# Docker Compose for real: builds the image offline (scripts/docker-build.sh: debootstrap base, then
# deploy/docker/Dockerfile), brings up deploy/docker-compose.yml unchanged (master, 2 ps, 2 workers on the
# user-defined network "tfx") with TFX_MAX_STEPS shortening the run, crashes worker1's tfx-node mid-run and
# watches the restart policy bring the container back, then checks that the chief finished the run and that
# the eval accuracy in metrics.jsonl on the shared run volume reaches 0.80, that every node exited 0, and that
# the serve service answers with the final step, and `docker-compose down -v` leaves no container, network or volume of the project behind.
# The data set comes with the image: the runtime stage installs Debian's dataset-fashion-mnist package.
. "$(dirname "$0")/common.sh"

STEPS=1500                       # ~20 s of training on 2 cores: room for a crash in the middle
need_docker

# Name resolution without an outside resolver. Docker's embedded DNS forwards every name it does not know to the
# host's resolvers; here no container can reach one, so such a lookup hangs 20 s. Once a worker has finished,
# its service name is such a name, and libzmq resolves peers in its one I/O thread: the chief's requests to the
# ps would wait behind it. So the test pins each service's address on its network and lists them all in every
# container's /etc/hosts (an override file; deploy/docker-compose.yml itself is used unchanged). The subnet is
# the test's own bridge.
hosts() {
  local s i=10
  echo 'version: "3.7"'
  echo 'services:'
  for s in master ps0 ps1 worker0 worker1; do
    echo "  $s:"
    echo "    networks: {tfx: {ipv4_address: 10.214.0.$i}}"
    echo "    extra_hosts: [master:10.214.0.10, ps0:10.214.0.11, ps1:10.214.0.12, worker0:10.214.0.13, worker1:10.214.0.14]"
    i=$((i + 1))
  done
  echo 'networks: {tfx: {ipam: {config: [{subnet: 10.214.0.0/24}]}}}'
}
hosts >"$WORK/hosts.yml"
COMPOSE=(docker-compose -f "$SRC/deploy/docker-compose.yml" -f "$WORK/hosts.yml" -p "tfxci$$")
"${COMPOSE[@]}" config -q || fail "docker-compose config rejects deploy/docker-compose.yml + the address override"
export TFX_MAX_STEPS=$STEPS
at_exit "${COMPOSE[*]} down -v --remove-orphans -t 5"

c() { echo "tfxci$$_$1_1"; }     # container name of service $1 (compose 1.x naming)
state() { dk inspect -f "$2" "$(c "$1")"; }
logs() { dk logs "$(c "$1")" 2>&1; }

"${COMPOSE[@]}" up -d --no-build >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log"; fail "docker-compose up"; }
net=$(dk network inspect -f '{{.Driver}} {{range .IPAM.Config}}{{.Subnet}}{{end}}' "tfxci$$_tfx") \
  || fail "no network tfxci$$_tfx"
echo "compose: 5 services up on the user-defined network tfxci$$_tfx ($net)"

# The chief's progress lines ("step N/STEPS ...") show training under way; the healthcheck command answers.
trained() { logs master | grep -Eq "^step ([2-9][0-9]{2}|[0-9]{4,})/$STEPS"; }
wait_for 180 trained || { logs master | tail -20; fail "the chief shows no step past 200 within 180 s"; }
dk exec "$(c ps0)" tfx-node status --address 127.0.0.1:2222 >"$WORK/status.txt" 2>&1 \
  || { cat "$WORK/status.txt"; fail "the healthcheck command fails inside ps0"; }

# Mid-run, a crash as Docker sees one: kill -9 of worker1's tfx-node (under the container's init). (`docker kill`
# would count as a manual stop, which Docker exempts from restart policies.) The policy must bring it back, and
# the restarted worker must rejoin the run.
[ "$(state worker1 '{{.RestartCount}}')" = 0 ] || fail "worker1 restarted before the crash"
dk exec "$(c worker1)" bash -c 'for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = tfx-node ] && kill -9 ${p#/proc/}; done; true' \
  || fail "cannot kill worker1's tfx-node"
back() { [ "$(state worker1 '{{.RestartCount}} {{.State.Running}}')" = "1 true" ]; }
wait_for 60 back || fail "worker1 not running again after the crash: $(state worker1 '{{.RestartCount}} {{.State.Status}} {{.State.ExitCode}}')"
echo "compose: worker1 crashed (kill -9 mid-run) and restart: on-failure brought it back"

# The run completes: the chief exits 0, then every other node stops cleanly.
code=$(timeout 300 "$DOCKER_CLI" wait "$(c master)") || code="still running after 300 s"
save_logs() { for s in master ps0 ps1 worker0 worker1; do logs "$s" | grep -v '^step ' >"$WORK/$s.log"; done; }
save_logs                        # (fail prints the tail of each)
[ "$code" = 0 ] || fail "the chief: exit $code"
for s in ps0 ps1 worker0 worker1; do
  stopped() { [ "$(state "$s" '{{.State.Status}}')" = exited ]; }
  wait_for 60 stopped || fail "$s still $(state "$s" '{{.State.Status}}') 60 s after the chief finished"
  [ "$(state "$s" '{{.State.ExitCode}}')" = 0 ] || fail "$s exited $(state "$s" '{{.State.ExitCode}}')"
done
save_logs
grep -q WORKER-DONE "$WORK/worker1.log" || fail "the restarted worker1 never finished"
# The model server beside the cluster follows the run to its final checkpoint (asked from inside its container:
# bash's /dev/tcp, the image has no HTTP client).
served() {
  dk exec "$(c serve)" bash -c 'exec 3<>/dev/tcp/127.0.0.1/8501 && printf "GET /v1/models/fashion_mnist_mlp HTTP/1.0\r\n\r\n" >&3 && cat <&3' \
    2>/dev/null | grep -q "\"step\": $STEPS"
}
wait_for 30 served || { logs serve | tail -5; fail "the serve service does not serve step $STEPS"; }
echo "compose: the serve service serves step $STEPS"
logs master | grep -q "MASTER-REGISTER worker 1" || fail "the chief never registered worker 1"

dk run --rm --network none --entrypoint cat -v "tfxci$$_tfx-run:/run:ro" tfx:latest /run/metrics.jsonl \
  >"$WORK/metrics.jsonl" || fail "cannot read metrics.jsonl from the volume tfxci$$_tfx-run"
step=$(metric "$WORK/metrics.jsonl" eval step)
acc=$(metric "$WORK/metrics.jsonl" eval accuracy)
[ "$step" = "$STEPS" ] || fail "last evaluation at step $step, want $STEPS"
ge "$acc" 0.80 || fail "eval accuracy $acc < 0.80 after $STEPS steps"

"${COMPOSE[@]}" down -v -t 5 >"$WORK/down.log" 2>&1 || { cat "$WORK/down.log"; fail "docker-compose down -v"; }
left=$(dk ps -aq --filter "name=tfxci$$_"; dk network ls -q --filter "name=tfxci$$_"; dk volume ls -q --filter "name=tfxci$$_")
[ -z "$left" ] || fail "docker-compose down -v left: $left"
pass "compose cluster trained $STEPS steps to eval accuracy $acc through a worker crash (restarted by policy); down -v cleaned up"
