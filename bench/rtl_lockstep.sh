#!/usr/bin/env bash
# The lock-step cross-check at the TPUv1 size: the GEMM regression and random
# programs through both engines (the SystemC model and the Verilated RTL,
# compared cycle for cycle) on the tpuv1 preset with an N x N array, N = 256
# by default. CI runs the same checks at N = 64 and 128 (tests/rtl/test_cosim.cpp,
# cosim.tpuv1_n64, cosim.tpuv1_n128); this is the run it has no time for.
# tpu-cosim draws each program's memory latencies and bandwidths at random.
#
#   bench/rtl_lockstep.sh [N] [RANDOM_PROGRAMS]      e.g. bench/rtl_lockstep.sh 256 20
#
# It builds tpu-sim and tpu-cosim in build-bench/ with the RTL Verilated for
# tpuv1/N, untraced (the directory and flags bench/run.sh uses, so one build
# serves both; the first build at N = 256 takes a while). Each GEMM runs with
# --engine both --check: the engines agree on every retire record, the
# statistics and every memory, and C matches Eigen's product. Exit status 0
# when everything agrees, 1 otherwise. Prints the CPU time of each step.
set -euo pipefail
n=${1:-256}
programs=${2:-20}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build-bench
python=/usr/bin/python3  # Debian's, which sees numpy
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTPU_BUILD_TESTS=OFF -DTPU_RTL_TRACE=OFF \
  "-DTPU_RTL_PRESETS=tpuv1/16;tpuv1/64;tpuv1/128;tpuv1/256" >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target tpu-sim tpu-cosim

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
step() {  # step NAME COMMAND...: runs it, prints its CPU time and outcome
  local name=$1
  shift
  local TIMEFORMAT='%U %S'  # bash's own time: user and system CPU of the command
  if { time "$@" >"$tmp/out" 2>&1; } 2>"$tmp/time"; then
    printf '  %-44s ok    %7.1f s CPU\n' "$name" "$(awk '{print $1 + $2}' "$tmp/time")"
  else
    printf '  %-44s FAIL\n' "$name"
    sed 's/^/    /' "$tmp/out" | tail -5
    status=1
  fi
}

echo "tpuv1 with N = $n: GEMMs through --engine both --check"
# The shapes of the regression at N = 64 and 128 (tests/rtl/test_cosim.cpp):
# one tile, ragged edges in every dimension, several tiles of M and N.
for shape in "$n,$n,$n" "3,$((2 * n + 1)),$((n + 1))" "$((2 * n + 22)),$((n + 6)),$((2 * n))"; do
  IFS=, read -r m k nout <<<"$shape"
  "$python" -c "
import numpy as np, sys
rng = np.random.default_rng($m * 7 + $k)
np.save('$tmp/a.npy', rng.integers(-128, 128, size=($m, $k), dtype=np.int8))
np.save('$tmp/b.npy', rng.integers(-128, 128, size=($k, $nout), dtype=np.int8))
"
  for spec in "" "--requant 101,15,2 --act sigmoid"; do
    # shellcheck disable=SC2086
    step "${m}x${k}x${nout} ${spec:-int32}" "$build/sim/tpu-sim" gemm --preset tpuv1 --array "$n" \
      --a "$tmp/a.npy" --b "$tmp/b.npy" --engine both --check $spec
  done
done

echo "tpuv1 with N = $n: $programs random programs through tpu-cosim"
step "tpu-cosim --seed 1 --count $programs" "$build/sim/tpu-cosim" --preset tpuv1 --array "$n" \
  --seed 1 --count "$programs" --out-dir "$tmp/cosim-failures"
exit $status
