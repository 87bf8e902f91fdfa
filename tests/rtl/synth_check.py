#!/usr/bin/env python3
"""Checks the cell counts tools/synth.sh wrote for a preset.

    synth_check.py OUT_DIR PRESET SOURCE_DIR

- The synthesized core has cells, gates among them.
- Before any optimization (PRESET.rtl.json, right after proc), the systolic
  array has one $mul per PE, N * N, plus one in MMC.C's address generator
  (iy * in_w, the UB row offset of an input pixel's line), and the activation
  unit eight per lane, 8N (its requantizer's MUL stage, which ACT, POOL.A,
  VEC and GELU share, as two 64 x 16-bit products, a * M[15:0] and
  a * M[31:16]; VEC's two factor multipliers, da * xa and (MUL ? xa : db) *
  xb; GELU's G3, n * n as n * n[15:0] and n * n[30:16], and G5, qx * w as
  qx * w[15:0] and qx * w[31:16]), plus one in POOL's window address
  generator (iy * in_w, as in the array's): 8N + 1.
  Yosys 0.23 accepts some SystemVerilog it then elaborates wrongly without an
  error (a struct member part-selected in a loop kept one lane of N); these
  counts catch a lost PE or lane. They fail, too, if the RTL is written with
  a different number of multiplications (a shared multiplier, say): then
  update them with the design.
- tpu_core holds exactly two memories, the unified buffer and the
  accumulators, of their configured sizes, and the systolic array one, the
  weight FIFO: FifoDepth + 1 tile slots of N rows of N bytes (the tiles the
  FIFO holds or has room reserved for, and the one being loaded into the
  shadow weights); memory cells survive synthesis.
"""
import json
import re
import sys


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    out, preset, src = sys.argv[1:4]
    with open(f"{src}/rtl/config/{preset}/tpu_config_pkg.sv") as f:
        cfg = dict(re.findall(r"localparam int unsigned (\w+) = (\d+);", f.read()))
    n = int(cfg["ArrayN"])

    def load(stage):
        with open(f"{out}/{preset}.{stage}.json") as f:
            return json.load(f)

    rtl = load("rtl")["modules"]
    # The activation unit's 8N: the requantizer's two half products, VEC's
    # two factor multipliers and GELU's four half products per lane; + 1:
    # POOL's address generator (iy * in_w).
    for module, want in (("tpu_systolic_array", n * n + 1), ("tpu_activation_unit", 8 * n + 1)):
        got = rtl[f"\\{module}"]["num_cells_by_type"].get("$mul", 0)
        if got != want:
            fail(f"{module}: {got} $mul cells after proc, want {want}")

    gates = load("gates")["design"]
    if gates["num_cells"] <= 0:
        fail("no cells")
    kinds = gates["num_cells_by_type"]
    if not any(k.startswith("$_XOR_") or k.startswith("$_XNOR_") for k in kinds):
        fail("no XOR gates: the MACs' adders are missing")
    core = rtl["\\tpu_core"]
    want_bits = int(cfg["UbRows"]) * n * 8 + int(cfg["AccRows"]) * n * 32
    if core["num_memories"] != 2 or core["num_memory_bits"] != want_bits:
        fail(f"tpu_core: {core['num_memories']} memories of {core['num_memory_bits']} bits, "
             f"want 2 of {want_bits} (unified buffer, accumulators)")
    array = rtl["\\tpu_systolic_array"]
    want_bits = (int(cfg["FifoDepth"]) + 1) * n * n * 8
    if array["num_memories"] != 1 or array["num_memory_bits"] != want_bits:
        fail(f"tpu_systolic_array: {array['num_memories']} memories of {array['num_memory_bits']} "
             f"bits, want 1 of {want_bits} (the weight FIFO)")
    if "$mem_v2" not in kinds:
        fail("no memory cells left after synthesis")
    print(f"ok: {gates['num_cells']} cells; {n * n} array, 2 address and {8 * n} activation "
          f"multipliers")


if __name__ == "__main__":
    main()
