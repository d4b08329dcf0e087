#!/bin/bash
# Makes the Dockerfiles' base image without a registry: a Debian 12 (bookworm) minbase root file system built by
# debootstrap from this machine's own apt mirror, imported under the name the Dockerfiles use in FROM
# (debian:bookworm-slim), so deploy/docker/Dockerfile builds unchanged with no image pull.
#
# Usage: scripts/docker-base.sh [--force]
#   --force   re-import even if the engine already has an image of that name (else it is left alone: it may
#             be the real one from a registry).
# Environment: TFX_DEBIAN_MIRROR (default: the first source of the bookworm suite in the apt sources),
#              TFX_CACHE (default ~/.cache/tfx: holds the root file system tarball, reused on the next run).
# Uses the engine `docker` reaches, or starts a private one for the import (scripts/docker-lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/docker-lib.sh

SUITE=bookworm
TAG=$(sed -n 's/^FROM[[:space:]]\{1,\}\([^[:space:]]*\).*/\1/p' deploy/docker/Dockerfile | head -1)
CACHE=${TFX_CACHE:-$HOME/.cache/tfx}
TARBALL=$CACHE/debian-$SUITE-minbase-$(dpkg --print-architecture).tar.gz
FORCE=0
[ "${1:-}" = --force ] && FORCE=1

# apt_sources: "URI SUITE COMPONENTS..." for every enabled deb source of this machine, from one-line
# (sources.list, *.list) and deb822 (*.sources) files alike.
apt_sources() {
  python3 - /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources <<'PY'
import glob, os, re, sys
for path in sys.argv[1:]:
    if not os.path.isfile(path):
        continue
    text = open(path, encoding="utf-8", errors="replace").read()
    if path.endswith(".sources"):
        for stanza in re.split(r"\n\s*\n", text):
            f = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                k, _, v = line.partition(":")
                f[k.strip().lower()] = v.split()
            if "deb" not in f.get("types", []) or f.get("enabled", ["yes"])[0].lower() == "no":
                continue
            for uri in f.get("uris", []):
                for suite in f.get("suites", []):
                    print(uri, suite, *f.get("components", ["main"]))
    else:
        for line in text.splitlines():
            line = re.sub(r"\[[^]]*\]", "", line.split("#")[0]).split()
            if len(line) >= 3 and line[0] == "deb":
                print(*line[1:])
PY
}

# mirror: the URI that serves SUITE.
mirror() {
  [ -n "${TFX_DEBIAN_MIRROR:-}" ] && { echo "$TFX_DEBIAN_MIRROR"; return; }
  apt_sources | awk -v s="$SUITE" '$2 == s { print $1; exit }'
}

# build_rootfs: debootstrap into a temp dir, point its apt at this machine's SUITE sources, slim it, pack it.
build_rootfs() {
  command -v debootstrap >/dev/null || { echo "debootstrap is not installed (apt-get install debootstrap)"; exit 1; }
  local url tmp
  url=$(mirror)
  [ -n "$url" ] || { echo "no '$SUITE' source in /etc/apt/sources.list*: set TFX_DEBIAN_MIRROR=URL"; exit 1; }
  tmp=$(mktemp -d "$CACHE/rootfs.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "docker-base: debootstrap --variant=minbase $SUITE from the local apt mirror (once; cached in $TARBALL)"
  debootstrap --variant=minbase "$SUITE" "$tmp/root" "$url" >"$tmp/debootstrap.log" 2>&1 \
    || { tail -20 "$tmp/debootstrap.log"; exit 1; }
  # The same suites as this machine (release, updates, security), so images get the versions the host has.
  apt_sources | awk -v s="$SUITE" '$2 == s || index($2, s "-") == 1 { $1 = "deb " $1; print }' \
    | sort -u >"$tmp/root/etc/apt/sources.list"
  rm -rf "$tmp/root"/var/cache/apt/archives/*.deb "$tmp/root"/var/lib/apt/lists/* "$tmp/root"/var/log/*.log
  : >"$tmp/root/etc/hostname"
  tar --numeric-owner -C "$tmp/root" -czf "$tmp/rootfs.tar.gz" .
  mv "$tmp/rootfs.tar.gz" "$TARBALL"
  rm -rf "$tmp"
  trap - EXIT
}

mkdir -p "$CACHE"
[ -s "$TARBALL" ] || build_rootfs
rc=0
tfx_docker_up || rc=$?
[ "$rc" = 0 ] || { echo "docker-base: ${TFX_DOCKER_WHY:-no docker engine}"; exit 1; }
trap tfx_docker_down EXIT
if [ "$FORCE" = 0 ] && dk image inspect "$TAG" >/dev/null 2>&1; then
  echo "docker-base: $TAG is already there ($(dk image inspect -f '{{index .Config.Labels "org.tfx.base"}}' "$TAG" 2>/dev/null || true))"
  exit 0
fi
dk import --change 'CMD ["bash"]' --change "LABEL org.tfx.base=debootstrap-minbase-$SUITE" \
  "$TARBALL" "$TAG" >/dev/null
echo "docker-base: imported $TARBALL as $TAG"
