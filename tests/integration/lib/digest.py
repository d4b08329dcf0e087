"""digest.py SAFETENSORS: one line per tensor (its name and the sha256 of its bytes), sorted by name: two models
are bit-identical when their digests are. lib.sh's digest."""
import hashlib, json, struct, sys
data = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", data[:8])
head = json.loads(data[8:8 + n])
for k in sorted(k for k in head if k != "__metadata__"):
    a, b = head[k]["data_offsets"]
    print(k, hashlib.sha256(data[8 + n + a:8 + n + b]).hexdigest())
