#!/usr/bin/python3
"""An example CNN of programs/nets (graph form) on tpu-sim, checked exactly.

  check_cnn_net.py BIN_DIR SOURCE_DIR NAME PRESET [tpu-sim options...]

Runs `tpu-sim net --preset PRESET --check` (and the options given, e.g.
`--config` with fewer accumulator rows, so that the maps are computed in
bands of output rows) on the committed model and test
inputs and checks that the network runs as one program, that its output
equals expected.npy (the NumPy int8 reference, tools/int8_reference.py) bit
for bit, that --check (the C++ int8 reference) passes, that the layers'
cycles add up to the program's, and that the emitted program assembles.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def main(bin_dir, source_dir, name, preset, *options):
    bin_dir, net = Path(bin_dir), Path(source_dir) / "programs" / "nets" / name
    expected = np.load(net / "expected.npy")
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        command = [str(bin_dir / "tpu-sim"), "net", str(net / "model.json"), "--input",
                   str(net / "test_x.npy"), "--out", str(tmp / "y.npy"), "--stats", str(tmp / "s.json"),
                   "--check", "--emit-asm", str(tmp / "p.s"), "--preset", preset, *options]
        print("$", " ".join(command), flush=True)
        status = subprocess.run(command).returncode
        if status != 0:
            print(f"FAIL: tpu-sim net exited {status}")
            return 1
        y = np.load(tmp / "y.npy")
        stats = json.loads((tmp / "s.json").read_text())
        if subprocess.run([str(bin_dir / "tpu-as"), str(tmp / "p.s"), "-o", str(tmp / "p.tpu")]).returncode:
            problems.append("the program does not assemble")
    if len(stats["programs"]) != 1:
        problems.append(f"{len(stats['programs'])} programs, expected the whole network as one")
    if sum(layer["cycles"] for layer in stats["layers"]) != stats["total"]["cycles"]:
        problems.append("the layers' cycles do not add up to the program's")
    if y.dtype != expected.dtype or y.shape != expected.shape:
        problems.append(f"output is {y.dtype} {y.shape}, expected {expected.dtype} {expected.shape}")
    elif not np.array_equal(y, expected):
        problems.append(f"{int(np.sum(y != expected))} output elements differ from expected.npy")
    for p in problems:
        print(f"FAIL: {p}")
    if problems:
        return 1
    print(f"ok: {name} on {' '.join([preset, *options])}: one program, {stats['total']['cycles']} cycles, "
          f"output equal to the int8 references")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
