#!/bin/bash
# Half-precision rows end to end (#28, checkpoint.fp16 with checkpoint.incremental): the sparse LR (an embedding_bag
# of 16 units on 2 ps, a dense layer after it) trains 20 steps with float row files (run F) and with half ones
# (run H), a checkpoint every 5 steps (a full row file at 5, deltas after). The restore is not on the
# training path, so both runs train alike: the export of H's step 20, read through its half chain, is within 2^-11
# relative of F's, and its row files take about half the bytes. H then resumes from that chain with fp16 off: it
# goes on from step 20, not from scratch, its first checkpoint starts a new full chain in float, and its weights at
# step 40 stay within 1% (of each tensor's largest) of the float run's.
. "$(dirname "$0")/lib.sh"
python3 "$(dirname "$0")/sparse_data.py" "$WORK" --train 1920 --test 100
lr() { # OUT MAX_STEPS FP16
  experiment "$1" model.input_shape='[1048576]' \
    model.layers='[{"type": "embedding_bag", "units": 16, "combiner": "sum"}, {"type": "dense", "units": 4}]' \
    model.loss='"softmax_cross_entropy"' data.format='"libsvm"' data.train.images="\"$WORK/train.libsvm\"" \
    data.eval.images="\"$WORK/test.libsvm\"" data.scale=1 optimizer.name='"adagrad"' optimizer.learning_rate=0.5 \
    training.mode='"sync"' training.batch_size=32 training.max_steps="$2" training.seed=1 training.report_every=5 \
    eval.every_steps=0 checkpoint.every_steps=5 checkpoint.keep_max=1000 checkpoint.incremental=true \
    checkpoint.fp16="$3"
}
train() { # CONFIG RUN
  "$TFX_NODE" local --config "$1" --run-dir "$WORK/$2" --ps 2 --workers 1 >>"$WORK/$2.log" 2>&1 ||
    fail "run $2 ($1) failed: $(tail -2 "$WORK/$2.log")"
}
export_at() { # RUN STEP NAME: the checkpoint of STEP read through its chain into safetensors
  "$TFX_NODE" export --run-dir "$WORK/$1" --out "$WORK/$3" --checkpoint "$2" >"$WORK/$3.log" 2>&1 ||
    fail "export of $1 at step $2: $(tail -2 "$WORK/$3.log")"
}
# close A B TOL [tensor]: every value of export B within TOL relative (plus 2^-24 for values near zero) of export
# A's, or with `tensor` within TOL of its tensor's largest magnitude; prints the largest relative difference
close() {
  python3 - "$(find "$WORK/$1" -name model.safetensors | head -1)" "$(find "$WORK/$2" -name model.safetensors | head -1)" "$3" "${4:-value}" <<'PY'
import array, json, struct, sys
def load(path):  # name -> the tensor's raw little-endian float32 bytes
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    head = json.loads(data[8:8 + n])
    return {k: data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in head.items()
            if k != "__metadata__"}
def floats(raw):
    return array.array("f", raw)
a, b, tol, per_tensor = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "tensor"
if sorted(a) != sorted(b) or not a:
    sys.exit(f"tensors differ: {sorted(a)} vs {sorted(b)}")
if all(raw == bytes(len(raw)) for raw in a.values()):
    sys.exit("every weight is zero: nothing trained")
worst, step = 0.0, 4096
for k in a:
    if a[k] == b[k]:
        continue
    whole = floats(a[k])
    top = max(max(whole), -min(whole)) if per_tensor else 0.0
    for at in range(0, len(a[k]), step):  # only the 4 KiB pieces that differ are compared value by value
        if a[k][at:at + step] == b[k][at:at + step]:
            continue
        for x, y in zip(floats(a[k][at:at + step]), floats(b[k][at:at + step])):
            if abs(x - y) > tol * (top if per_tensor else abs(x)) + 2.0 ** -24:
                sys.exit(f"{k}: {y} vs the float run's {x} (beyond {tol} relative{' to ' + str(top) if per_tensor else ''})")
            worst = max(worst, abs(x - y) / (top if per_tensor else abs(x)) if x else 0.0)
print(f"{worst:.3g}")
PY
}
lr "$WORK/f20.json" 20 false
lr "$WORK/h20.json" 20 true
lr "$WORK/h40.json" 40 false
lr "$WORK/f40.json" 40 false
train "$WORK/f20.json" F
train "$WORK/h20.json" H
bytes() { stat -c %s "$WORK/$1"/checkpoints/ckpt-*20/ps-0.rows; }
fb=$(bytes F)
hb=$(bytes H)
python3 -c "import sys; sys.exit(0 if $hb * 10 <= $fb * 6 else 1)" || fail "step 20's half row file $hb bytes vs float $fb"
grep -q "at step 20: .*checkpoint delta" "$WORK/H/logs/ps-0.log" || fail "step 20 of the half run is no delta"
export_at F 20 f20
export_at H 20 h20
rel=$(close f20 h20 0.00048828125 2>&1) || fail "step 20 through the half chain: $rel"
# resume H from its half chain with fp16 off, and F from its float chain, both to step 40
train "$WORK/h40.json" H
train "$WORK/f40.json" F
first=$(grep -oE '^step [0-9]+/40' "$WORK/H.log" | head -1 | grep -oE '[0-9]+' | head -1) # the resumed run's progress
[ -n "$first" ] && [ "$first" -gt 20 ] || fail "the resumed run did not go on from step 20 (its first progress line: step ${first:-none})"
grep -q "at step 25: .*checkpoint full" "$WORK/H/logs/ps-0.log" ||
  fail "fp16 switched off at the restart: step 25 is no full row file: $(grep 'at step 25' "$WORK/H/logs/ps-0.log")"
h25=$(ls -d "$WORK"/H/checkpoints/ckpt-*25)
python3 -c "import sys; sys.exit(0 if open('$h25/ps-0.rows','rb').read(12)[8] == 1 else 1)" ||
  fail "step 25's row file is not a float full file (format byte $(od -An -tu1 -j8 -N1 "$h25/ps-0.rows"))"
export_at F 40 f40
export_at H 40 h40
rel40=$(close f40 h40 0.01 tensor 2>&1) || fail "step 40 after the half restore: $rel40"
pass "half chain at step 20: $hb vs $fb row-file bytes, export within $rel relative of the float run's; resumed with fp16 off: a new full float chain at 25, step 40 within $rel40"
