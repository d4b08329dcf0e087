#!/bin/bash
# The main job: installs dependencies, builds tfx (Release), and trains the Fashion-MNIST MLP on a local
# cluster (1 master, 2 ps, 2 workers as real processes over Unix sockets). Installs only the build and runtime
# packages (install-deps.sh run). Extra arguments go to `tfx-node local`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh run
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTFX_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" --target tfx-node
exec build/tfx-node local --config examples/fashion_mnist_mlp.json --run-dir runs/fashion_mnist_mlp "$@"
