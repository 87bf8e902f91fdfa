#!/usr/bin/python3
"""The digits demo of programs/nets/NAME on tpu-sim, checked exactly.

  check_demo.py BIN_DIR SOURCE_DIR NAME

Runs `tpu-sim net` on the committed quantized model and test split, and
checks that
  - its output equals the committed int8 reference output (expected.npy) bit
    for bit, and the NumPy int8 reference (tools/int8_reference.py) computed
    now gives the same bytes;
  - `--check` (the C++ int8 reference) passes;
  - the accuracy tpu-sim reports (--labels, --stats) is the one in
    report.json, for the int8 reference and for tpu-sim;
  - every emitted program (--emit-asm) assembles with tpu-as.
Exit status 0 when all hold, 1 otherwise.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def main(bin_dir, source_dir, name):
    bin_dir, source_dir = Path(bin_dir), Path(source_dir)
    sys.path.insert(0, str(source_dir / "tools"))
    import int8_reference

    net = source_dir / "programs" / "nets" / name
    report = json.loads((net / "report.json").read_text())
    expected = np.load(net / "expected.npy")
    labels = np.load(net / "test_y.npy")
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        command = [str(bin_dir / "tpu-sim"), "net", str(net / "model.json"),
                   "--input", str(net / "test_x.npy"), "--labels", str(net / "test_y.npy"),
                   "--out", str(tmp / "y.npy"), "--stats", str(tmp / "s.json"), "--check",
                   "--emit-asm", str(tmp / "prog.s")]
        print("$", " ".join(command), flush=True)
        status = subprocess.run(command).returncode
        if status != 0:
            print(f"FAIL: tpu-sim net exited {status}")
            return 1
        y = np.load(tmp / "y.npy")
        stats = json.loads((tmp / "s.json").read_text())
        programs = len(stats["programs"])
        sources = [tmp / "prog.s"] if programs == 1 else [tmp / f"prog.{k}.s" for k in range(programs)]
        for s in sources:
            if subprocess.run([str(bin_dir / "tpu-as"), str(s), "-o", str(tmp / "p.tpu")]).returncode:
                problems.append(f"{s.name} does not assemble")
    if programs != 1:
        problems.append(f"{programs} programs: the whole network should run on chip as one")
    if y.dtype != expected.dtype or y.shape != expected.shape:
        problems.append(f"output is {y.dtype} {y.shape}, expected {expected.dtype} {expected.shape}")
    elif not np.array_equal(y, expected):
        problems.append(f"{int(np.sum(y != expected))} output elements differ from expected.npy")
    now = int8_reference.run(net / "model.json", np.load(net / "test_x.npy"))
    if now.dtype != expected.dtype or not np.array_equal(now, expected):
        problems.append("the NumPy int8 reference now differs from expected.npy")
    correct = int(np.sum(np.argmax(y, axis=1) == labels))
    if stats["accuracy"]["correct"] != correct:
        problems.append(f"tpu-sim reports {stats['accuracy']['correct']} correct, the output has {correct}")
    for key in ("int8_reference_correct", "tpu_sim_correct"):
        if report.get(key) != correct:
            problems.append(f"report.json says {key} = {report.get(key)}, tpu-sim gets {correct}")
    for p in problems:
        print(f"FAIL: {p}")
    if problems:
        return 1
    print(f"ok: {name}: {y.shape[0]} test samples, output equal to the int8 reference bit for bit; "
          f"accuracy float {report['float_correct']}/{y.shape[0]}, int8 reference and tpu-sim "
          f"{correct}/{y.shape[0]}; {programs} program(s), {stats['total']['cycles']} cycles")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
