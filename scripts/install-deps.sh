#!/bin/bash
# Installs every Debian package tfx needs to build, test and train (idempotent).
# apt-get update runs only when a package is missing and cannot be found in the current lists.
set -euo pipefail
PKGS=(build-essential cmake pkg-config libzmq3-dev libprotobuf-c-dev protobuf-c-compiler
      libopenblas-dev libjson-c-dev libcriterion-dev zlib1g-dev libmicrohttpd-dev libsystemd-dev libsqlite3-dev dataset-fashion-mnist python3 curl
      prometheus chromium debootstrap docker.io docker-compose python3-yaml
      clang libclang-rt-dev)
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
