#!/usr/bin/env python3
"""The Python reference server for bench/serve_ref (#29): the same MLP, read from a tfx export's model.safetensors,
as a PyTorch module behind Python's ThreadingHTTPServer, answering TensorFlow Serving's predict body exactly as
`tfx-node serve` does ({"instances": [[784 raw pixels], ...]} -> {"predictions": [[10 probabilities], ...]}).

    serve_torch.py EXPORT_DIR PORT [--scale S]     (S: data.scale, 1/255 for Fashion-MNIST)"""
import json, struct, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch


def load(path):
    """The export's tensors by name (safetensors: a little-endian u64 header length, a JSON header, the data)."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    out = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=torch.float32).reshape(t["shape"])
    return out


class MLP(torch.nn.Module):
    def __init__(self, w, scale):
        super().__init__()
        self.w, self.scale = w, scale
        self.layers = sorted({k.split("/")[0] for k in w}, key=lambda s: int(s.split("_")[-1]))

    def forward(self, x):
        h = x * self.scale
        for i, name in enumerate(self.layers):
            h = h @ self.w[name + "/kernel"] + self.w[name + "/bias"]
            if i + 1 < len(self.layers):
                h = torch.relu(h)
        return torch.softmax(h, dim=1)


def main():
    export, port = sys.argv[1], int(sys.argv[2])
    scale = float(sys.argv[sys.argv.index("--scale") + 1]) if "--scale" in sys.argv else 1 / 255
    torch.set_num_threads(1)
    model = MLP(load(export + "/model.safetensors"), scale)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.reply(200, {"model": "reference"})

        def do_POST(self):
            try:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                x = torch.tensor(body["instances"], dtype=torch.float32).reshape(len(body["instances"]), -1)
                with torch.no_grad():
                    self.reply(200, {"predictions": model(x).tolist()})
            except (ValueError, KeyError, TypeError, RuntimeError) as e:
                self.reply(400, {"error": str(e)})

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
