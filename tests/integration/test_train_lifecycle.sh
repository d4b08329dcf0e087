#!/bin/bash
# Single-process training learns (loss threshold), writes metrics/config/checkpoint; export writes a valid
# safetensors file equal to the checkpoint; inspect lists every variable; predict agrees with evaluate.
. "$(dirname "$0")/lib.sh"
run=$WORK/run
"$TFX_NODE" train --config "$EXAMPLE" --run-dir "$run" --max-steps 300 >"$WORK/train.log" 2>&1 || fail "train: $(tail -1 "$WORK/train.log")"
loss=$(metric "$run/metrics.jsonl" train loss); acc=$(metric "$run/metrics.jsonl" eval accuracy)
le "$loss" 0.75 || fail "train loss after 300 steps is $loss, want <= 0.75"
ge "$acc" 0.78 || fail "eval accuracy after 300 steps is $acc, want >= 0.78"
[ -f "$run/config.json" ] || fail "no config.json"
ls "$run"/checkpoints/ckpt-000000000300/manifest.json >/dev/null || fail "no checkpoint at step 300"
"$TFX_NODE" train --config "$EXAMPLE" --run-dir "$run" --set training.steps=50 >"$WORK/more.log" 2>&1 || fail "relative steps: $(tail -1 "$WORK/more.log")"
grep -q "TRAIN-RESUME resumed from .* at step 300" "$WORK/more.log" || fail "second train did not resume at 300"
[ "$(metric "$run/metrics.jsonl" eval step)" = 350 ] || fail "training.steps=50 from step 300 did not stop at 350"
acc=$(metric "$run/metrics.jsonl" eval accuracy)
"$TFX_NODE" evaluate --run-dir "$run" >"$WORK/eval.txt" 2>&1 || fail "evaluate: $(cat "$WORK/eval.txt")"
grep -q "step 350: eval .* accuracy $(python3 -c "print('%.4f' % $acc)")" "$WORK/eval.txt" || fail "evaluate disagrees with the run's last eval ($acc): $(cat "$WORK/eval.txt")"
"$TFX_NODE" evaluate --run-dir "$run" --checkpoint 300 --steps 2 | grep -q "step 300: .* over 2000 examples" || fail "evaluate --checkpoint 300 --steps 2"
"$TFX_NODE" export --run-dir "$run" --out "$WORK/export" >"$WORK/export.log" 2>&1 || fail "export: $(cat "$WORK/export.log")"
exp=$(ls -d "$WORK"/export/*/ | head -1)
python3 - "$exp/model.safetensors" <<'PY' || fail "safetensors file malformed"
import json, struct, sys
data = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", data[:8]); header = json.loads(data[8:8 + n])
names = sorted(k for k in header if k != "__metadata__")
assert names == ["dense_1/bias", "dense_1/kernel", "dense_2/bias", "dense_2/kernel", "dense_3/bias", "dense_3/kernel"], names
assert header["dense_1/kernel"]["shape"] == [784, 256]
PY
python3 - "$exp/metadata.json" "$acc" <<'PY' || fail "export metadata: $(cat "$exp/metadata.json")"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["step"] == 350 and m["variables"] == 6 and len(m["config_crc32"]) == 8, m
assert abs(m["last_eval"]["accuracy"] - float(sys.argv[2])) < 1e-6, m
PY
# inspect shows an export's step (its metadata's), and --checkpoint picks the step export and predict use (#25:
# both took the newest whatever was asked): the export of 300 holds 300's values, not 350's.
"$TFX_NODE" inspect "$exp" | grep -q "^source .* step 350$" || fail "inspect of the export: $("$TFX_NODE" inspect "$exp" 2>&1 | head -1)"
"$TFX_NODE" export --run-dir "$run" --checkpoint 300 --out "$WORK/export300" >"$WORK/export300.log" 2>&1 ||
  fail "export --checkpoint 300: $(cat "$WORK/export300.log")"
grep -q "exported step 300 " "$WORK/export300.log" || fail "export --checkpoint 300: $(cat "$WORK/export300.log")"
exp300=$(ls -d "$WORK"/export300/*/ | head -1)
var_values "$exp300" dense_3/bias >"$WORK/v_exp300.txt" || fail "inspect export 300"
var_values "$run/checkpoints/ckpt-000000000300" dense_3/bias >"$WORK/v_ckpt300.txt" || fail "inspect checkpoint 300"
cmp -s "$WORK/v_exp300.txt" "$WORK/v_ckpt300.txt" || fail "export --checkpoint 300 does not hold step 300's values"
var_values "$run" dense_3/bias | cmp -s - "$WORK/v_exp300.txt" && fail "step 300's and 350's values are the same: the check above proves nothing"
# A second export into the same --out never writes over the first, even within the same second (the directory is
# named by the unix time; a taken name gets -2, -3, ...): both keep their own step.
"$TFX_NODE" export --run-dir "$run" --out "$WORK/export300" >"$WORK/export350.log" 2>&1 || fail "second export"
[ "$(ls -d "$WORK"/export300/*/ | wc -l)" = 2 ] || fail "two exports into one --out left $(ls "$WORK/export300")"
[ "$(grep -l '"step": 300' "$WORK"/export300/*/metadata.json | wc -l)" = 1 ] || fail "the step-300 export was written over"
"$TFX_NODE" inspect "$run" >"$WORK/inspect.txt" 2>&1 || fail "inspect run"
for v in dense_1/kernel dense_1/bias dense_2/kernel dense_2/bias dense_3/kernel dense_3/bias; do
  grep -q "^$v " "$WORK/inspect.txt" || fail "inspect does not list $v"
