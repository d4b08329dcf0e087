# Helpers for the integration tests. Each test runs in its own temp dir, with a watchdog that kills the test and
# every process under it after TFX_TEST_TIMEOUT seconds (default 800, under CTest's 900), saying so and showing
# the logs' tails; ports are chosen by the kernel (bind to 0).
set -u
: "${TFX_NODE:?set TFX_NODE to the tfx-node binary}"
SRC=${TFX_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PYLIB=$SRC/tests/integration/lib # the Python helpers of these functions and of the tests, one file each
EXAMPLE=$SRC/examples/fashion_mnist_mlp.json
WORK=$(mktemp -d /tmp/tfx-it.XXXXXX)
# Debian's python3 (scripts/install-deps.sh installs it) ahead of a version manager's shim on PATH, for python3 alone:
# a test starts python3 hundreds of times, and a pyenv shim takes ~0.35 s a start (1-2 s on a busy machine)
# against 0.035 s for the interpreter itself.
if [ -x /usr/bin/python3 ] && [ "$(command -v python3)" != /usr/bin/python3 ]; then
  mkdir -p "$WORK/.bin" && ln -s /usr/bin/python3 "$WORK/.bin/python3" && PATH=$WORK/.bin:$PATH
fi
# Every sanitizer report of every process the test starts lands under WORK/sanitizer (one file a process, named for
# its pid), whatever its stderr was sent to ($(...), /dev/null, a pipe): pass fails on any. UBSan halts on the first
# report (the sanitizer build also compiles with -fno-sanitize-recover=undefined).
mkdir -p "$WORK/sanitizer"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$WORK/sanitizer/asan"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}halt_on_error=1:print_stacktrace=1:log_path=$WORK/sanitizer/ubsan"
PIDS=()
# cleanup: kills what the test started; a script that ends with status 0 without going through pass (and so
# without its sanitizer check) fails.
cleanup() {
  local rc=${1:-$?}
  stop_watchdog
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  [ "$rc" != 0 ] || [ -n "${TFX_PASSED:-}" ] || { echo "FAIL: the test ended without pass"; rc=1; }
  [ -n "${TFX_KEEP_WORK:-}" ] && echo "kept $WORK" || rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP # the watchdog's (or a user's) signal runs the EXIT trap too

# descendants PID: every process under PID (children first walked by parent pid, not by name).
descendants() { local c; for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
# show_logs: the tails of the test's logs (what fail prints).
show_logs() { for f in "$WORK"/*.log "$WORK"/run*/logs/*.log "$WORK"/sanitizer/*; do [ -f "$f" ] && { echo "--- $f"; tail -20 "$f"; }; done; }
# The watchdog: a background shell that, after TFX_TEST_TIMEOUT seconds, names the timeout, shows the logs and
# sends SIGTERM to the test and everything under it (SIGKILL 5 s later). Its sleep writes nowhere, so that once
# stopped it holds no pipe of CTest's open.
TFX_TEST_TIMEOUT=${TFX_TEST_TIMEOUT:-800}
(
  trap - TERM INT HUP # (not the test's 'exit 143': stop_watchdog's SIGTERM just ends it)
  sleep "$TFX_TEST_TIMEOUT" </dev/null >/dev/null 2>&1 || exit 0 # a killed sleep: the test is over
  echo "FAIL: TIMEOUT: the test ran for more than TFX_TEST_TIMEOUT=$TFX_TEST_TIMEOUT s; killing it and its processes"
  show_logs
  me=$BASHPID
  victims="$$ $(descendants $$ | grep -vx "$me")"
  kill -TERM $victims 2>/dev/null
  sleep 5
  kill -KILL $victims 2>/dev/null
) &
WATCHDOG=$!
# stop_watchdog: the watchdog first (its SIGTERM ends it at once, waiting on its sleep), then the sleep; killed the
# other way round, the watchdog could wake from its sleep and fire at a test that is finishing.
stop_watchdog() {
  local s
  s=$(pgrep -P "$WATCHDOG")
  kill "$WATCHDOG" 2>/dev/null
  [ -z "$s" ] || kill $s 2>/dev/null
}
fail() { echo "FAIL: $*"; show_logs; exit 1; }
# sanitizer_reports: fails the test on an ASan, LSan or UBSan report of any process the test started (a file in
# $WORK/sanitizer, where ASAN_OPTIONS/UBSAN_OPTIONS's log_path sends them) or in any log the test wrote
# ($WORK/**/*.log, which holds RUN/logs/*.log). A supervised child that reports exits 1 and `tfx-node local`
# restarts it, so the run itself can succeed over the report; a process whose failure the test expects may have
# failed on a report: the files are the only place it is seen.
sanitizer_reports() {
  local f hit
  for f in "$WORK"/sanitizer/*; do
    [ -s "$f" ] || continue
    echo "FAIL: sanitizer report in ${f#"$WORK"/}: $(grep -a -m1 -E 'Sanitizer|runtime error:' "$f")"
    head -40 "$f"
    exit 1
  done
  while IFS= read -r -d '' f; do
    hit=$(grep -a -m1 -E 'AddressSanitizer|LeakSanitizer|runtime error:' "$f") || continue
    echo "FAIL: sanitizer report in ${f#"$WORK"/}: $hit"
    grep -a -A30 -m1 -E 'AddressSanitizer|LeakSanitizer|runtime error:' "$f" | head -40
    exit 1
  done < <(find "$WORK" -type f -name '*.log' -print0 2>/dev/null)
}
# pass WHAT: every test ends here (or in fail/skip); a sanitizer report in any of its logs turns it into a failure.
pass() { sanitizer_reports; echo "PASS: $*"; TFX_PASSED=1; exit 0; }
# skip WHY: this machine cannot run the test; CTest reports it as skipped (SKIP_RETURN_CODE 77), never as passed.
skip() { echo "SKIP: $*"; exit 77; }
# skip_part WHY: this machine cannot run one check of a test that goes on; scripts/ctest_skips.py lists the line
# and fails CI unless WHY names an allowed environment (not root, ...).
skip_part() { echo "SKIP-PART: $*"; }

# wait_for SECONDS CMD...: polls CMD every half second until it succeeds; returns 1 after SECONDS.
wait_for() {
  local limit=$1 t0=$SECONDS
  shift
  until "$@"; do
    [ $((SECONDS - t0)) -lt "$limit" ] || return 1
    sleep 0.5
  done
}

# wait_exit SECONDS PID: waits for PID (a child of this shell) and returns its exit status; returns 124 when it
# is still running after SECONDS (the caller fails, naming what it waited for; cleanup kills it).
wait_exit() {
  local limit=$1 pid=$2 t0=$SECONDS
  while kill -0 "$pid" 2>/dev/null && [ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" != Z ]; do
    if [ $((SECONDS - t0)) -ge "$limit" ]; then
      echo "wait_exit: pid $pid ($(ps -o args= -p "$pid" | cut -c1-100)) still running after $limit s"
      return 124
    fi
    sleep 0.2
  done
  wait "$pid"
}

# pid_of RUN ROLE INDEX: the pid of a live process of the local cluster in RUN (from the TF_CONFIG it was given).
pid_of() { pgrep -f -- "--run-dir $1( |\$)" | while read -r p; do tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -q "\"type\":\"$2\",\"index\":$3" && echo "$p"; done | head -1; }

# has_ckpt RUN: whether the run has a complete checkpoint. at_max RUN: whether both workers wait at max_steps.
has_ckpt() { compgen -G "$1/checkpoints/ckpt-*/manifest.json" >/dev/null; }
at_max() { [ "$(cat "$1"/logs/worker-*.log 2>/dev/null | grep -c WORKER-AT-MAX)" -ge 2 ]; }

# free_port: a TCP port on 127.0.0.1 that the kernel just handed out.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# experiment OUT KEY=VALUE...: a copy of the MLP example with dotted keys set (values are JSON).
experiment() {
  local out=$1; shift
  python3 "$PYLIB/experiment.py" "$EXAMPLE" "$out" "$@"
}

# small_mlp OUT KEY=VALUE...: experiment's copy with a 784-64-10 MLP in place of the example's 784-256-128-10 (0.81
# test accuracy at 300 steps, 0.85 at 1500, 0.86 at 3000), its first kernel in two 100 KB slices. The suite's
# model for tests that train long to reach a state (a kill, a checkpoint, max_steps): a step under ASan is ~3x
# cheaper, and each ps's message stays under 128 KiB, the size from which ASan maps every allocation afresh
# (~12 us a page fault on a virtual machine). The example's own model keeps its tests (main job, bench, ...).
small_mlp() {
  local out=$1; shift
  experiment "$out" model.layers='[{"type": "flatten"}, {"type": "dense", "units": 64, "activation": "relu"},
    {"type": "dense", "units": 10}]' placement.min_slice_bytes=65536 "$@"
}

# metric FILE KIND FIELD: the FIELD of the last line of KIND in a metrics.jsonl ("none" if absent).
metric() {
  python3 "$PYLIB/metric.py" "$1" "$2" "$3"
}

# var_values RUN VAR: the values of VAR in RUN's newest checkpoint (or in an export), one a line; returns 1 with
# the reason on stderr when inspect fails or prints no value (so a comparison of two empty outputs cannot pass).
var_values() {
  local out
  out=$("$TFX_NODE" inspect "$1" --var "$2" 2>&1) || { echo "inspect $1 --var $2: $out" >&2; return 1; }
  out=$(echo "$out" | tail -n +2 | tr ' ' '\n' | grep .)
  [ -n "$out" ] || { echo "inspect $1 --var $2 printed no value" >&2; return 1; }
  echo "$out"
}
# all_zero FILE: every value in FILE (one a line, at least one) is zero.
all_zero() { [ -s "$1" ] && ! grep -qvE '^-?0(\.0*)?$' "$1"; }

# ge A B: exit 0 if A >= B (floats).
ge() { python3 -c "import sys; sys.exit(0 if '$1' != 'none' and float('$1') >= float('$2') else 1)"; }
le() { python3 -c "import sys; sys.exit(0 if '$1' != 'none' and float('$1') <= float('$2') else 1)"; }

# fmnist_queries N OUT: the first N Fashion-MNIST test images as an IDX file of their own (predict's and serve's
# queries); skips the test when the data set is not installed.
fmnist_queries() {
  local img=/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz
  [ -f "$img" ] || skip "no Fashion-MNIST at $img"
  python3 - "$img" "$1" "$2" <<'PY'
import gzip, struct, sys
raw, n = gzip.open(sys.argv[1]).read(), int(sys.argv[2])
open(sys.argv[3], "wb").write(raw[:4] + struct.pack(">III", n, 28, 28) + raw[16:16 + n * 784])
PY
}

# digest EXPORT: one line per tensor of its model.safetensors (name and sha256 of its bytes): two runs' weights
# are bit-identical when their digests are.
digest() {
  python3 "$PYLIB/digest.py" "$(find "$1" -name model.safetensors | head -1)"
}

# same_exports DIR_A DIR_B: exit 0 when the two exports' model.safetensors hold the same tensors (header without
# its metadata, and the data bytes).
same_exports() {
  python3 "$PYLIB/same_exports.py" "$1" "$2"
}

# sparse_lr_experiment FILE [KEY=VALUE ...]: the logistic regression over $WORK's sparse_data.py LibSVM set (a lazy
# embedding_bag of 2^20 ids and 4 classes, Adagrad 0.5, batch 32, no periodic eval), then the given overrides.
sparse_lr_experiment() {
  local out=$1
  shift
  experiment "$out" model.input_shape='[1048576]' \
    model.layers='[{"type": "embedding_bag", "units": 4, "combiner": "sum"}]' model.loss='"softmax_cross_entropy"' \
    data.format='"libsvm"' data.train.images="\"$WORK/train.libsvm\"" data.eval.images="\"$WORK/test.libsvm\"" \
    data.scale=1 optimizer.name='"adagrad"' optimizer.learning_rate=0.5 training.batch_size=32 eval.every_steps=0 "$@"
}

# lazy_lr OUT LAYER-EXTRA [KEY=VALUE...]: a sync LR over $WORK/train.libsvm (sparse_data.py) whose embedding_bag
# (4 units, sum) takes the JSON members LAYER-EXTRA (', "max_rows": 150', say): the replicated lazy tables' tests.
lazy_lr() {
  local out=$1 extra=$2
  shift 2
  experiment "$out" model.input_shape='[1048576]' \
    model.layers="[{\"type\": \"embedding_bag\", \"units\": 4, \"combiner\": \"sum\"$extra}]" \
    model.loss='"softmax_cross_entropy"' data.format='"libsvm"' data.train.images="\"$WORK/train.libsvm\"" \
    data.eval.images="\"$WORK/test.libsvm\"" data.scale=1 optimizer.name='"adagrad"' optimizer.learning_rate=0.5 \
    training.batch_size=32 eval.every_steps=0 "$@"
}

# same_at_step STEP RUN_A RUN_B: exports checkpoint STEP of the runs $WORK/RUN_A and $WORK/RUN_B (a failed export
# fails the test, naming it) and exits 0 when the two hold the same tensors.
same_at_step() {
  local s=$1 r
  for r in "$2" "$3"; do
    "$TFX_NODE" export --run-dir "$WORK/$r" --out "$WORK/ex-$r-$s" --checkpoint "$s" >"$WORK/ex-$r-$s.log" 2>&1 ||
      fail "export $r at $s: $(tail -1 "$WORK/ex-$r-$s.log")"
  done
  same_exports "$WORK/ex-$2-$s" "$WORK/ex-$3-$s"
}

# steps_never_back METRICS [WORKERS MIN_STEP]: exit 0 when no worker's train step goes back in METRICS (no
# rollback); with WORKERS and MIN_STEP, also that that many workers reported and one reached MIN_STEP.
steps_never_back() {
  python3 "$PYLIB/steps_never_back.py" "$@"
}

# start_ps_cluster EXPERIMENT: starts `tfx-node local` on it in $WORK/run (RUN; the supervisor's pid LP) and waits
# for step 100; PS_PID and PS_ADDR are then ps 0's pid and address, and `step` prints the run's last train step.
step() { metric "$RUN/metrics.jsonl" train step 2>/dev/null || echo none; }
start_ps_cluster() {
  RUN=$WORK/run
  "$TFX_NODE" local --config "$1" --run-dir "$RUN" >"$WORK/local.log" 2>&1 &
  LP=$!
  PIDS+=($LP)
  for _ in $(seq 1 300); do
    s=$(step); [ "$s" != none ] && [ "$s" -ge 100 ] && break
    kill -0 "$LP" 2>/dev/null || fail "the cluster exited before training"
    sleep 0.2
  done
  local addr
  addr=$(sed -n 's/.*LOCAL-SPAWN ps 0: pid \([0-9]*\) at \(.*\)$/\1 \2/p' "$WORK/local.log" | head -1)
  PS_PID=${addr%% *} PS_ADDR=${addr#* }
  [ -n "$PS_PID" ] && kill -0 "$PS_PID" || fail "no ps 0 in the cluster: $(tail -3 "$WORK/local.log")"
}

# kill_ps_at LOG RUN STEP LP [PS [MOD:LO-HI]]: kill -9 of ps PS (default 0) of the `local` cluster whose output is
# LOG (supervisor pid LP, run directory RUN) once RUN/metrics.jsonl has a train step >= STEP (and, with MOD:LO-HI, a
# step whose remainder modulo MOD lies in LO..HI, polled tightly: a kill inside a batch of MOD steps). The workers
# are held (SIGSTOP) from the moment the step is seen until the ps is dead, so the kill lands inside the run however
# fast it trains (a release build trains the sparse LR's 900 steps in 0.7 s, past a poll of 0.5 s). Prints the step
# seen; fails the test when the run ended first.
kill_ps_at() {
  python3 "$PYLIB/kill_ps_at.py" "$@" || fail "no step $3${6:+ (in $6)} before the run ended: ps ${5:-0} not killed"
}

# start_local NAME ARGS...: starts `tfx-node local ARGS...` in the background, its output in WORK/NAME.log; its pid
# in LP (and in PIDS, which cleanup kills).
start_local() {
  local name=$1
  shift
  "$TFX_NODE" local "$@" >"$WORK/$name.log" 2>&1 &
  LP=$!
  PIDS+=($LP)
}

# newest_ckpt RUN: the directory of RUN's newest complete checkpoint (nothing when it has none).
newest_ckpt() { local m; m=$(compgen -G "$1/checkpoints/ckpt-*/manifest.json" | sort | tail -1); [ -n "$m" ] && dirname "$m"; }
# ckpt_digest CKPT_DIR [--no-slots]: one line per tensor of the checkpoint, optimizer slots ("KEY@m") and lazy tables'
# rows (an incremental checkpoint's chain applied) included (lib/ckpt_digest.py): two checkpoints hold the same
# training state when their digests are equal. Fails the test when the checkpoint cannot be read.
ckpt_digest() { python3 "$PYLIB/ckpt_digest.py" "$@" || fail "ckpt_digest $1 failed"; }

# wait_and_digest NAME LP RUN [SECONDS]: waits for the cluster LP (start_local NAME; with SECONDS, that long at most:
# a hang fails naming it), exports RUN's model to WORK/NAME.export and writes its digest to WORK/NAME.digest, then
# the digest of RUN's newest checkpoint (the exported one), whose optimizer slots the export leaves out; fails naming
# NAME when the run fails, the export fails, or it holds no tensor (so two runs compared by their digests are
# bit-identical, slots included, never two empty files).
wait_and_digest() {
  local name=$1 lp=$2 run=$3 ckpt rc=0
  if [ -n "${4:-}" ]; then wait_exit "$4" "$lp" || rc=$?; else wait "$lp" || rc=$?; fi
  [ "$rc" != 124 ] || fail "$name: the run still went on $4 s later, at step $(metric "$run/metrics.jsonl" train step): $(grep -h 'NODE-FAIL' "$run"/logs/*.log | cut -c1-200 | head -2)"
  [ "$rc" = 0 ] || fail "$name: local exited $rc: $(tail -2 "$WORK/$name.log")"
  "$TFX_NODE" export --run-dir "$run" --out "$WORK/$name.export" >"$WORK/$name.export.log" 2>&1 ||
    fail "$name: export failed: $(tail -2 "$WORK/$name.export.log")"
  digest "$WORK/$name.export" >"$WORK/$name.digest"
  [ -s "$WORK/$name.digest" ] || fail "$name: no tensors exported"
  ckpt=$(newest_ckpt "$run") || fail "$name: no checkpoint"
  echo "checkpoint step ${ckpt##*-}" | sed 's/ 0*\([0-9]\)/ \1/' >>"$WORK/$name.digest"
  ckpt_digest "$ckpt" >>"$WORK/$name.digest"
}

# rolled_back FILE...: prints the lines of the logs FILE that tell of a rollback (a ps lost without a backup taking
# over: the master's MASTER-PS-LOST or MASTER-NO-FAILOVER, a ROLLBACK, "rolling every ps back"); exit 0 when one
# does, 1 when none.
rolled_back() { grep -hiE 'ROLLBACK|rolling every ps back|MASTER-PS-LOST|MASTER-NO-FAILOVER' "$@"; }

# ledger_balanced RUN [PUSHES]: RUN's ledger record balances (lib/ledger_balanced.py); prints it.
ledger_balanced() { python3 "$SRC/tests/integration/lib/ledger_balanced.py" "$@"; }
# pushes_made RUN: the pushes RUN's workers made (their local steps, from WORKER-DONE), summed.
pushes_made() { cat "$1"/logs/worker-*.log | sed -n 's/.*WORKER-DONE.* after \([0-9]*\) local steps.*/\1/p' | awk '{s+=$1} END {print s+0}'; }

# kill_at LOG RUN LP PHASE [-- PHASE ...]: kill -9 of processes of the `local` cluster whose output is LOG
# (supervisor pid LP, run directory RUN), phase after phase: `step STEP[@MOD:LO-HI] VICTIM...` once RUN/metrics.jsonl
# has a train step >= STEP (and in LO..HI modulo MOD: training.report_every 1), `respawn ROLE:K DELAY_MS VICTIM...` DELAY_MS after `local` spawned ROLE K again (killed in an earlier
# phase: LOCAL-RESPAWN). A VICTIM is ps:K or worker:K; a phase's victims die at once, the workers held (SIGSTOP) from
# the moment it is due until they are dead (lib/kill_at.py). Prints a line a phase (the caller may keep it in a
# file: a failure goes to stderr); fails the test when the run ended first.
kill_at() {
  python3 "$PYLIB/kill_at.py" "$@" || fail "the run ended (or 120 s passed) before a kill was due: kill_at ${*:4}" >&2
}
# rewind_gap RUN: the seconds from the chief's last roll-back (MASTER-RESUME) to the slowest worker's WORKER-REWIND
# after it, and each worker's (lib/rewind_gap.py); returns 1 naming what is missing.
rewind_gap() { python3 "$PYLIB/rewind_gap.py" "$1"; }
