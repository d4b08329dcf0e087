"""served_as_predicted.py QUERIES_IDX PREDICT_JSONL URL STEP: exit 0 when the server at URL (its :predict) answers the
IDX file's images, in one batch, at checkpoint STEP with the probabilities `predict` wrote to PREDICT_JSONL for the
same images (every digit predict prints, of the float the server printed); exit 1 naming the first difference."""
import json, struct, sys, urllib.request
idx, want_file, url, step = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
f32 = lambda v: struct.unpack("f", struct.pack("f", v))[0]  # the float the server printed, exactly
raw = open(idx, "rb").read()
n = struct.unpack(">I", raw[4:8])[0]
px = raw[16:]
inst = [list(px[i * 784:(i + 1) * 784]) for i in range(n)]
req = urllib.request.Request(url, json.dumps({"instances": inst}).encode())
got = json.load(urllib.request.urlopen(req, timeout=120))
if got["step"] != step:
    sys.exit(f"served at step {got['step']}, want {step}")
want = [json.loads(l)["probabilities"] for l in open(want_file)]
if len(want) != n or len(got["predictions"]) != n:
    sys.exit(f"{len(got['predictions'])} served and {len(want)} predicted for {n} queries")
for i, (g, w) in enumerate(zip(got["predictions"], want)):
    if ["%.6g" % f32(v) for v in g] != ["%.6g" % v for v in w]:
        sys.exit(f"instance {i}: served {g}, predict says {w}")
