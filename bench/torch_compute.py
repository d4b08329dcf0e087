#!/usr/bin/env python3
"""PyTorch side of bench/compute: training-step throughput of the same model, batch and thread count.

Each model comes as NAME=SPEC.json, the resolved experiment that `tfx-bench-compute --spec` prints, so both
sides build the same layers. A step is model(x), cross_entropy, backward, Adam step, zero_grad, on a pool of
fixed-seed random batches, timed the way tfx-bench-compute times tfx (warm-up, then rounds of >= 0.25 s,
median rate). With --worker it also times a worker step: model(x), cross_entropy, backward, zero_grad, with
no optimizer (in a tfx cluster the ps applies it). Threads: torch.set_num_threads(T) for its OpenMP pool and openblas_set_num_threads(T) for the
OpenBLAS pool that its Linear layers use. With --ftz, denormals are flushed to zero (FTZ+DAZ) on the main
thread and the threads it starts later, as compute.c --ftz does. Prints one line per case:
  torch model=M batch=B threads=T ex_s=... step_ms=... fwd_ms=... loss_ms=... bwd_ms=... adam_ms=... steps=...
  torch_worker model=M batch=B threads=T ex_s=... step_ms=... fwd_ms=... loss_ms=... bwd_ms=... steps=...
"""
import argparse
import ctypes
import ctypes.util
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

ROUND_S = 0.25
POOL = 32  # distinct random batches cycled through, as in compute.c


def openblas_threads(n):
    """Sets OpenBLAS's own thread count (torch.set_num_threads does not reach it on Debian's generic-BLAS
    build); returns the count OpenBLAS reports, or None when no OpenBLAS is loaded."""
    for name in ("libopenblas.so.0", ctypes.util.find_library("openblas")):
        try:
            lib = ctypes.CDLL(name)
        except (OSError, TypeError):
            continue
        lib.openblas_set_num_threads(ctypes.c_int(n))
        return lib.openblas_get_num_threads()
    return None


def strides_of(spec, default):
    """The layer's stride: tfx writes 0 for "the layer's default" (1 for conv2d, pool_size for pooling)."""
    return spec.get("strides") or default


def conv_layer(spec, in_ch):
    """A Conv2d for a tfx conv2d spec ('same' padding: stride 1 only, as torch supports it)."""
    k, stride, pad = spec["kernel_size"], strides_of(spec, 1), spec["padding"]
    if pad == "same" and stride != 1:
        raise SystemExit(f"torch_compute: conv2d padding 'same' with stride {stride} is not supported")
    return nn.Conv2d(in_ch, spec["filters"], k, stride=stride, padding=pad)


ACTS = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}