done
var_values "$run" dense_3/bias >"$WORK/v_ckpt.txt" || fail "inspect --var"
var_values "$exp" dense_3/bias >"$WORK/v_exp.txt" || fail "inspect export --var"
[ "$(wc -l <"$WORK/v_ckpt.txt")" = 10 ] || fail "inspect --var dense_3/bias: $(wc -l <"$WORK/v_ckpt.txt") values, want 10"
cmp -s "$WORK/v_ckpt.txt" "$WORK/v_exp.txt" || fail "export values differ from the checkpoint"
imgs=/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz
"$TFX_NODE" predict --export "$exp" --input "$imgs" --output "$WORK/pred.jsonl" --keys classes >"$WORK/pred.log" 2>&1 || fail "predict: $(tail -1 "$WORK/pred.log")"
[ "$(grep -c . "$WORK/pred.jsonl")" = 10000 ] || fail "predict rows"
# A --keys typo is refused naming it, writing nothing (it had written only indices, with exit 0: #30, item 18).
"$TFX_NODE" predict --run-dir "$run" --checkpoint 300 --input "$imgs" --output "$WORK/p300.jsonl" >/dev/null 2>&1 ||
  fail "predict --checkpoint 300"
"$TFX_NODE" predict --export "$exp300" --input "$imgs" --output "$WORK/p300x.jsonl" >/dev/null 2>&1 || fail "predict export 300"
cmp -s "$WORK/p300.jsonl" "$WORK/p300x.jsonl" || fail "predict --checkpoint 300 differs from the export of 300"
"$TFX_NODE" predict --run-dir "$run" --input "$imgs" --output "$WORK/p350.jsonl" >/dev/null 2>&1 || fail "predict newest"
cmp -s "$WORK/p350.jsonl" "$WORK/p300.jsonl" && fail "predict of 350 equals 300's: --checkpoint was ignored or proves nothing"
out=$("$TFX_NODE" predict --export "$exp" --input "$imgs" --output "$WORK/bogus.jsonl" --keys classes,bogus 2>&1); rc=$?
[ "$rc" = 2 ] || fail "predict --keys classes,bogus: exit $rc, want 2"
echo "$out" | grep -q "\-\-keys: unknown key 'bogus' (want probabilities, classes)" || fail "--keys typo not named: $out"
[ ! -e "$WORK/bogus.jsonl" ] || fail "a refused predict wrote its output"
pacc=$(python3 - "$WORK/pred.jsonl" <<'PY'
import gzip, json, sys
labels = gzip.open("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz").read()[8:]
rows = [json.loads(l) for l in open(sys.argv[1])]
print(sum(r["class"] == labels[r["index"]] for r in rows) / len(rows))
PY
)
python3 -c "import sys; sys.exit(0 if abs($pacc - $acc) < 1e-3 else 1)" || fail "predict accuracy $pacc != eval accuracy $acc"
# Warm start: dense_1 from this run (learning rate 0 keeps the values as taken), everything else fresh.
"$TFX_NODE" train --config "$EXAMPLE" --run-dir "$WORK/warm" --max-steps 1 --set warm_start.from="$run" \
  --set warm_start.to_restore=dense_1 --set optimizer.learning_rate=0 >"$WORK/warm.log" 2>&1 || fail "warm start: $(tail -1 "$WORK/warm.log")"
grep -q "WARM-START took 2 variable(s)" "$WORK/warm.log" || fail "warm start did not take dense_1's 2 variables"
for r in run warm; do
  for v in dense_1/kernel dense_3/kernel dense_3/bias; do
    var_values "$WORK/$r" $v >"$WORK/$r-${v/\//-}.txt" || fail "inspect $r $v"
  done
done
cmp -s "$WORK/run-dense_1-kernel.txt" "$WORK/warm-dense_1-kernel.txt" || fail "warm-started dense_1/kernel differs from the source"
# dense_3 fresh: its kernel is not the source's, and its bias is the initializer's zeros where the source's is not.
cmp -s "$WORK/run-dense_3-kernel.txt" "$WORK/warm-dense_3-kernel.txt" && fail "dense_3/kernel was taken from the source"
all_zero "$WORK/run-dense_3-bias.txt" && fail "the source's dense_3/bias is all zeros: the check below could not fail"
all_zero "$WORK/warm-dense_3-bias.txt" || fail "dense_3/bias was not initialized fresh"
out=$("$TFX_NODE" train --config "$EXAMPLE" --run-dir "$WORK/warm-bad" --max-steps 1 --set warm_start.from="$run" \
  --set warm_start.rename=dense_3/bias:dense_2/bias 2>&1); rc=$?
[ "$rc" = 2 ] || fail "warm start with a mismatched rename: exit $rc, want 2"
echo "$out" | grep -q "dense_3/bias has 10 values .* dense_2/bias has 128" || fail "mismatch not named: $out"
# The first periodic checkpoint has no earlier write to keep its distance from: asked every 400 steps of a run
# shorter than checkpoint.min_interval_secs, step 400 is on disk beside the final one (it was not).
"$TFX_NODE" train --config "$EXAMPLE" --run-dir "$WORK/every" --max-steps 800 --set checkpoint.every_steps=400 \
  --set eval.every_steps=0 >"$WORK/every.log" 2>&1 || fail "train every 400: $(tail -1 "$WORK/every.log")"
[ -f "$WORK/every/checkpoints/ckpt-000000000400/manifest.json" ] || fail "no checkpoint at 400: $(ls "$WORK/every/checkpoints")"
pass "train -> export -> inspect -> predict (loss $loss, accuracy $acc)"
