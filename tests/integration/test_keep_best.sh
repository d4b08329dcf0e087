#!/bin/bash
# checkpoint.keep_best and training.early_stopping (#25), on a 150-row CSV with batch 8: train keeps the best
# checkpoint by the eval metric (RUN/checkpoints/best.json names it, the one evaluation picks by the rule) beside
# the newest keep_max, exports it as training goes (export.on_best, export.every_checkpoint), and `export --best`
# ships it; early stopping ends train and a local sync cluster with one line saying why, a final checkpoint and
# exit 0; the chief's best checkpoint is exactly the one its evaluation scored.
. "$(dirname "$0")/lib.sh"
python3 "$PYLIB/blobs_csv.py" "$WORK/all.csv" 7
LAYERS='[{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 3}]'
exp() { # exp OUT KEY=VALUE...: the 4-feature, 3-class experiment on the CSV, eval every 10 steps
  local out=$1; shift
  experiment "$out" data.format='"csv"' data.train.images="\"$WORK/all.csv\"" data.eval.images="\"$WORK/all.csv\"" \
    data.label_column='"label"' data.scale=1 model.input_shape='[4]' model.layers="$LAYERS" training.batch_size=8 \
    training.max_steps=60 training.report_every=10 eval.every_steps=10 optimizer.learning_rate=0.01 "$@"
}
steps_of() { ls "$1/checkpoints" | sed -n 's/^ckpt-0*\([0-9][0-9]*\)$/\1/p' | sort -n | tr '\n' ' '; }
# best_by_rule RUN METRIC MODE: the step of the first eval line with the best METRIC (MODE max or min).
best_by_rule() {
  python3 - "$1/metrics.jsonl" "$2" "$3" <<'PY'
import json, sys
path, metric, mode = sys.argv[1:]
best = None
for line in open(path):
    r = json.loads(line)
    if r.get("kind") != "eval": continue
    v = r[metric]
    if best is None or (v > best[1] if mode == "max" else v < best[1]): best = (r["step"], v)
print(best[0])
PY
}
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

# 1. train: the worst loss (mode max) is an early step, so the best is not among the newest keep_max = 1.
exp "$WORK/best.json" checkpoint.every_steps=20 checkpoint.keep_max=1 checkpoint.keep_best='{"metric": "loss", "mode": "max"}' \
  export.on_best=true export.every_checkpoint=true
R=$WORK/run-best
"$TFX_NODE" train --config "$WORK/best.json" --run-dir "$R" >"$WORK/best.log" 2>&1 || fail "train: $(tail -1 "$WORK/best.log")"
want=$(best_by_rule "$R" loss max)
got=$(field "$R/checkpoints/best.json" step)
[ "$got" = "$want" ] || fail "best.json names step $got; the eval lines' worst loss is at $want"
[ "$(field "$R/checkpoints/best.json" eval_step)" = "$want" ] || fail "train: the best checkpoint is not the step evaluated"
[ "$want" != 60 ] || fail "the worst loss is at the last step: the test cannot tell keep_best from keep_max"
[ "$(steps_of "$R")" = "$want 60 " ] || fail "checkpoints kept: $(steps_of "$R"), want the best ($want) and the newest (60)"
grep -q "TRAIN-BEST step $want is the best checkpoint so far: eval loss" "$WORK/best.log" || fail "no TRAIN-BEST line for $want"
"$TFX_NODE" export --run-dir "$R" --best --out "$WORK/x" >"$WORK/x.log" 2>&1 || fail "export --best: $(tail -1 "$WORK/x.log")"
grep -q "exported step $want " "$WORK/x.log" || fail "export --best: $(cat "$WORK/x.log"), want step $want"
[ "$(field "$R/export/best/metadata.json" step)" = "$want" ] || fail "export.on_best: RUN/export/best is not step $want"
written=$(grep -o "TRAIN-CKPT checkpoint at step [0-9]*" "$WORK/best.log" | awk '{print $NF}' | sort -n | tr '\n' ' ')
[ "$(ls "$R/export" | grep -v best | sort -n | tr '\n' ' ')" = "$written" ] ||
  fail "export.every_checkpoint: exports $(ls "$R/export" | tr '\n' ' '), checkpoints written $written"
for s in $written; do
  [ "$(field "$R/export/$s/metadata.json" step)" = "$s" ] || fail "export.every_checkpoint: RUN/export/$s is not step $s"
done
echo "train: best checkpoint $want kept beside the newest, exported, export --best ships it"

# 2. train: accuracy cannot improve by min_delta 2: the first evaluation (10) stays the best, 20 and 30 spend the
# patience of 2, and the run stops at 30 with its final checkpoint, exit 0.
exp "$WORK/stop.json" training.max_steps=1000 checkpoint.every_steps=0 \
  training.early_stopping='{"metric": "accuracy", "patience": 2, "min_delta": 2}'
S=$WORK/run-stop
"$TFX_NODE" train --config "$WORK/stop.json" --run-dir "$S" >"$WORK/stop.log" 2>&1 || fail "train with early stopping exits $?"
grep -q "TRAIN-EARLY-STOP early stopping at step 30: eval accuracy has not improved on its best [0-9.]* (step 10) for 2 evaluations (patience 2, min_delta 2)" "$WORK/stop.log" ||
  fail "train: no early-stopping line at step 30: $(grep -E 'EARLY|DONE' "$WORK/stop.log")"
[ "$(steps_of "$S")" = "30 " ] || fail "train: checkpoints $(steps_of "$S"), want the final one at 30"
[ "$(grep -c '"kind": "eval"' "$S/metrics.jsonl")" = 3 ] || fail "train: the stop step was evaluated twice"
echo "train: early stopping at 30 (best at 10, patience 2), final checkpoint, exit 0"

# 3. local sync cluster, 2 workers: the chief keeps the best by accuracy, scoring checkpoints, and stops early.
exp "$WORK/cl.json" training.max_steps=3000 checkpoint.every_steps=0 checkpoint.keep_max=1 \
  checkpoint.keep_best='{"metric": "accuracy"}' training.early_stopping='{"metric": "accuracy", "patience": 2, "min_delta": 2}'
C=$WORK/run-cl
"$TFX_NODE" local --workers 2 --config "$WORK/cl.json" --run-dir "$C" >"$WORK/cl.log" 2>&1 || fail "local with early stopping: $(tail -1 "$WORK/cl.log")"
grep -q "MASTER-EARLY-STOP early stopping at step [0-9]*: eval accuracy has not improved on its best" "$C/logs/master-0.log" ||
  fail "local: no MASTER-EARLY-STOP line"
last=$(metric "$C/metrics.jsonl" eval step)
[ "$last" -lt 3000 ] || fail "local: ran to max_steps ($last)"
b=$(field "$C/checkpoints/best.json" step)
[ "$b" = "$(field "$C/checkpoints/best.json" eval_step)" ] || fail "local: the best checkpoint $b is not the step its evaluation scored"
[ "$b" = "$(best_by_rule "$C" accuracy max)" ] || fail "local: best.json names $b; the eval lines' best is $(best_by_rule "$C" accuracy max)"
[ -f "$C/checkpoints/ckpt-$(printf %012d "$b")/manifest.json" ] || fail "local: the best checkpoint $b was pruned"
[ -f "$C/checkpoints/ckpt-$(printf %012d "$last")/manifest.json" ] || fail "local: no final checkpoint at $last"
pass "keep_best, exports as training goes, export --best and early stopping in train and in a local cluster (stopped at $last, best $b)"
