#!/usr/bin/env bash
# The main job: assemble programs/mlp2.s (a two-layer MLP with ReLU, sigmoid
# and tanh activations), run it on the SystemC model with its committed inputs
# (programs/data/mlp2/), print the per-instruction trace and the run's
# statistics, and check the final host memory against the expected one from
# the independent NumPy reference (tools/make_program_data.py).
#   tools/demo.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: tools/demo.sh BUILD_DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=/usr/bin/python3  # Debian's python3-numpy
name=mlp2
data="$root/programs/data/$name"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

heading() { printf '\n== %s ==\n' "$*"; }

heading "1. the program: programs/$name.s"
sed -n '1,/^\.array/p' "$root/programs/$name.s" | sed '$d'

heading "2. assemble: tpu-as programs/$name.s; tpu-dis --encoding"
"$build/sim/tpu-as" "$root/programs/$name.s" -o "$out/$name.tpu"
"$build/sim/tpu-dis" --encoding "$out/$name.tpu"

heading "3. run: tpu-sim run --trace on programs/data/$name/{host,weights}.npy"
"$build/sim/tpu-sim" run "$out/$name.tpu" --hostmem "$data/host.npy" \
  --weights "$data/weights.npy" --out "$out/out.npy" --trace

heading "4. the first rows of Y (sigmoid head, host rows 64..) and T (tanh head, host rows 80..)"
"$python" - "$out/out.npy" <<'EOF'
import sys
import numpy as np
out = np.load(sys.argv[1])
for label, first in (("Y", 64), ("T", 80)):
    for row in range(first, first + 8):
        print(f"  {label} row {row:3d}: " + " ".join(f"{v:4d}" for v in out[row]))
EOF

heading "5. check against programs/data/$name/expected.npy (NumPy reference)"
"$python" "$root/tests/programs/run_program.py" compare "$out/out.npy" "$data/expected.npy"
