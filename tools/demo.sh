#!/usr/bin/env bash
# The main job: assemble programs/one_tile.s, run it on the SystemC model with
# random inputs, check the result against an independent NumPy reference and
# print the run's statistics.
#   tools/demo.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: tools/demo.sh BUILD_DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
n=8
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== tpu-as programs/one_tile.s --array $n =="
"$build/sim/tpu-as" "$root/programs/one_tile.s" -o "$out/one_tile.tpu" --array "$n"
"$build/sim/tpu-dis" --encoding "$out/one_tile.tpu"
/usr/bin/python3 "$root/tests/cli/one_tile_check.py" make "$out" "$n"
echo "== tpu-sim run --trace =="
"$build/sim/tpu-sim" run "$out/one_tile.tpu" --hostmem "$out/host.npy" \
  --weights "$out/weights.npy" --out "$out/out.npy" --trace
echo "== check =="
/usr/bin/python3 "$root/tests/cli/one_tile_check.py" check "$out" "$n"
