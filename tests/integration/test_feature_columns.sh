#!/bin/bash
# Crossed and log1p feature columns end to end, from a CSV file to an evaluated model. The label is two bits: the
# parity of two categorical columns a and b (only their cross separates it: an additive model of a and b alone
# is at chance on it) and whether x > 1000, where x is spread over 14 orders of e (linear in log1p(x); in x
# itself, the scale swamps training). A linear model of embedding_bag(a), (b), (crossed a,b) and dense(log1p x)
# reaches >= 0.95; without the cross it stays under 0.8, and without log1p under 0.9 with an eval loss over 1
# (the full model's is about 0.09; these runs are deterministic); a local cluster (1 ps, 2 workers) trains the
# full model too.
. "$(dirname "$0")/lib.sh"
python3 - "$WORK" <<'PY'
import math, random, sys
random.seed(7)
for name, n in (("train.csv", 6000), ("test.csv", 1000)):
    with open("%s/%s" % (sys.argv[1], name), "w") as f:
        f.write("label,a,b,x\n")
        for _ in range(n):
            a, b, x = random.randrange(4), random.randrange(4), math.exp(random.uniform(0, 14))
            f.write("%d,%d,%d,%.3f\n" % (2 * ((a + b) % 2) + (x > 1000), a, b, x))
PY
model() { # model OUT CROSS(0|1) NORMALIZER KEY=VALUE...
  local out=$1 cross=$2 norm=$3; shift 3
  local wab='' ab=''
  [ "$cross" = 1 ] && ab='{"name": "ab", "type": "crossed", "keys": "a,b", "hash_bucket_size": 64},' &&
    wab='{"type": "embedding_bag", "name": "wab", "inputs": "ab", "units": 4, "combiner": "sum"},'
  experiment "$out" model.features="[{\"key\": \"a\", \"type\": \"identity\", \"num_buckets\": 4},
    {\"key\": \"b\", \"type\": \"identity\", \"num_buckets\": 4}, $ab
    {\"key\": \"x\", \"type\": \"numeric\", \"normalizer\": \"$norm\"}]" \
    model.layers="[{\"type\": \"embedding_bag\", \"name\": \"wa\", \"inputs\": \"a\", \"units\": 4, \"combiner\": \"sum\"},
    {\"type\": \"embedding_bag\", \"name\": \"wb\", \"inputs\": \"b\", \"units\": 4, \"combiner\": \"sum\"}, $wab
    {\"type\": \"dense\", \"name\": \"wx\", \"inputs\": \"input\", \"units\": 4},
    {\"type\": \"add\", \"name\": \"logits\", \"inputs\": \"wa,wb,$([ "$cross" = 1 ] && echo wab,)wx\"}]" \
    model.loss='"softmax_cross_entropy"' data.format='"csv"' data.label_column='"label"' \
    data.train.images="\"$WORK/train.csv\"" data.eval.images="\"$WORK/test.csv\"" data.scale=1 \
    optimizer.name='"adagrad"' optimizer.learning_rate=0.5 training.batch_size=32 training.epochs=3 \
    training.report_every=100 eval.every_steps=0 "$@"
}
declare -A ACC LOSS
for v in "full 1 log1p" "nocross 0 log1p" "nolog 1 -"; do
  set -- $v
  model "$WORK/$1.json" "$2" "${3#-}" # "-": no normalizer
  "$TFX_NODE" train --config "$WORK/$1.json" --run-dir "$WORK/run-$1" >"$WORK/$1.log" 2>&1 || fail "$1: $(tail -1 "$WORK/$1.log")"
  ACC[$1]=$(metric "$WORK/run-$1/metrics.jsonl" eval accuracy) LOSS[$1]=$(metric "$WORK/run-$1/metrics.jsonl" eval loss)
  echo "$1: eval accuracy ${ACC[$1]}, loss ${LOSS[$1]}"
done
ge "${ACC[full]}" 0.95 || fail "crossed + log1p reached accuracy ${ACC[full]}, want >= 0.95"
le "${ACC[nocross]}" 0.8 || fail "without the crossed column accuracy ${ACC[nocross]}: the cross does not carry the parity"
le "${ACC[nolog]}" 0.9 && ge "${LOSS[nolog]}" 1 ||
  fail "without log1p accuracy ${ACC[nolog]}, loss ${LOSS[nolog]}: the normalizer makes no difference"
"$TFX_NODE" local --config "$WORK/full.json" --run-dir "$WORK/run-local" --workers 2 --ps 1 --max-steps 300 \
  >"$WORK/local.log" 2>&1 || fail "local cluster: $(tail -1 "$WORK/local.log")"
lacc=$(metric "$WORK/run-local/metrics.jsonl" eval accuracy)
ge "$lacc" 0.9 || fail "the cluster reached accuracy $lacc after 300 steps, want >= 0.9"
pass "crossed + log1p columns: accuracy ${ACC[full]} (without the cross ${ACC[nocross]}, without log1p ${ACC[nolog]}), cluster $lacc"
