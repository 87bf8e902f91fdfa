#!/usr/bin/env bash
# Builds the seed corpus of every fuzz target from the project's own inputs.
#
#   tests/fuzz/make_corpus.sh OUT_DIR TPU_AS
#
# OUT_DIR/<target>/ receives:
#   fuzz_asm      programs/*.s and tests/fuzz/seeds/asm/*.s
#   fuzz_program  programs/*.s assembled by TPU_AS (as written, and one_tile.s
#                 for N = 4 and 16)
#   fuzz_sim      the same program files, for N <= 8
#   fuzz_npy      programs/data/*/*.npy and the NumPy fixtures of
#                 tests/common/make_npy_fixtures.py (every dtype, order, version)
#   fuzz_config   tests/fuzz/seeds/config/*.json
#   fuzz_net      tests/fuzz/seeds/net/*.hex as bytes (networks written out
#                 byte by byte in hex, with comments after '#')
#   fuzz_onnx     ONNX models: the ONNX tests' networks exported by PyTorch and
#                 built with python3-onnx, and their error cases
#                 (make_onnx_seeds.py says which)
#   fuzz_sweep    tests/fuzz/seeds/sweep/*.json (sweep files: docs/python.md's
#                 example at small sizes, every workload kind, wrong types)
set -euo pipefail

out=$1
tpu_as=$2
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
python=/usr/bin/python3  # Debian's python3-numpy, as tests/CMakeLists.txt uses

mkdir -p "$out"/{fuzz_asm,fuzz_program,fuzz_sim,fuzz_npy,fuzz_config,fuzz_net,fuzz_onnx,fuzz_sweep}

cp "$src"/programs/*.s "$src"/tests/fuzz/seeds/asm/*.s "$out/fuzz_asm/"
cp "$src"/tests/fuzz/seeds/config/*.json "$out/fuzz_config/"
for f in "$src"/tests/fuzz/seeds/net/*.hex; do
  hex=$(sed 's/#.*//' "$f" | tr -d ' \t\r\n')
  if [[ ! $hex =~ ^([0-9a-fA-F]{2})*$ ]]; then
    echo "make_corpus.sh: $f: not pairs of hex digits" >&2
    exit 1
  fi
  printf "$(sed 's/../\\x&/g' <<<"$hex")" >"$out/fuzz_net/$(basename "$f" .hex)"
done

for s in "$src"/programs/*.s; do
  name=$(basename "$s" .s)
  "$tpu_as" "$s" -o "$out/fuzz_program/$name.tpu"
done
for n in 4 16; do
  "$tpu_as" "$src/programs/one_tile.s" --array "$n" -o "$out/fuzz_program/one_tile_n$n.tpu"
done
for f in "$out"/fuzz_program/*.tpu; do
  n=$(od -An -tu2 -j6 -N2 "$f" | tr -d ' ')
  [ "$n" -le 8 ] && cp "$f" "$out/fuzz_sim/"
done

for d in "$src"/programs/data/*/; do
  for f in "$d"*.npy; do cp "$f" "$out/fuzz_npy/$(basename "$d")_$(basename "$f")"; done
done
if "$python" -c 'import numpy' 2>/dev/null; then
  "$python" "$src/tests/common/make_npy_fixtures.py" make "$out/fuzz_npy" >/dev/null
else
  echo "make_corpus.sh: $python has no numpy; the .npy corpus has only programs/data" >&2
fi

if "$python" -c 'import onnx, numpy' 2>/dev/null; then
  "$python" "$src/tests/fuzz/make_onnx_seeds.py" "$out/fuzz_onnx" >/dev/null 2>&1 ||
    { echo "make_corpus.sh: make_onnx_seeds.py failed" >&2; exit 1; }
else
  echo "make_corpus.sh: $python has no onnx; fuzz_onnx starts from an empty corpus" >&2
fi
cp "$src"/tests/fuzz/seeds/sweep/*.json "$out/fuzz_sweep/"

for t in "$out"/*/; do echo "seed corpus $(basename "$t"): $(ls "$t" | wc -l) files"; done
