#!/bin/bash
# Nothing a user does loses a run (#18): periodic checkpoints that coincide with evaluations are all written
# (sync); a resume with another model is refused before anything is written; corrupt checkpoints are named,
# kept, and never started over; Ctrl-C to the whole process group of `tfx-node local`, or SIGTERM to one ps, makes the master take a
# final checkpoint and everyone exit 0, and a second signal stops at once; a second run on a run directory is
# refused (exit 2) naming the holder, and --fresh moves the earlier run to previous-N/; --tf-config naming a directory or an empty file is an error (exit 2), while
# TF_CONFIG='{}' in the environment means local mode, as in TensorFlow; a master failing after the run ended is not
# restarted, and local exits with its error line.
. "$(dirname "$0")/lib.sh"
small_mlp "$WORK/small.json" # every run below trains the suite's small MLP
EXAMPLE=$WORK/small.json
train_step() { metric "$1/metrics.jsonl" train step 2>/dev/null | grep -E '^[0-9]+$' || echo 0; }
# wait_step RUN N PID: until RUN's train step reaches N (progress, not the clock), or PID exits.
wait_step() {
  while [ "$(train_step "$1")" -lt "$2" ]; do
    kill -0 "$3" 2>/dev/null || fail "the run $1 exited before step $2"
    sleep 0.2
  done
}
# start_local NAME: a long local run (sync MLP) in a session of its own (setsid: its own process group, as a
# terminal's foreground job has); sets LP to the supervisor's pid.
start_local() {
  setsid "$TFX_NODE" local --config "$EXAMPLE" --run-dir "$WORK/$1" --max-steps 1000000 \
    --set checkpoint.every_steps=0 --set eval.every_steps=0 >"$WORK/$1.log" 2>&1 &
  LP=$!
  PIDS+=("$LP")
}

# 1. Checkpoints every 200 steps with an evaluation at each: every one of them is written, at its own step.
"$TFX_NODE" local --config "$EXAMPLE" --run-dir "$WORK/run-ckpt" --max-steps 800 --set checkpoint.every_steps=200 \
  --set eval.every_steps=200 --set checkpoint.keep_max=10 >"$WORK/ckpt.log" 2>&1 || fail "run with evaluations"
got=$(ls "$WORK/run-ckpt/checkpoints" | tr '\n' ' ')
[ "$got" = "ckpt-000000000200 ckpt-000000000400 ckpt-000000000600 ckpt-000000000800 " ] ||
  fail "checkpoints at evaluation steps: $got"
grep -q "MASTER-CKPT-FAIL" "$WORK/run-ckpt/logs/master-0.log" && fail "a checkpoint failed: $(grep CKPT-FAIL "$WORK/run-ckpt/logs/master-0.log")"

# 2. Ctrl-C: SIGINT to the supervisor's whole process group.
start_local run-int
wait_step "$WORK/run-int" 300 "$LP"
kill -INT -- "-$LP"
wait "$LP"; rc=$?
[ "$rc" = 0 ] || fail "Ctrl-C: exit $rc: $(tail -3 "$WORK/run-int.log")"
n=$(ls "$WORK/run-int/checkpoints" 2>/dev/null | wc -l)
[ "$n" = 1 ] || fail "Ctrl-C left $n checkpoints (want the final one)"
step=$(ls "$WORK/run-int/checkpoints" | sed 's/ckpt-0*//')
[ "$step" -ge 300 ] || fail "Ctrl-C checkpoint at step $step"
grep -q "ERROR" "$WORK/run-int/logs/"*.log && fail "a process failed on Ctrl-C: $(grep -h ERROR "$WORK/run-int/logs/"*.log)"
# A worker whose push the stopping ps held (the other worker stopped short of that step) is answered and stops;
# it does not fail over to a backup that is stopping too (that cost ~3 s a Ctrl-C).
grep -q "PSCLIENT-FAILOVER" "$WORK/run-int/logs/"worker-*.log &&
  fail "Ctrl-C: a worker failed over to a stopping ps: $(grep -h PSCLIENT-FAILOVER "$WORK/run-int/logs/"*.log | head -2)"

# 3. SIGTERM to one ps: passed to the supervisor, the same graceful stop.
start_local run-term
wait_step "$WORK/run-term" 300 "$LP"
ps1=""
for p in $(pgrep -P "$LP"); do
  tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q '"task":{"type":"ps","index":1}' && ps1=$p