def build_model(cfg):
    """nn.Sequential with the layers of a tfx experiment (NCHW), and the input shape [C, H, W]."""
    h, w, c = cfg["model"]["input_shape"]
    layers, flat = [], None
    for s in cfg["model"]["layers"]:
        t = s["type"]
        if t == "conv2d":
            layers.append(conv_layer(s, c))
            c = s["filters"]
            st = strides_of(s, 1)
            h, w = (h, w) if s["padding"] == "same" else ((h - s["kernel_size"]) // st + 1,
                                                          (w - s["kernel_size"]) // st + 1)
        elif t in ("max_pool2d", "avg_pool2d"):
            p, st = s["pool_size"], strides_of(s, s["pool_size"])
            if s.get("padding", "valid") != "valid":
                raise SystemExit(f"torch_compute: {t} padding '{s['padding']}' is not supported")
            pool = nn.MaxPool2d if t == "max_pool2d" else nn.AvgPool2d
            layers.append(pool(p, stride=st))
            h, w = (h - p) // st + 1, (w - p) // st + 1
        elif t == "flatten":
            layers.append(nn.Flatten())
            flat = c * h * w
        elif t == "dense":
            layers.append(nn.Linear(flat, s["units"]))
            flat = s["units"]
        elif t == "dropout":
            layers.append(nn.Dropout(s["rate"]))
        elif t in ACTS:
            layers.append(ACTS[t]())
            continue
        else:
            raise SystemExit(f"torch_compute: layer type '{t}' not supported")
        if s.get("activation", "none") not in ("none", "linear", ""):
            layers.append(ACTS[s["activation"]]())
    return nn.Sequential(*layers), [cfg["model"]["input_shape"][2], *cfg["model"]["input_shape"][:2]]


class Step:
    """One training step (or, without optimize, a worker step) with its phases timed (seconds summed over
    calls)."""

    def __init__(self, cfg, batch, optimize=True):
        torch.manual_seed(42)
        self.model, shape = build_model(cfg)
        self.model.train()
        o = cfg["optimizer"]
        self.opt = torch.optim.Adam(self.model.parameters(), lr=o["learning_rate"], betas=(o["beta1"], o["beta2"]),
                                    eps=o["epsilon"], weight_decay=o["weight_decay"])
        classes = cfg["model"]["layers"][-1]["units"]
        self.x = torch.rand(POOL, batch, *shape)
        self.y = torch.randint(0, classes, (POOL, batch))
        self.n, self.phase, self.optimize = 0, [0.0, 0.0, 0.0, 0.0], optimize

    def __call__(self):
        j = self.n % POOL
        t0 = time.perf_counter()
        out = self.model(self.x[j])
        t1 = time.perf_counter()
        loss = F.cross_entropy(out, self.y[j])
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        if self.optimize:
            self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        t4 = time.perf_counter()
        for i, d in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            self.phase[i] += d
        self.n += 1


def measure(fn, seconds):
    """Warm-up for a quarter of `seconds`, then rounds of >= ROUND_S s: (median calls/s, calls timed)."""
    start, i = time.perf_counter(), 0
    while i < 3 or time.perf_counter() - start < seconds / 4:
        fn()
        i += 1
    rates, calls, start = [], 0, time.perf_counter()
    while len(rates) < 3 or time.perf_counter() - start < seconds:
        t0, k = time.perf_counter(), 0
        while True:
            fn()
            k += 1
            t1 = time.perf_counter()
            if t1 - t0 >= ROUND_S:
                break
        rates.append(k / (t1 - t0))
        calls += k
    return statistics.median(rates), calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--ftz", action="store_true", help="flush denormals to zero (torch.set_flush_denormal)")
    ap.add_argument("--worker", action="store_true", help="also time a worker step (no optimizer)")
    ap.add_argument("--info", action="store_true", help="print the versions and exit")
    ap.add_argument("models", nargs="*", help="NAME=SPEC.json")
    a = ap.parse_args()
    if a.info:
        print(f"info torch={torch.__version__} python={sys.version.split()[0]} "
              f"onednn={torch.backends.mkldnn.is_available()} openblas_threads_settable={openblas_threads(1) is not None}")
        return 0
    ftz = a.ftz and torch.set_flush_denormal(True)
    if a.ftz and not ftz:
        raise SystemExit("torch_compute: this CPU cannot flush denormals")
    wait, fp = os.environ.get("OMP_WAIT_POLICY", "default").lower(), "ftz" if ftz else "default"
    for arg in a.models:
        name, path = arg.split("=", 1)
        with open(path) as f:
            cfg = json.load(f)
        for t in (int(x) for x in a.threads.split(",")):
            torch.set_num_threads(t)
            blas = openblas_threads(t)
            for optimize in (True, False) if a.worker else (True,):
                step = Step(cfg, a.batch, optimize)
                rate, calls = measure(step, a.seconds)
                per = 1e3 / step.n
                phases = ("fwd", "loss", "bwd", "adam") if optimize else ("fwd", "loss", "bwd")
                ph = " ".join(f"{k}_ms={v * per:.4f}" for k, v in zip(phases, step.phase))
                print(f"{'torch' if optimize else 'torch_worker'} model={name} batch={a.batch} threads={t} "
                      f"ex_s={rate * a.batch:.1f} step_ms={1e3 / rate:.4f} {ph} steps={calls} "
                      f"openblas_threads={blas} omp_wait_policy={wait} fp={fp}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
