#!/usr/bin/env bash
# The main job: assemble an example program, show its encoding, and check
# that the disassembly assembles back to the same bytes.
#   tools/demo.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: tools/demo.sh BUILD_DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="$root/programs/one_tile.s"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== tpu-as $src =="
"$build/sim/tpu-as" "$src" -o "$out/one_tile.tpu"
echo "== tpu-dis --encoding =="
"$build/sim/tpu-dis" --encoding "$out/one_tile.tpu"
"$build/sim/tpu-dis" "$out/one_tile.tpu" -o "$out/again.s"
"$build/sim/tpu-as" "$out/again.s" -o "$out/again.tpu"
cmp "$out/one_tile.tpu" "$out/again.tpu"
echo "== round trip: disassembly re-assembles to identical bytes =="
