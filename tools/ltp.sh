#!/usr/bin/env bash
# Prints the longest combinational path of one RTL module in generic gates.
#   tools/ltp.sh [PRESET] [MODULE] [WIRE...]
# PRESET names rtl/config/PRESET (default small4), MODULE the module
# synthesized alone as the top (default tpu_activation_unit). Each WIRE (an
# output port, say) is deleted with the logic that only it uses before the
# path is measured, to see the longest path elsewhere.
#
# The flow is tools/synth.sh's (Yosys 0.23: proc, the coarse synth, techmap,
# abc -fast to generic 2-input gates and muxes), then `ltp -noff`: the
# longest path between flip-flops, inputs and outputs, in cells. Memories of
# the module stay cells; a module's inputs count as registered.
set -euo pipefail

preset=${1:-small4}
top=${2:-tpu_activation_unit}
shift $(($# < 2 ? $# : 2))
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rtl=$root/rtl
cfg=$rtl/config/$preset/tpu_config_pkg.sv
[ -f "$cfg" ] || { echo "ltp.sh: no configuration package $cfg" >&2; exit 2; }
command -v yosys >/dev/null || { echo "ltp.sh: yosys not found" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

sources=("$cfg")
while read -r f; do sources+=("$rtl/$f"); done < <(grep -E '^[a-z_]+\.sv$' "$rtl/tpu_core.f")
drop='^[[:space:]]*(package[[:space:]]+\w+[[:space:]]*;|endpackage\b|import[[:space:]]+\w+::\*[[:space:]]*;)'
cat "${sources[@]}" | sed -E "/$drop/d" >"$out/flat.sv"
{
  echo "read_verilog -sv $out/flat.sv"
  echo "hierarchy -check -top $top"
  echo "proc"
  echo "synth -top $top -flatten -run begin:fine"
  echo "opt -fast -full"
  echo "techmap"
  echo "opt -fast"
  echo "abc -fast"
  echo "opt -fast"
  for w in "$@"; do echo "delete w:$w"; done
  [ $# -gt 0 ] && echo "opt_clean"
  echo "ltp -noff"
} >"$out/ltp.ys"
if ! yosys -q -l "$out/log" -s "$out/ltp.ys" >/dev/null 2>&1; then
  grep -E "ERROR|rror:" "$out/log" >&2 || tail -20 "$out/log" >&2
  echo "ltp.sh: yosys failed for $top at $preset" >&2
  exit 1
fi
# The header, and the path's named ends (abc's internal nodes left out).
grep -A100000 'Longest topological path' "$out/log" | grep -E 'Longest|: \\' | sed -n '1,12p'
