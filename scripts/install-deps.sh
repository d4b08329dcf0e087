#!/bin/bash
# Installs the Debian packages tfx needs (idempotent): `run` (the default) what building and training need,
# `test` that plus the test suite's tools. apt-get update runs only when a package is missing and cannot be found
# in the current lists.
# Usage: bash scripts/install-deps.sh [run|test]
set -euo pipefail
MODE=${1:-run}
# Build and run: compiler and CMake, the libraries tfx links (ZeroMQ, protobuf-c, OpenBLAS, json-c, zlib,
# microhttpd for /metrics, libsystemd for sd_notify, SQLite for the run index, xxHash for hashed feature columns)
# and the Fashion-MNIST data.
RUN=(build-essential cmake pkg-config libzmq3-dev libprotobuf-c-dev protobuf-c-compiler libopenblas-dev
     libjson-c-dev zlib1g-dev libmicrohttpd-dev libsystemd-dev libsqlite3-dev libxxhash-dev dataset-fashion-mnist)
# The tests: Criterion (unit tests), python3 and curl (integration scripts), iproute2 (network namespaces),
# prometheus (promtool and a scrape), chromium (the live page), debootstrap + docker.io + docker-compose +
# python3-yaml (deployment tests), clang + libclang-rt-dev (libFuzzer targets).
TEST=(libcriterion-dev python3 curl iproute2 prometheus chromium debootstrap docker.io docker-compose python3-yaml
      clang libclang-rt-dev)
case "$MODE" in
  run) PKGS=("${RUN[@]}") ;;
  test) PKGS=("${RUN[@]}" "${TEST[@]}") ;;
  *) echo "usage: $0 [run|test]" >&2; exit 2 ;;
esac
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
  $SUDO apt-get update -q >/dev/null
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
