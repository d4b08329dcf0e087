#!/bin/bash
# Provenance (#25 item 5): `tfx-node --version` names the source commit and the build; config.json, every
# checkpoint's manifest and an export record the same commit; resuming a run written by another binary says so
# (RESUME-BINARY, naming both commits) and trains on.
. "$(dirname "$0")/lib.sh"
v=$("$TFX_NODE" --version) || fail "--version failed"
commit=$(echo "$v" | grep -oE 'commit [^;]+' | cut -d' ' -f2)
echo "$commit" | grep -qE '^([0-9a-f]{40}(-dirty)?|unknown)$' || fail "--version names no commit: $v"
[ "$commit" != unknown ] || [ ! -d "$SRC/.git" ] || fail "--version says 'unknown' in a git checkout: $v"
echo "$v" | grep -q 'sanitize=' || fail "--version names no build flags: $v"
RUN=$WORK/run
"$TFX_NODE" train --config "$EXAMPLE" --run-dir "$RUN" --max-steps 40 --set checkpoint.every_steps=20 \
  >"$WORK/train.log" 2>&1 || fail "train failed"
recorded() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d$2)" "$1"; }
[ "$(recorded "$RUN/config.json" "['provenance']['commit']")" = "$commit" ] || fail "config.json records another commit"
for m in "$RUN"/checkpoints/ckpt-*/manifest.json; do
  [ "$(recorded "$m" "['tfx']['commit']")" = "$commit" ] || fail "$m records another commit"
done
"$TFX_NODE" export --run-dir "$RUN" --out "$WORK/x" >"$WORK/export.log" 2>&1 || fail "export failed"
grep -rq "\"commit\": \"$commit\"" "$WORK/x" || fail "the export records no commit ($(ls -R "$WORK/x" | head))"
# The run as if written by another build: the resume names both commits and trains on.
python3 - "$RUN/config.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["provenance"]["commit"] = "0123456789abcdef0123456789abcdef01234567"
json.dump(d, open(sys.argv[1], "w"), indent=1)
PY
"$TFX_NODE" train --config "$EXAMPLE" --run-dir "$RUN" --max-steps 60 >"$WORK/resume.log" 2>&1 || fail "resume failed"
grep -q "RESUME-BINARY.*0123456789abcdef.*resuming with commit $commit" "$WORK/resume.log" ||
  fail "the resume under another binary logged no RESUME-BINARY line naming both commits"
[ "$(recorded "$RUN/config.json" "['provenance']['commit']")" = "$commit" ] || fail "config.json keeps the old commit"
"$TFX_NODE" train --config "$EXAMPLE" --run-dir "$RUN" --max-steps 80 >"$WORK/same.log" 2>&1 || fail "second resume failed"
grep -q RESUME-BINARY "$WORK/same.log" && fail "a resume with the same binary logged RESUME-BINARY"
out=$("$TFX_NODE" config --config "$EXAMPLE" --set provenance=x 2>&1) && fail "--set provenance= accepted: $out"
echo "$out" | grep -qF "TFX_ECONFIG: --set provenance: not an option" || fail "--set provenance= refused without naming why: $out"
pass "--version: $v; config.json, manifests and the export record it; another binary's run named on resume"
