#!/usr/bin/python3
"""Runs an example program on its committed data and compares the result exactly.

  run_program.py run NAME BIN_DIR SOURCE_DIR [tpu-sim options...]
      assembles SOURCE_DIR/programs/NAME.s with BIN_DIR/tpu-as, runs it with
      BIN_DIR/tpu-sim run on SOURCE_DIR/programs/data/NAME/{host,weights}.npy
      and compares --out with expected.npy
  run_program.py compare OUT.npy EXPECTED.npy
      the comparison alone

Exit status 0 when the output equals the expected host memory byte for byte,
1 otherwise (the first differing row is printed).
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def compare(out_path, expected_path):
    out = np.load(out_path)
    expected = np.load(expected_path)
    if out.dtype != expected.dtype or out.shape != expected.shape:
        print(f"FAIL: {out_path} is {out.dtype} {out.shape}, expected {expected.dtype} "
              f"{expected.shape}")
        return 1
    differ = np.flatnonzero(np.any(out != expected, axis=1))
    if differ.size:
        row = differ[0]
        print(f"FAIL: {differ.size} of {out.shape[0]} host rows differ; first is row {row}")
        print(f"  got      {out[row].tolist()}")
        print(f"  expected {expected[row].tolist()}")
        return 1
    print(f"ok: all {out.shape[0]} host rows equal {expected_path}")
    return 0


def run(name, bin_dir, source_dir, sim_options):
    bin_dir, source_dir = Path(bin_dir), Path(source_dir)
    source = source_dir / "programs" / f"{name}.s"
    data = source_dir / "programs" / "data" / name
    with tempfile.TemporaryDirectory() as tmp:
        program = Path(tmp) / f"{name}.tpu"
        out = Path(tmp) / "out.npy"
        commands = [
            [bin_dir / "tpu-as", source, "-o", program],
            [bin_dir / "tpu-sim", "run", program, "--hostmem", data / "host.npy",
             "--weights", data / "weights.npy", "--out", out, *sim_options],
        ]
        for command in commands:
            command = [str(c) for c in command]
            print("$", " ".join(command), flush=True)
            status = subprocess.run(command).returncode
            if status != 0:
                print(f"FAIL: exit status {status}")
                return 1
        return compare(out, data / "expected.npy")


def main(argv):
    if len(argv) >= 4 and argv[0] == "run":
        return run(argv[1], argv[2], argv[3], argv[4:])
    if len(argv) == 3 and argv[0] == "compare":
        return compare(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
