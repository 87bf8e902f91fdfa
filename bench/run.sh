#!/usr/bin/env bash
# The whole benchmark in one command: builds tpu-bench with the RTL core
# Verilated for the tpuv1 preset at N = 16, 64, 128 and 256 (in build-bench/,
# about ten minutes the first time; without waveform tracing, which would
# nearly double the RTL's CPU time at N = 64), writes the whole networks it
# times (bench/bench_nets.py, in build-bench/nets/), runs it and writes
# bench/results.csv and the Markdown tables (bench/results.md) that
# docs/performance.md quotes.
#
#   bench/run.sh [tpu-bench options]     e.g. bench/run.sh --sizes 16,64
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build-bench
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTPU_BUILD_TESTS=OFF -DTPU_RTL_TRACE=OFF \
  "-DTPU_RTL_PRESETS=tpuv1/16;tpuv1/64;tpuv1/128;tpuv1/256" >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target tpu-bench tpu-sim
# The whole networks (issue 31): ResNet-18 and MobileNetV2 need PyTorch to be
# exported (tools/setup.sh installs it); without it, the CNN0-like stack and MLP0.
only=cnn0_b8,mlp0_b200
if /usr/bin/python3 -c "import torch, torchvision" 2>/dev/null; then
  only=resnet18_b8,mobilenet_v2_b8,$only
fi
nets=$(/usr/bin/python3 "$root/bench/bench_nets.py" "$build/nets" --tpu-sim "$build/sim/tpu-sim" --only "$only" | tail -1)
# shellcheck disable=SC2086
"$build/bench/tpu-bench" --csv "$root/bench/results.csv" --markdown "$root/bench/results.md" $nets "$@"