done
[ -n "$ps1" ] || fail "no ps 1 under the supervisor"
kill -TERM "$ps1"
wait "$LP"; rc=$?
[ "$rc" = 0 ] || fail "SIGTERM to a ps: exit $rc: $(tail -3 "$WORK/run-term.log")"
ls "$WORK/run-term/checkpoints/"ckpt-* >/dev/null 2>&1 || fail "SIGTERM to a ps: no final checkpoint"

# 4. A second signal stops at once, and says so.
start_local run-twice
wait_step "$WORK/run-twice" 100 "$LP"
kill -INT "$LP"
for _ in $(seq 1 50); do grep -q "LOCAL-SIGNAL stopping" "$WORK/run-twice.log" && break; sleep 0.1; done
kill -INT "$LP"
wait "$LP"; rc=$?
[ "$rc" != 0 ] || fail "a second Ctrl-C exited 0"
grep -q "a second stop signal: stopping every process now" "$WORK/run-twice.log" ||
  grep -q "MASTER-CKPT checkpoint" "$WORK/run-twice/logs/master-0.log" || fail "second signal: $(tail -3 "$WORK/run-twice.log")"

# 5. One owner per run directory: a second local, train or chief on it exits 2 naming the holder.
start_local run-owned
wait_step "$WORK/run-owned" 50 "$LP"
out=$("$TFX_NODE" local --config "$EXAMPLE" --run-dir "$WORK/run-owned" --max-steps 100 2>&1); rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q "in use by another run (pid $LP host" || fail "second local: exit $rc: $out"
out=$("$TFX_NODE" train --config "$EXAMPLE" --run-dir "$WORK/run-owned" --max-steps 100 2>&1); rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q "in use by another run (pid $LP" || fail "train on a used directory: exit $rc: $out"
kill -INT -- "-$LP"
wait "$LP" || fail "the owning run did not stop cleanly"
"$TFX_NODE" local --config "$EXAMPLE" --run-dir "$WORK/run-owned" --max-steps 1000000 --set checkpoint.every_steps=0 \
  --set eval.every_steps=0 --max-steps 600 >"$WORK/after.log" 2>&1 ||
  fail "the directory stayed locked after its run ended, or did not resume: $(tail -2 "$WORK/after.log")"
grep -q "MASTER-RESUME" "$WORK/run-owned/logs/master-0.log" || fail "the next run did not resume from the Ctrl-C checkpoint"

# --fresh moves the earlier run aside (nothing deleted, nothing mixed): its checkpoints and metrics go to
# previous-1/, and the new run's directory holds only its own.
old=$(ls "$WORK/run-owned/checkpoints" | tr '\n' ' ')
"$TFX_NODE" local --config "$EXAMPLE" --run-dir "$WORK/run-owned" --max-steps 50 --fresh --set eval.every_steps=0 \
  >"$WORK/fresh.log" 2>&1 || fail "--fresh: $(tail -2 "$WORK/fresh.log")"
[ "$(ls "$WORK/run-owned/previous-1/checkpoints" | tr '\n' ' ')" = "$old" ] || fail "--fresh did not keep the old checkpoints"
[ "$(ls "$WORK/run-owned/checkpoints")" = "ckpt-000000000050" ] || fail "--fresh mixed runs: $(ls "$WORK/run-owned/checkpoints")"
[ -f "$WORK/run-owned/previous-1/metrics.jsonl" ] || fail "--fresh did not keep the old metrics"

# A resume with another model is refused before anything is written (config.json and experiment.json unchanged);
# a safe change (the learning rate) is allowed and the earlier experiment kept as a revision.
"$TFX_NODE" local --config "$EXAMPLE" --run-dir "$WORK/run-model" --max-steps 200 --set checkpoint.every_steps=100 \
  --set eval.every_steps=0 >"$WORK/model.log" 2>&1 || fail "model run: $(tail -2 "$WORK/model.log")"
sums=$(md5sum "$WORK/run-model/config.json" "$WORK/run-model/experiment.json")
out=$("$TFX_NODE" local --config "$EXAMPLE" --run-dir "$WORK/run-model" --max-steps 300 \
  --set 'model.layers=[{"type":"flatten"},{"type":"dense","units":32,"activation":"relu"},{"type":"dense","units":10}]' 2>&1); rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q "the model differs .*model.layers" || fail "resume with another model: exit $rc: $(echo "$out" | tail -1)"
