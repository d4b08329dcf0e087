# Shared by the deployment tests (tests/deploy/test_*.sh): the integration helpers (lib.sh: WORK, fail, pass,
# metric, ge, experiment, wait_for) plus a Docker engine (scripts/docker-lib.sh) that the test gives back on exit.
#
# skip REASON: prints "SKIP: REASON" and exits 77, which CTest reports as skipped (SKIP_RETURN_CODE). Tests skip
# only when this machine cannot run the thing at all (not root, no cgroups, an unprivileged container); a tool
# that scripts/install-deps.sh installs but is missing, or anything that starts and then
# misbehaves is a failure.
: "${TFX_TEST_TIMEOUT:=1100}" # the watchdog of lib.sh, under CTest's 1200 s for deploy tests
. "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"
. "$SRC/scripts/docker-lib.sh"

skip() { echo "SKIP: $*"; exit 77; }

# Cleanup steps run newest first on exit, then the engine is given back, then lib.sh's cleanup.
ON_EXIT=()
at_exit() { ON_EXIT=("$*" "${ON_EXIT[@]}"); }
deploy_cleanup() {
  local rc=$? step
  trap '' TERM INT HUP
  for step in "${ON_EXIT[@]}"; do eval "$step" >/dev/null 2>&1; done
  tfx_docker_down
  cleanup "$rc"
}
trap deploy_cleanup EXIT
trap 'exit 143' TERM INT HUP

# unprivileged FILE WHAT: skips the test, in the engine's own words, when FILE (an engine's output) says this
# container may not make the namespaces WHAT needs ("Error creating mount namespace before pivot: operation not
# permitted": an unprivileged container, where the engine starts but neither imports a layer nor runs a container).
unprivileged() {
  grep -q "operation not permitted" "$1" &&
    skip "the docker engine cannot $2 here (an unprivileged container?): $(grep -m1 "operation not permitted" "$1")"
}

# probe_container: a trivial image (/bin/true and its libraries, imported from a tar: no registry, no build) is
# imported and runs as a container, or the test skips naming why when the engine cannot make the namespaces either
# needs (unprivileged). Any other failure is one.
probe_container() {
  local root=$WORK/probe-root f
  for f in /bin/true $(ldd /bin/true | grep -o '/[^ ]*'); do
    mkdir -p "$root$(dirname "$f")" && cp -L "$f" "$root$f" || fail "probe image: cannot copy $f"
  done
  if ! tar -C "$root" -c . | dk import - tfx-probe:latest >"$WORK/probe.txt" 2>&1; then
    unprivileged "$WORK/probe.txt" "import an image"
    fail "docker import: $(cat "$WORK/probe.txt")"
  fi
  at_exit "dk rmi -f tfx-probe:latest"
  dk run --rm --network none tfx-probe:latest /bin/true >"$WORK/probe.txt" 2>&1 && return 0
  unprivileged "$WORK/probe.txt" "start a container"
  fail "a trivial container (/bin/true) did not run: $(tail -3 "$WORK/probe.txt")"
}

# need_docker: an engine to use (or skip with the reason), and the images built by scripts/docker-build.sh ARGS.
need_docker() {
  [ "$(id -u)" = 0 ] || [ -n "${DOCKER_HOST:-}" ] || skip "not root and no DOCKER_HOST: cannot start a private dockerd"
  local t
  # A missing tool is not the machine's limit: scripts/install-deps.sh installs them, so CI lacking one fails.
  for t in docker-compose debootstrap python3; do
    command -v "$t" >/dev/null || fail "$t is not installed (scripts/install-deps.sh test installs it)"
  done
  local rc=0
  tfx_docker_up || rc=$?
  [ "$rc" = 2 ] && skip "$TFX_DOCKER_WHY"
  [ "$rc" = 0 ] || fail "cannot start a Docker engine"
  probe_container
  bash "$SRC/scripts/docker-build.sh" "$@" || fail "scripts/docker-build.sh $* failed"
}

