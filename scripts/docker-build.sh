#!/bin/bash
# Builds the tfx images with no registry: makes the base image first if the engine lacks it
# (scripts/docker-base.sh), then builds from the source tree.
#
# Usage: scripts/docker-build.sh [--systemd]
#   always     tfx:latest          deploy/docker/Dockerfile (what deploy/docker-compose.yml runs)
#              tfx-build:latest    that Dockerfile's build stage (tfx-node installed by cmake --install)
#   --systemd  tfx-systemd:latest  deploy/docker/Dockerfile.systemd (systemd as PID 1, the units installed)
#
# The build context holds only the files git knows (tracked, or untracked but not ignored), so local build
# trees and .git never go to the engine, whatever the builder. RUN steps use the host's network (--network
# host): that is how apt inside the build reaches this machine's mirror, and it works with engines that
# have no default bridge (the private one of scripts/docker-lib.sh). Uses the engine `docker` reaches, or a
# private one while it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/docker-lib.sh

SYSTEMD=0
[ "${1:-}" = --systemd ] && SYSTEMD=1

# context: a tar of the source tree on stdout.
context() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -c 2>/dev/null
  else
    tar -c --exclude=.git --exclude='./build*' --exclude='./cmake-build-*' .
  fi
}

# build DOCKERFILE TAG [ARGS...]: docker build from the context on stdin; quiet unless it fails.
build() {
  local file=$1 tag=$2 log start
  shift 2
  log=$(mktemp)
  start=$(date +%s)
  if ! context | dk build --network host -f "$file" -t "$tag" "$@" - >"$log" 2>&1; then
    tail -40 "$log"
    rm -f "$log"
    echo "docker-build: building $tag from $file failed"
    return 1
  fi
  rm -f "$log"
  echo "docker-build: $tag built from $file in $(($(date +%s) - start)) s"
}

rc=0
tfx_docker_up || rc=$?
[ "$rc" = 0 ] || { echo "docker-build: ${TFX_DOCKER_WHY:-no docker engine}"; exit 1; }
trap tfx_docker_down EXIT
scripts/docker-base.sh
# The build stage gets a tag of its own even when only tfx:latest is wanted: a tagged stage is build cache that
# the prune below keeps (an untagged one would be pruned and rebuilt, apt and all, next time).
build deploy/docker/Dockerfile tfx-build:latest --target build
build deploy/docker/Dockerfile tfx:latest
if [ "$SYSTEMD" = 1 ]; then
  build deploy/docker/Dockerfile.systemd tfx-systemd:latest --build-arg BUILD_IMAGE=tfx-build:latest
fi
# On the private engine every image is ours: drop the ones the new builds replaced, so that the persistent
# data root does not grow with each change of the sources.
if [ -n "${TFX_DOCKER_PRIVATE:-}" ]; then dk image prune -f >/dev/null || true; fi