[ "$(md5sum "$WORK/run-model/config.json" "$WORK/run-model/experiment.json")" = "$sums" ] || fail "a refused resume rewrote the saved experiment"
out=$("$TFX_NODE" train --config "$EXAMPLE" --run-dir "$WORK/run-model" --max-steps 300 \
  --set 'model.layers=[{"type":"flatten"},{"type":"dense","units":32,"activation":"relu"},{"type":"dense","units":10}]' 2>&1); rc=$?
[ "$rc" = 2 ] && [ "$(md5sum "$WORK/run-model/config.json" "$WORK/run-model/experiment.json")" = "$sums" ] ||
  fail "train resuming with another model: exit $rc: $(echo "$out" | tail -1)"
"$TFX_NODE" local --config "$EXAMPLE" --run-dir "$WORK/run-model" --max-steps 300 --set checkpoint.every_steps=100 \
  --set eval.every_steps=0 --set optimizer.learning_rate=0.0005 >"$WORK/model2.log" 2>&1 || fail "safe change: $(tail -2 "$WORK/model2.log")"
grep -q '"learning_rate": 0.001' "$WORK/run-model/experiment.rev-1.json" && grep -q '"learning_rate": 0.0005' "$WORK/run-model/experiment.json" ||
  fail "the earlier experiment was not kept as a revision"

# Another optimizer would train on the checkpoints' slots (held by position): adam -> adagrad is refused naming both
# (it gave NaN on the first resumed step), nothing rewritten; plain SGD (no slots) is allowed.
sums=$(md5sum "$WORK/run-model/config.json" "$WORK/run-model/experiment.json")
out=$("$TFX_NODE" train --config "$EXAMPLE" --run-dir "$WORK/run-model" --max-steps 400 --set optimizer.name=adagrad 2>&1); rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q "optimizer.name adagrad, but the run's checkpoints hold adam's slots" ||
  fail "resume under another optimizer: exit $rc: $(echo "$out" | tail -1)"
[ "$(md5sum "$WORK/run-model/config.json" "$WORK/run-model/experiment.json")" = "$sums" ] || fail "a refused optimizer change rewrote the saved experiment"

# Corrupt checkpoints are named and kept: the newest corrupt one is skipped with CKPT-SKIP, set aside as
# ckpt-STEP.unusable (never written again, though the resumed run checkpoints that step anew), and the run resumes
# from the one before; when none is usable the run stops with exit 2 and changes nothing.
ck=$WORK/run-model/checkpoints
printf '\x01\x02\x03\x04' | dd of="$ck/ckpt-000000000300/ps-0.shard" bs=1 seek=100 conv=notrunc 2>/dev/null
bad_sum=$(cd "$ck/ckpt-000000000300" && md5sum ps-0.shard ps-1.shard manifest.json)
"$TFX_NODE" local --config "$EXAMPLE" --run-dir "$WORK/run-model" --max-steps 350 --set checkpoint.every_steps=100 \
  --set eval.every_steps=0 --set optimizer.learning_rate=0.0005 >"$WORK/corrupt.log" 2>&1 || fail "resume past a corrupt checkpoint: $(tail -2 "$WORK/corrupt.log")"
grep -q "CKPT-SKIP .*ckpt-000000000300 is not usable, skipped and kept on disk as .*ckpt-000000000300.unusable: .*ps-0.shard" "$WORK/run-model/logs/master-0.log" ||
  fail "the corrupt checkpoint was not named"
grep -q "MASTER-RESUME resuming from .*ckpt-000000000200" "$WORK/run-model/logs/master-0.log" || fail "did not resume from the checkpoint before"
[ "$(cd "$ck/ckpt-000000000300.unusable" 2>/dev/null && md5sum ps-0.shard ps-1.shard manifest.json)" = "$bad_sum" ] ||
  fail "the corrupt checkpoint was not kept as it was: $(ls "$ck")"
[ -f "$ck/ckpt-000000000300/manifest.json" ] || fail "step 300 was not checkpointed anew beside the one set aside: $(ls "$ck")"
for c in "$ck"/ckpt-*; do printf '\x01\x02\x03\x04' | dd of="$c/ps-1.shard" bs=1 seek=100 conv=notrunc 2>/dev/null; done
before=$(ls "$ck" | tr '\n' ' ')
sums=$(md5sum "$WORK/run-model/config.json" "$WORK/run-model/experiment.json")
out=$("$TFX_NODE" local --config "$EXAMPLE" --run-dir "$WORK/run-model" --max-steps 400 --set eval.every_steps=0 \
  --set optimizer.learning_rate=0.0005 2>&1); rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q "none usable" || fail "every checkpoint corrupt: exit $rc: $(echo "$out" | tail -1)"
