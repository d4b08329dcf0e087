#!/bin/bash
# A full disk at the final checkpoint (#30): `train` whose run directory fills up exits non-zero naming "No space
# left on device" and never prints "done:" (it did, before the fatal error); the checkpoint it could not write
# leaves no manifest that would pass for a complete one. Needs a small tmpfs: root only.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "not root: mounting a small tmpfs for a full disk needs root"
mkdir -p "$WORK/small"
mount -t tmpfs -o size=1200k tmpfs "$WORK/small" 2>"$WORK/mount.err" || skip "not root enough: $(cat "$WORK/mount.err")"
trap 'rc=$?; umount "$WORK/small" 2>/dev/null; cleanup $rc' EXIT
out=$("$TFX_NODE" train --config "$EXAMPLE" --run-dir "$WORK/small/run" --max-steps 50 --set eval.every_steps=0 \
  --set checkpoint.every_steps=0 2>&1); rc=$?
[ "$rc" != 0 ] || fail "a run that could not write its final checkpoint exited 0: $(echo "$out" | tail -2)"
echo "$out" | grep -q "No space left on device" || fail "the error does not name the full disk: $(echo "$out" | tail -2)"
echo "$out" | grep -q "done:" && fail "'done:' printed for a run whose final checkpoint failed: $(echo "$out" | grep done:)"
ls "$WORK"/small/run/checkpoints/*/manifest.json 2>/dev/null && fail "a manifest for a checkpoint that was not written"
pass "a full disk at the final checkpoint: exit $rc, named, no 'done:'"
