#!/bin/sh
# PID 1 of tfx-systemd:latest: makes the cgroup v1 hierarchies writable, then becomes systemd.
# Docker mounts them read-only unless the container is --privileged. Run with its own cgroup namespace
# (--cgroupns private), the container sees only its own subtree there, so this opens nothing of the host's.
# On cgroup v2, or when they are writable already, it changes nothing.
awk '$2 ~ "^/sys/fs/cgroup/" && $3 == "cgroup" && $4 ~ "(^|,)ro(,|$)" { print $2 }' /proc/self/mounts |
  while read -r m; do
    mount -o remount,bind,rw "$m" || echo "systemd-init: cannot make $m writable" >&2
  done
exec /lib/systemd/systemd "$@"