[ "$(ls "$ck" | tr '\n' ' ')" = "$before" ] || fail "checkpoints changed after a refused start: $(ls "$ck")"
[ "$(md5sum "$WORK/run-model/config.json" "$WORK/run-model/experiment.json")" = "$sums" ] ||
  fail "a refused start (no usable checkpoint) rewrote the saved experiment"
# ... also with another model: refused for the checkpoints, the new model not saved.
out=$("$TFX_NODE" local --config "$EXAMPLE" --run-dir "$WORK/run-model" --max-steps 400 --set eval.every_steps=0 \
  --set 'model.layers=[{"type":"flatten"},{"type":"dense","units":16},{"type":"dense","units":10}]' 2>&1); rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q "none usable" || fail "none usable, another model: exit $rc: $(echo "$out" | tail -1)"
[ "$(md5sum "$WORK/run-model/config.json" "$WORK/run-model/experiment.json")" = "$sums" ] ||
  fail "a refused start with another model saved it"

# 6. TF_CONFIG from a file that cannot be one is an error; '{}' in the environment is local mode.
mkdir -p "$WORK/adir"; : >"$WORK/empty.json"
for bad in "$WORK/adir" "$WORK/empty.json"; do
  out=$(TF_CONFIG='{"cluster":{"ps":["127.0.0.1:1"]},"task":{"type":"ps","index":0}}' \
    "$TFX_NODE" --tf-config "$bad" --config "$EXAMPLE" --run-dir "$WORK/run-tfc" --max-steps 5 2>&1); rc=$?
  [ "$rc" = 2 ] && echo "$out" | grep -q "$bad" || fail "--tf-config $bad: exit $rc: $out"
done
[ ! -e "$WORK/run-tfc" ] || fail "a refused --tf-config left a run directory"
TF_CONFIG='{}' "$TFX_NODE" --config "$EXAMPLE" --run-dir "$WORK/run-empty" --max-steps 5 >"$WORK/empty.log" 2>&1 ||
  fail "TF_CONFIG={} is local mode: $(tail -2 "$WORK/empty.log")"
# Reports that change a run are accepted from the cluster's members only: a REPORT with a NaN loss, or at step
# 2^60, from a connection that never registered (the same user, so the Unix socket admits it) is dropped with a
# rate-limited MASTER-BAD-REPORT; the run neither aborts nor records the step.
: "${TFX_INTRUDER:?set TFX_INTRUDER to the tfx-intruder binary}"
start_local run-report
wait_step "$WORK/run-report" 100 "$LP"
maddr=$(grep -o "LOCAL-SPAWN master 0: pid [0-9]* at [^ ]*" "$WORK/run-report.log" | awk '{print $NF}')
"$TFX_INTRUDER" "$maddr" report-nan 20 >"$WORK/intr-nan.txt" 2>&1 || fail "intruder: $(cat "$WORK/intr-nan.txt")"
"$TFX_INTRUDER" "$maddr" report-huge 20 >"$WORK/intr-huge.txt" 2>&1 || fail "intruder: $(cat "$WORK/intr-huge.txt")"
s0=$(train_step "$WORK/run-report")
while [ "$(train_step "$WORK/run-report")" -lt $((s0 + 200)) ]; do
  kill -0 "$LP" 2>/dev/null || fail "the run ended after forged reports: $(tail -3 "$WORK/run-report.log")"
  sleep 0.2
done
kill -INT -- "-$LP"
wait "$LP" || fail "the run with forged reports did not stop cleanly: $(tail -2 "$WORK/run-report.log")"
grep -q '"step": 1152921504606846976' "$WORK/run-report/metrics.jsonl" && fail "a forged step reached metrics.jsonl"
grep -qi 'nan' "$WORK/run-report/metrics.jsonl" && fail "a forged NaN loss reached metrics.jsonl"
n=$(grep -c "MASTER-BAD-REPORT" "$WORK/run-report/logs/master-0.log")
[ "$n" -ge 1 ] && [ "$n" -le 16 ] || fail "40 forged reports gave $n MASTER-BAD-REPORT lines (want 1..16: rate-limited)"

