# Shared by the deployment tests (tests/deploy/test_*.sh): the integration helpers (lib.sh: WORK, fail, pass,
# metric, ge, experiment, wait_for) plus a Docker engine (scripts/docker-lib.sh) that the test gives back on exit.
#
# skip REASON: prints "SKIP: REASON" and exits 77, which CTest reports as skipped (SKIP_RETURN_CODE). Tests skip
# only when this machine cannot run the thing at all (not root, a tool missing); anything that starts and then
# misbehaves is a failure.
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

# need_docker: an engine to use (or skip with the reason), and the images built by scripts/docker-build.sh ARGS.
need_docker() {
  [ "$(id -u)" = 0 ] || [ -n "${DOCKER_HOST:-}" ] || skip "not root and no DOCKER_HOST: cannot start a private dockerd"
  local t
  for t in docker-compose debootstrap python3; do
    command -v "$t" >/dev/null || skip "$t is not installed (scripts/install-deps.sh installs it)"
  done
  local rc=0
  tfx_docker_up || rc=$?
  [ "$rc" = 2 ] && skip "$TFX_DOCKER_WHY"
  [ "$rc" = 0 ] || fail "cannot start a Docker engine"
  bash "$SRC/scripts/docker-build.sh" "$@" || fail "scripts/docker-build.sh $* failed"
}

