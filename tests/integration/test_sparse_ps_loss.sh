#!/bin/bash
# A sparse worker waits for a lost ps as a dense one does: a local cluster (2 ps, 2 workers) trains a logistic
# regression whose embedding_bag table is lazy (held by rows on both ps, pulled by the rows each batch touches);
# each ps in turn is killed with kill -9 mid-run. A worker whose row pull finds its ps gone (or back empty) logs
# WORKER-PS-WAIT and pulls until every ps answers, then asks for its batch's rows again: no worker exits
# ("training input: ... connection was lost", exit 1, was 2 of 4 tries with one kill), and the run finishes with
# exit 0 and learns. Without replicas (cluster.replicas 0; with them a lost ps's backup takes over and nobody
# waits: test_replicas_lazy.sh).
. "$(dirname "$0")/lib.sh"
python3 "$(dirname "$0")/sparse_data.py" "$WORK"
experiment "$WORK/lr.json" model.input_shape='[1048576]' \
  model.layers='[{"type": "embedding_bag", "units": 4, "combiner": "sum"}]' model.loss='"softmax_cross_entropy"' \
  data.format='"libsvm"' data.train.images="\"$WORK/train.libsvm\"" data.eval.images="\"$WORK/test.libsvm\"" \
  data.scale=1 optimizer.name='"adagrad"' optimizer.learning_rate=0.5 training.batch_size=32 training.epochs=60 cluster.request_timeout_s=10 \
  training.report_every=50 eval.every_steps=0 checkpoint.every_steps=500 cluster.replicas=0
RUN=$WORK/run
"$TFX_NODE" local --config "$WORK/lr.json" --run-dir "$RUN" --ps 2 --workers 2 >"$WORK/local.log" 2>&1 &
LP=$!
PIDS+=($LP)
waits() { cat "$RUN"/logs/worker-*.log 2>/dev/null | grep -c "WORKER-PS-BACK"; }
# kill_ps K AT: kill -9 of ps K at step AT or later, the workers held meanwhile (kill_ps_at: the kill lands inside
# the run however fast it trains, and fails the test when it cannot), then waits until the workers are back on
# every ps.
kill_ps() {
  local back
  back=$(waits)
  kill_ps_at "$WORK/local.log" "$RUN" "$2" "$LP" "$1"
  wait_for 120 bash -c "[ \$(cat '$RUN'/logs/worker-*.log | grep -c WORKER-PS-BACK) -gt $back ] || ! kill -0 $LP" ||
    fail "the workers did not come back after ps $1 was killed"
}
wait_for 300 has_ckpt "$RUN" || fail "no checkpoint to kill after: $(tail -2 "$WORK/local.log")"
kill_ps 1 $(($(step) + 50))
kill_ps 0 $(($(step) + 200))
wait "$LP" || fail "the run did not survive kill -9 of the ps: $(tail -3 "$WORK/local.log")"
grep -h "NODE-FAIL" "$RUN"/logs/worker-*.log && fail "a worker exited instead of waiting for its ps"
grep -q "WORKER-PS-WAIT" "$RUN"/logs/worker-*.log || fail "no worker waited for a ps"
acc=$(metric "$RUN/metrics.jsonl" eval accuracy)
[ "$(metric "$RUN/metrics.jsonl" eval step)" = 5625 ] || fail "60 epochs end at 5625, the run at $(metric "$RUN/metrics.jsonl" eval step)"
ge "$acc" 0.85 || fail "after kill -9 of each ps the accuracy is $acc"
waited=$(for f in "$RUN"/logs/worker-*.log; do printf '%s ' "$(grep -c WORKER-PS-WAIT "$f")"; done)
pass "each ps killed once: the workers waited (WORKER-PS-WAIT per worker: $waited), none exited, accuracy $acc"