# 7. A master that fails at the end (its final checkpoint cannot be written) after stopping its peers is not
# restarted into a cluster that is gone: local exits at once with the master's own error line.
mkdir -p "$WORK/run-end" && echo "not a directory" >"$WORK/run-end/checkpoints"
out=$(timeout 120 "$TFX_NODE" local --config "$EXAMPLE" --run-dir "$WORK/run-end" --max-steps 100 \
  --set checkpoint.every_steps=0 --set eval.every_steps=0 2>&1); rc=$?
[ "$rc" = 1 ] || fail "a master failing at its final checkpoint: exit $rc: $(echo "$out" | tail -2)"
echo "$out" | grep -q "master 0 exited with status 1: .*ckpt-000000000100: Not a directory" ||
  fail "the master's own error is not named: $(echo "$out" | tail -2)"
# (A LOCAL-RESTART announcement may come first when a ps is still stopping; LOCAL-NO-RESTART then cancels it.)
echo "$out" | grep -q "LOCAL-RESPAWN master" && fail "the master was restarted after the run ended"
# 8. Bad input exits 2 (nothing to retry): a missing or corrupt data file, a missing checkpoint, an unknown
# validation set; under local a worker's missing data file is final at once (no restarts) and exit 2.
head -c 2000 /dev/urandom >"$WORK/garbage.gz"
for args in "--set data.train.images=$WORK/nosuch.gz" "--set data.train.images=$WORK/garbage.gz"; do
  out=$("$TFX_NODE" train --config "$EXAMPLE" --run-dir "$WORK/run-bad" --max-steps 5 $args 2>&1); rc=$?
  [ "$rc" = 2 ] || fail "train $args: exit $rc, want 2: $(echo "$out" | tail -1)"
done
out=$("$TFX_NODE" evaluate --run-dir "$WORK/run-ckpt" --checkpoint 12345 2>&1); rc=$?
[ "$rc" = 2 ] || fail "evaluate a missing checkpoint: exit $rc: $(echo "$out" | tail -1)"
out=$("$TFX_NODE" evaluate --run-dir "$WORK/run-ckpt" --data nosuch 2>&1); rc=$?
[ "$rc" = 2 ] || fail "evaluate --data nosuch: exit $rc: $(echo "$out" | tail -1)"
out=$("$TFX_NODE" local --config "$EXAMPLE" --run-dir "$WORK/run-nodata" --max-steps 5 --set "data.train.images=$WORK/nosuch.gz" 2>&1); rc=$?
[ "$rc" = 2 ] && ! echo "$out" | grep -q "LOCAL-RESTART" || fail "local with a missing data file: exit $rc: $(echo "$out" | tail -2)"
# training.hooks stop_at_step:N stops at N exactly (TensorFlow's StopAtStepHook), not at the next report step,
# in one process and on a local cluster.
"$TFX_NODE" train --config "$EXAMPLE" --run-dir "$WORK/run-hook1" --set training.hooks=stop_at_step:300 \
  --set training.report_every=200 --set eval.every_steps=0 >"$WORK/hook1.log" 2>&1 || fail "stop_at_step train: $(tail -1 "$WORK/hook1.log")"
"$TFX_NODE" local --config "$EXAMPLE" --run-dir "$WORK/run-hook2" --set training.hooks=stop_at_step:300 \
  --set training.report_every=200 --set eval.every_steps=0 >"$WORK/hook2.log" 2>&1 || fail "stop_at_step local: $(tail -1 "$WORK/hook2.log")"
for r in run-hook1 run-hook2; do
  [ "$(metric "$WORK/$r/metrics.jsonl" eval step)" = 300 ] || fail "$r: stop_at_step:300 stopped at $(metric "$WORK/$r/metrics.jsonl" eval step)"
done
# Numeric flags are checked, never read as 0 or 1 silently.
for args in "--http-port abc train --config $EXAMPLE" "search --config $EXAMPLE --trials 0" \
            "evaluate --run-dir $WORK/run-ckpt --steps abc" "search --config $EXAMPLE --parallel x"; do
  out=$("$TFX_NODE" $args 2>&1); rc=$?
  [ "$rc" = 2 ] && echo "$out" | grep -q "is not an integer in" || fail "tfx-node $args: exit $rc: $(echo "$out" | tail -1)"
done
pass "checkpoints at evaluation steps, Ctrl-C and SIGTERM save, a second signal stops, one owner per directory, TF_CONFIG files checked"
