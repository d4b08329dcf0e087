# Docker helpers for scripts/docker-*.sh and tests/deploy (source it; bash only).
#
#   tfx_docker_up     use the engine that `docker` reaches (DOCKER_HOST or the system socket); if none answers,
#                     start a private dockerd and export DOCKER_HOST for it. Returns 2 when no engine can be had
#                     here (not root, docker.io missing, no cgroup file system), with the reason in TFX_DOCKER_WHY.
#   tfx_docker_down   stop the private dockerd, if tfx_docker_up started one.
#   dk ARGS...        the docker CLI (Debian's docker.io client when present: it matches Debian's engine).
#
# The private engine keeps its images in a persistent data root (TFX_DOCKER_ROOT, default
# ~/.cache/tfx/docker), so the base image and the build cache survive from one run to the next; an flock on
# that root lets only one private engine use it at a time (a second caller waits). Its socket and exec root are
# in a fresh directory under /tmp. It runs without iptables rules and without the default bridge (docker0):
# image builds use --network host, and compose makes its own user-defined bridge. The VM lacks
# CAP_SYS_RESOURCE, so containers get the caller's hard open-files limit instead of Docker's 1048576.

DOCKER_CLI=${DOCKER_CLI:-$(command -v /usr/bin/docker || command -v docker || echo docker)}
TFX_DOCKER_ROOT=${TFX_DOCKER_ROOT:-$HOME/.cache/tfx/docker}
TFX_DOCKER_PID=""
TFX_DOCKER_RUN=""
TFX_DOCKER_WHY=""

# dk ARGS...: runs the docker CLI.
dk() { "$DOCKER_CLI" "$@"; }

# docker_answers: exit 0 when an engine answers within 10 s.
docker_answers() { timeout 10 "$DOCKER_CLI" version --format '{{.Server.Version}}' >/dev/null 2>&1; }

# nofile_limit: "soft:hard" open-files limit for containers (the caller's hard limit; a number, never unlimited).
nofile_limit() {
  local h
  h=$(ulimit -Hn)
  [ "$h" = unlimited ] && h=1048576
  echo "$h:$h"
}

tfx_docker_up() {
  if docker_answers; then
    echo "docker: using the engine at ${DOCKER_HOST:-the default socket}"
    return 0
  fi
  [ "$(id -u)" = 0 ] || { TFX_DOCKER_WHY="no docker engine answers and a private dockerd needs root"; return 2; }
  command -v dockerd >/dev/null || { TFX_DOCKER_WHY="no docker engine answers and dockerd is not installed (apt-get install docker.io)"; return 2; }
  [ -x "$DOCKER_CLI" ] || command -v "$DOCKER_CLI" >/dev/null || { TFX_DOCKER_WHY="the docker CLI is not installed"; return 2; }
  # dockerd needs the control-group file system; a chroot or a container without /sys/fs/cgroup has none.
  awk '$2 == "/sys/fs/cgroup" || index($2, "/sys/fs/cgroup/") == 1 { found = 1 } END { exit !found }' /proc/self/mounts ||
    { TFX_DOCKER_WHY="no cgroup file system is mounted at /sys/fs/cgroup (a chroot?): dockerd cannot run here"; return 2; }
  mkdir -p "$TFX_DOCKER_ROOT"
  exec {TFX_DOCKER_LOCK}>"$TFX_DOCKER_ROOT/lock"
  if ! flock -n "$TFX_DOCKER_LOCK"; then
    echo "docker: waiting for another private engine on $TFX_DOCKER_ROOT to finish"
    flock -w 1800 "$TFX_DOCKER_LOCK" || { echo "docker: $TFX_DOCKER_ROOT stayed locked for 30 min"; return 1; }
  fi
  start_private_engine
}

# start_private_engine: dockerd on TFX_DOCKER_ROOT, socket under a fresh /tmp directory (short: unix socket paths
# are limited to 108 bytes); exports DOCKER_HOST once it answers.
start_private_engine() {
  TFX_DOCKER_RUN=$(mktemp -d /tmp/tfxd.XXXXXX)
  dockerd --data-root "$TFX_DOCKER_ROOT/data" --exec-root "$TFX_DOCKER_RUN/x" \
    -H "unix://$TFX_DOCKER_RUN/docker.sock" --pidfile "$TFX_DOCKER_RUN/dockerd.pid" \
    --iptables=false --ip6tables=false --bridge=none \
    --default-ulimit "nofile=$(nofile_limit)" >"$TFX_DOCKER_RUN/dockerd.log" 2>&1 &
  TFX_DOCKER_PID=$!
  export DOCKER_HOST=unix://$TFX_DOCKER_RUN/docker.sock
  export TFX_DOCKER_PRIVATE=1   # tells child scripts that the engine and its images are ours
  local i
  for i in $(seq 1 120); do
    docker_answers && { echo "docker: private engine (pid $TFX_DOCKER_PID) at $DOCKER_HOST, data root $TFX_DOCKER_ROOT/data"; return 0; }
    kill -0 "$TFX_DOCKER_PID" 2>/dev/null || break
    sleep 0.5
  done
  echo "docker: the private dockerd did not come up; its log ends:"
  tail -15 "$TFX_DOCKER_RUN/dockerd.log"
  tfx_docker_down
  return 1
}

tfx_docker_down() {
  [ -n "$TFX_DOCKER_PID" ] || return 0
  local i
  # (Every step may fail harmlessly: callers run under set -e, and this runs from their EXIT traps.)
  kill -TERM "$TFX_DOCKER_PID" 2>/dev/null || true
  for i in $(seq 1 60); do kill -0 "$TFX_DOCKER_PID" 2>/dev/null || break; sleep 0.5; done
  kill -KILL "$TFX_DOCKER_PID" 2>/dev/null || true
  wait "$TFX_DOCKER_PID" 2>/dev/null || true
  # dockerd leaves the host network namespace's bind mount (x/netns/default) behind: unmount what is left
  # below our directory, deepest first, and never delete through a mount that is still there.
  awk -v d="$TFX_DOCKER_RUN/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || true
  done
  if ! grep -q " $TFX_DOCKER_RUN/" /proc/self/mounts; then rm -rf "$TFX_DOCKER_RUN" || true; fi
  TFX_DOCKER_PID=""
  unset DOCKER_HOST TFX_DOCKER_PRIVATE
  if [ -n "${TFX_DOCKER_LOCK:-}" ]; then exec {TFX_DOCKER_LOCK}>&-; fi
  return 0
}
