#!/usr/bin/env bash
# Synthesizes tpu_core for a configuration with Yosys and prints its cell
# counts.
#   tools/synth.sh [PRESET] [OUT_DIR]
# PRESET names rtl/config/PRESET (default small4). OUT_DIR (default: a
# temporary directory, removed) receives the log, the Yosys script and the
# statistics as JSON: PRESET.rtl.json (after proc, per unit, before any
# optimization: one $mul per multiplication written in the RTL; the array's
# PE rows and PEs are flattened into tpu_systolic_array, whose count then
# includes one $mul per PE, and Yosys 0.23 writes no valid JSON for a
# hierarchy three modules deep),
# PRESET.coarse.json (word-level cells) and PRESET.gates.json (gates).
#
# What is synthesized: the whole core, flattened, with generic gates (no
# technology library). The memories (the unified buffer, the accumulators,
# and the small arrays: weight FIFO, scoreboard, ...) stay $mem_v2 cells:
# mapping the 16384-row buffers to flip-flops would take far longer than a
# test may and say nothing about the logic.
#
# Yosys 0.23 has no package import: the packages are read as
# compilation-unit declarations (their package/endpackage and every import
# line removed), as sv2v does for Yosys. Every Yosys warning fails the run
# but the one expected below: Yosys accepts some SystemVerilog it does not
# understand with only a warning (an "implicitly declared" identifier).
set -euo pipefail

preset=${1:-small4}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rtl=$root/rtl
cfg=$rtl/config/$preset/tpu_config_pkg.sv
[ -f "$cfg" ] || { echo "synth.sh: no configuration package $cfg" >&2; exit 2; }
command -v yosys >/dev/null || { echo "synth.sh: yosys not found" >&2; exit 2; }

if [ $# -ge 2 ]; then
  out=$2
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

# The configuration package, then rtl/tpu_core.f's sources (packages first), as
# the Verilator builds read them.
sources=("$cfg")
while read -r f; do sources+=("$rtl/$f"); done < <(grep -E '^[a-z_]+\.sv$' "$rtl/tpu_core.f")
flat=$out/$preset.flat.sv
drop='^[[:space:]]*(package[[:space:]]+\w+[[:space:]]*;|endpackage\b|import[[:space:]]+\w+::\*[[:space:]]*;)'
cat "${sources[@]}" | sed -E "/$drop/d" >"$flat"

# read_verilog defines SYNTHESIS, which leaves out the assertions.
cat >"$out/$preset.ys" <<EOF
read_verilog -sv $flat
hierarchy -check -top tpu_core
proc
flatten tpu_systolic_array
hierarchy -top tpu_core
opt_clean
tee -q -o $out/$preset.rtl.json stat -json
synth -top tpu_core -flatten -run begin:fine
tee -q -o $out/$preset.coarse.json stat -json
opt -fast -full
techmap
opt -fast
abc -fast
opt -fast
check -assert
tee -q -o $out/$preset.gates.json stat -json
EOF

log=$out/$preset.log
start=$(date +%s)
if ! yosys -q -l "$log" -s "$out/$preset.ys" >/dev/null 2>&1; then
  grep -E "ERROR|rror:" "$log" >&2 || tail -20 "$log" >&2
  echo "synth.sh: yosys failed for $preset (log: $log)" >&2
  exit 1
fi
seconds=$(($(date +%s) - start))

# The reset loop over the activation pipeline's stages makes Yosys turn that
# small array into registers, which it reports as a warning.
if grep "Warning:" "$log" | grep -v "Replacing memory .* with list of registers" >&2; then
  echo "synth.sh: unexpected Yosys warnings for $preset (log: $log)" >&2
  exit 1
fi

python3 - "$out" "$preset" "$seconds" <<'EOF'
import json, sys
out, preset, seconds = sys.argv[1:]
def design(stage):
    with open(f"{out}/{preset}.{stage}.json") as f:
        return json.load(f)["design"]
print(f"tpu_core, preset {preset}: Yosys {seconds} s")
for stage, what in (("coarse", "word-level cells"), ("gates", "generic gates")):
    d = design(stage)
    print(f"{what}: {d['num_cells']} cells")
    for kind, n in sorted(d["num_cells_by_type"].items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {kind:<16} {n}")
EOF
