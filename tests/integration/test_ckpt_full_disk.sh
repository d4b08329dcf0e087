#!/bin/bash
# A full disk during a delta checkpoint (#28), for real and unprivileged: ps 0 of a cluster following a directory
# (2 ps, 1 worker, checkpoint.incremental, every 5 steps) is given a file-size limit (prlimit RLIMIT_FSIZE; tfx-node
# ignores SIGXFSZ, so the write fails with EFBIG as on a full disk). Policy: training goes on; each checkpoint the
# ps cannot write is named (PS-CKPT-FAIL with the file and the system's reason), skipped by the chief
# (MASTER-CKPT-MISSED, counted in tfx_checkpoint_failures) and leaves no half-written file; the chain written
# before stays complete and restorable; once there is room again the next checkpoint succeeds (a delta on the
# last written link) and restores.
. "$(dirname "$0")/lib.sh"
command -v prlimit >/dev/null || skip "no prlimit here (util-linux) to give one process a file-size limit"
python3 "$(dirname "$0")/sparse_data.py" "$WORK" --train 1920 --test 100
mkdir -p "$WORK/parts" "$WORK/in"
split -n l/3 -d "$WORK/train.libsvm" "$WORK/parts/part-"
experiment "$WORK/lr.json" model.input_shape='[1048576]' \
  model.layers='[{"type": "embedding_bag", "units": 32, "combiner": "sum"}, {"type": "dense", "units": 4}]' \
  model.loss='"softmax_cross_entropy"' \
  data.format='"libsvm"' data.train.follow="\"$WORK/in\"" data.eval.images="\"$WORK/test.libsvm\"" \
  data.scale=1 optimizer.name='"adagrad"' optimizer.learning_rate=0.5 training.batch_size=32 \
  training.report_every=5 eval.every_steps=0 checkpoint.every_steps=5 checkpoint.keep_max=1000 \
  checkpoint.incremental=true
seen() { local v; v=$(metric "$WORK/run/metrics.jsonl" train examples_seen 2>/dev/null); [ "${v:-none}" = none ] && v=0; echo "${v%.*}"; }
first_part() { [ "$(seen)" -ge 600 ] && [ -n "$(complete)" ]; }
under_limit() { [ "$(seen)" -ge 1250 ] && grep -q MASTER-CKPT-MISSED "$WORK/run/logs/master-0.log"; }
room_again() { [ "$(seen)" -ge 1880 ] && [ "$(complete | tail -1)" -gt "$before" ]; }
land() { cp "$WORK/parts/$1" "$WORK/in/.$1.tmp" && mv "$WORK/in/.$1.tmp" "$WORK/in/$1.libsvm"; }
complete() { ls -d "$WORK"/run/checkpoints/ckpt-*/manifest.json 2>/dev/null | sed 's|.*/ckpt-0*\([0-9]*\)/.*|\1|' | sort -n; }
# export STEP NAME: the checkpoint of STEP read through its chain into safetensors
export_at() {
  "$TFX_NODE" export --run-dir "$WORK/run" --out "$WORK/$2" --checkpoint "$1" >"$WORK/$2.log" 2>&1 ||
    fail "export of step $1 ($2): $(tail -2 "$WORK/$2.log")"
}
setsid "$TFX_NODE" local --config "$WORK/lr.json" --run-dir "$WORK/run" --ps 2 --workers 1 >"$WORK/local.log" 2>&1 &
lp=$!
PIDS+=("$lp")
land part-00
wait_for 240 first_part || fail "part-00: examples_seen $(seen), checkpoints: $(complete)"
sleep 1
before=$(complete | tail -1)
ps0=$(pid_of "$WORK/run" ps 0)
[ -n "$ps0" ] || fail "no ps 0 process"
# The limit holds for every file the ps writes, its log too: room for the log to grow by 16 KiB, none for a delta
# of about 200 rows x (32 values + 32 Adagrad slots)
limit=$(($(stat -c %s "$WORK/run/logs/ps-0.log") + 16384))
prlimit --pid "$ps0" --fsize="$limit": || skip "prlimit cannot lower ps 0's RLIMIT_FSIZE here"
land part-01
wait_for 240 under_limit ||
  fail "part-01 under the limit: examples_seen $(seen), no MASTER-CKPT-MISSED"
grep -qE "PS-CKPT-FAIL (write|sync) .*/ckpt-0*([0-9]+)/ps-0\.rows\.tmp: File too large" "$WORK/run/logs/ps-0.log" ||
  fail "the failed write does not name ps-0's row file and EFBIG: $(grep -m1 PS-CKPT-FAIL "$WORK/run/logs/ps-0.log")"
# the chief names each missed step with the ps's reason for that step (not the last failure's)
wrong=$(grep MASTER-CKPT-MISSED "$WORK/run/logs/master-0.log" |
  sed -E 's/.*at step ([0-9]+): .*ckpt-0*([0-9]+)\/ps-0.*/\1 \2/' | awk '$1 != $2')
[ -z "$wrong" ] || fail "MASTER-CKPT-MISSED names the file of another step (step, file's step): $wrong"
kill -0 "$ps0" 2>/dev/null || fail "ps 0 died at its file-size limit"
[ "$(complete | tail -1)" = "$before" ] || fail "a checkpoint completed under the limit: $(complete | tr '\n' ' ')"
compgen -G "$WORK/run/checkpoints/ckpt-*/*.tmp" >/dev/null && fail "half-written files left: $(ls "$WORK"/run/checkpoints/*/*.tmp)"
export_at "$before" before
prlimit --pid "$ps0" --fsize=unlimited: || fail "cannot raise ps 0's file-size limit again"
land part-02
wait_for 240 room_again ||
  fail "after room came back: examples_seen $(seen), checkpoints $(complete | tr '\n' ' ')"
after=$(complete | tail -1)
kill -INT -- -"$lp"
wait_exit 120 "$lp" || fail "Ctrl-C did not stop the following cluster"
export_at "$after" after
# ps 0's first row file after the failures is full (the tables were marked at the failed steps when copied, so a
# delta of them would lack the rows changed between the last written link and the failed step): its format word
first=$(complete | awk -v b="$before" '$1 > b' | head -1)
rows=$(printf "%s/run/checkpoints/ckpt-%012d/ps-0.rows" "$WORK" "$first")
format=$(python3 -c 'import struct,sys; print(struct.unpack("<I", open(sys.argv[1], "rb").read()[8:12])[0] & 0xff)' "$rows") ||
  fail "cannot read $rows"
[ "$format" = 1 ] || fail "ps 0's row file at step $first, the first written after the failures, is a delta (format $format)"
missed=$(grep -c MASTER-CKPT-MISSED "$WORK/run/logs/master-0.log")
pass "ps 0 at a file-size limit: $missed checkpoints missed (EFBIG named on ps-0.rows), training went on to $(seen) examples; step $before restored before, step $after (written once room came back) restores"
