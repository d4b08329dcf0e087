#!/bin/bash
# A model written in C as a plugin (examples/plugin, built with its own CMake file): the local cluster trains
# it (its embedding table sliced over 2 ps: row-sparse pushes end to end), its hook sees every event and stops
# the run at an accuracy; a missing plugin and a plugin of another ABI version are refused by name.
. "$(dirname "$0")/lib.sh"
cmake -S "$SRC/examples/plugin" -B "$WORK/pb" >"$WORK/pb.log" 2>&1 && cmake --build "$WORK/pb" >>"$WORK/pb.log" 2>&1 || fail "plugin build: $(tail -5 "$WORK/pb.log")"
EX=$SRC/examples/fashion_mnist_plugin.json
"$TFX_NODE" local --config "$EX" --run-dir "$WORK/run" --set model.plugin="\"$WORK/pb/libmymodel.so\"" \
  --set "model.params={\"dim\": 8, \"hidden\": 64, \"stop_at\": 0.8, \"log\": \"$WORK/hooks.txt\"}" \
  --set eval.every_steps=200 >"$WORK/run.log" 2>&1 || fail "plugin run: $(tail -2 "$WORK/run.log")"
for ev in train_begin step eval checkpoint train_end; do grep -q "^$ev " "$WORK/hooks.txt" || fail "hook never saw $ev: $(cat "$WORK/hooks.txt")"; done
grep -q "MASTER-HOOK-STOP" "$WORK/run/logs/master-0.log" || fail "the hook's stop request was not honoured"
step=$(metric "$WORK/run/metrics.jsonl" eval step); acc=$(metric "$WORK/run/metrics.jsonl" eval accuracy)
[ "$step" -lt 2000 ] || fail "run did not stop early (step $step)"
ge "$acc" 0.8 || fail "accuracy $acc at the stop"
"$TFX_NODE" inspect "$WORK/run" | grep "embedding_1/embeddings " | grep -q "ps 0,1" || fail "embedding table not sliced over both ps"
out=$("$TFX_NODE" model --config "$EX" --set model.plugin="\"$WORK/pb/libmymodel_badabi.so\"" 2>&1); rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q "ABI version 2, this tfx-node speaks 1" || fail "wrong ABI: exit $rc: $out"
out=$("$TFX_NODE" model --config "$EX" --set model.plugin='"/nonexistent/libx.so"' 2>&1); rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q "cannot load" || fail "missing plugin: exit $rc: $out"
pass "plugin model trained to $acc at step $step, stopped by its hook"
