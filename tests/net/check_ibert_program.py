#!/usr/bin/python3
"""SMAX, LNRM and GELU on the SystemC model (one path: --detail fast or detailed), bit for bit
against tools/int8_reference.py's softmax_int, layernorm_int and gelu_int (docs/quantization.md,
"Integer softmax, LayerNorm and GELU").

Random int8 tokens of G = 3 planes (D = 3N features) with a token of equal values and tokens at
the int8 extremes are loaded into the unified buffer as planes 8 rows apart (the layout of "Whole
networks on chip", with rows between the planes that no token uses); the program runs an SMAX,
an in-place SMAX, an LNRM (epsilon and a zero variance) and a GELU (input zero point -3) with the
constants the reference's *_constants functions choose, LNRM and GELU again with fine output
steps, then an SMAX and an LNRM for each of three token widths D (NGEO's width) below G*N: 1, a
width that is not a multiple of N (N + N/2 + 1) and 2N; and writes the results to host memory.
With an RTL build of the preset, the program's GELUs alone run with --engine both (the RTL in
lock step with the model) and must give the reference's bytes too, and --engine rtl must refuse
the whole program at its first SMAX with a clear message.

  check_ibert_program.py BIN_DIR SOURCE_DIR PRESET DETAIL
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ARRAY_N = {"small4": 4, "small8": 8, "small16": 16}
TOKENS, GROUPS, PLANE = 6, 3, 8
IN_SCALE, GELU_ZERO = 0.08, -3
OUTPUTS = 6  # results of the program before the token widths'


def widths(n):
    """The token widths D < GROUPS * N the program tries: one value, not a multiple of N, 2N."""
    return [1, n + n // 2 + 1, 2 * n]


def planes_to_tokens(rows, n):
    """UB rows (GROUPS * PLANE, n) -> tokens (TOKENS, GROUPS * n): token t is lanes of rows g*PLANE+t."""
    return np.concatenate([rows[g * PLANE:g * PLANE + TOKENS] for g in range(GROUPS)], axis=1)


def tokens_to_planes(tokens, n, fill):
    rows = fill.copy()
    for g in range(GROUPS):
        rows[g * PLANE:g * PLANE + TOKENS] = tokens[:, g * n:(g + 1) * n]
    return rows


def program(sm, ln, ge, ln_fine, ge_fine, ln_widths, n):
    span = GROUPS * PLANE
    lines = [
        f"RHM 0, 0, {span}", f"RHM 0, 400, {span}",
        f"NGEO {GROUPS}, {PLANE}, {sm.sh}", f"NCON {sm.k0}, {sm.k1}, {sm.k2}", f"SETQ {sm.m}, {sm.s}, {sm.z}",
        f"SMAX 0, 100, {TOKENS}", f"SMAX 400, 400, {TOKENS}",
        f"NCON {ln.k0}, {ln.k1}, {ln.k2}", f"SETQ {ln.m}, {ln.s}, {ln.z}",
        f"LNRM 0, 200, {TOKENS}",
        f"SETQ {ln_fine.m}, {ln_fine.s}, {ln_fine.z}", f"LNRM 0, 500, {TOKENS}",
        f"NGEO 1, 0, {ge.sh}", f"NCON {ge.k0}, {ge.k1}, {ge.k2}", f"SETQ {ge.m}, {ge.s}, {ge.z}",
        f"GELU 0, 300, {span}",
        f"SETQ {ge_fine.m}, {ge_fine.s}, {ge_fine.z}", f"GELU 0, 600, {span}",
    ]
    outputs = [100, 400, 200, 300, 500, 600]
    for k, (d, lw) in enumerate(zip(widths(n), ln_widths)):
        sm_ub, ln_ub = 1000 + 100 * k, 1050 + 100 * k
        lines += [f"NGEO {GROUPS}, {PLANE}, {sm.sh}, {d}", f"NCON {sm.k0}, {sm.k1}, {sm.k2}",
                  f"SETQ {sm.m}, {sm.s}, {sm.z}", f"SMAX 0, {sm_ub}, {TOKENS}",
                  f"NCON {lw.k0}, {lw.k1}, {lw.k2}", f"SETQ {lw.m}, {lw.s}, {lw.z}",
                  f"LNRM 0, {ln_ub}, {TOKENS}"]
        outputs += [sm_ub, ln_ub]
    for k, ub in enumerate(outputs):
        lines.append(f"WHM {ub}, {span * (k + 1)}, {span}")
    return "\n".join(lines + ["HLT", ""])


def gelu_program(ge, ge_fine, n):
    """The program's GELUs alone, their results written to the same host rows."""
    span = GROUPS * PLANE
    return "\n".join([
        f"RHM 0, 0, {span}",
        f"NGEO 1, 0, {ge.sh}", f"NCON {ge.k0}, {ge.k1}, {ge.k2}", f"SETQ {ge.m}, {ge.s}, {ge.z}",
        f"GELU 0, 300, {span}",
        f"SETQ {ge_fine.m}, {ge_fine.s}, {ge_fine.z}", f"GELU 0, 600, {span}",
        f"WHM 300, {span * 4}, {span}", f"WHM 600, {span * 6}, {span}", "HLT", ""])


def main(bin_dir, source_dir, preset, detail):
    sys.path.insert(0, str(Path(source_dir) / "tools"))
    import int8_reference as ref

    n = ARRAY_N[preset]
    rng = np.random.default_rng(29)
    x = rng.integers(-128, 128, (TOKENS, GROUPS * n)).astype(np.int64)
    x[1] = 17                              # one value: a uniform softmax, a zero variance
    x[2, ::2], x[2, 1::2] = -128, 127      # the int8 extremes
    x[3] = rng.integers(-6, 6, GROUPS * n)  # a narrow token: the exponentials near 1
    span = GROUPS * PLANE
    gap = rng.integers(-128, 128, (span, n)).astype(np.int64)  # rows no token uses
    rows = tokens_to_planes(x, n, gap)

    sm = ref.softmax_constants(IN_SCALE)
    ln = ref.layernorm_constants(IN_SCALE, GROUPS * n, 5.0 / 127, eps=1e-3)
    ge = ref.gelu_constants(IN_SCALE, GELU_ZERO, 0.05, -20)
    # The same with fine output steps (saturating more often), so that a
    # difference of a few units of v changes bytes: LNRM's v / 256, GELU at
    # a fifth of the step.
    ln_fine = ln._replace(m=1, s=8, z=0)
    ge_fine = ref.gelu_constants(IN_SCALE, GELU_ZERO, 0.01, -128)
    # LNRM over D values: its constants for D (eps, sqrt(D)), the output zero point 3 so that
    # the lanes past D (q(0) = 3) differ from the UB's zeros.
    ln_widths = [ref.layernorm_constants(IN_SCALE, d, 5.0 / 127, eps=1e-3, out_zero=3)
                 for d in widths(n)]
    soft = ref.softmax_int(x, sm)
    host = np.zeros(((OUTPUTS + 2 * len(ln_widths) + 1) * span + 1, n), dtype=np.int8)
    host[:span] = rows
    expected = host.copy()
    expected[span:2 * span] = tokens_to_planes(soft, n, np.zeros_like(gap))
    expected[2 * span:3 * span] = tokens_to_planes(soft, n, gap)   # in place: the gaps stay
    expected[3 * span:4 * span] = tokens_to_planes(ref.layernorm_int(x, ln), n, np.zeros_like(gap))
    expected[4 * span:5 * span] = ref.gelu_int(rows, ge)
    expected[5 * span:6 * span] = tokens_to_planes(ref.layernorm_int(x, ln_fine), n, np.zeros_like(gap))
    expected[6 * span:7 * span] = ref.gelu_int(rows, ge_fine)
    zeros = np.zeros_like(gap)
    for k, (d, lw) in enumerate(zip(widths(n), ln_widths)):
        at = (OUTPUTS + 1 + 2 * k) * span
        expected[at:at + span] = tokens_to_planes(ref.softmax_int(x, sm, width=d), n, zeros)
        expected[at + span:at + 2 * span] = tokens_to_planes(ref.layernorm_int(x, lw, width=d), n, zeros)
    # The reference is not trivial on these tokens: every output varies.
    assert len(np.unique(soft)) > 10 and len(np.unique(expected[4 * span:5 * span])) > 10

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "norm.s").write_text(f".array {n}\n" + program(sm, ln, ge, ln_fine, ge_fine, ln_widths, n))
        np.save(tmp / "host.npy", host)
        np.save(tmp / "weights.npy", np.zeros((1, n, n), dtype=np.int8))
        tool = Path(bin_dir)
        subprocess.run([str(tool / "tpu-as"), "--preset", preset, str(tmp / "norm.s"), "-o",
                        str(tmp / "norm.tpu")], check=True)
        run = [str(tool / "tpu-sim"), "run", str(tmp / "norm.tpu"), "--preset", preset,
               "--hostmem", str(tmp / "host.npy"), "--weights", str(tmp / "weights.npy")]
        subprocess.run(run + ["--out", str(tmp / "out.npy"), "--detail", detail], check=True)
        out = np.load(tmp / "out.npy")
        bad = np.argwhere(out != expected)
        if bad.size:
            r = bad[0][0]
            print(f"FAIL: host row {r}: got {out[r].tolist()}, want {expected[r].tolist()} "
                  f"({len(bad)} bytes differ)")
            return 1
        print(f"ok: {out.shape[0]} host rows equal the reference ({preset}, {detail})")
        rtl = subprocess.run(run + ["--out", str(tmp / "rtl.npy"), "--engine", "rtl"],
                             capture_output=True, text=True)
        if "no RTL build" in rtl.stderr or "RTL build" in rtl.stderr and "not implement" not in rtl.stderr:
            print("(no RTL build of this preset: the RTL is not run)")
            return 0
        # The GELUs on both engines in lock step (exit 5 on a divergence).
        (tmp / "gelu.s").write_text(f".array {n}\n" + gelu_program(ge, ge_fine, n))
        subprocess.run([str(tool / "tpu-as"), "--preset", preset, str(tmp / "gelu.s"), "-o",
                        str(tmp / "gelu.tpu")], check=True)
        subprocess.run([str(tool / "tpu-sim"), "run", str(tmp / "gelu.tpu"), "--preset", preset,
                        "--hostmem", str(tmp / "host.npy"), "--weights", str(tmp / "weights.npy"),
                        "--out", str(tmp / "gelu.npy"), "--engine", "both"], check=True)
        got = np.load(tmp / "gelu.npy")
        for k in (4, 6):
            rows = slice(k * span, (k + 1) * span)
            if not np.array_equal(got[rows], expected[rows]):
                print(f"FAIL: --engine both: the GELU at host rows {k * span}.. differs from the reference")
                return 1
        print("ok: the GELUs on both engines equal the reference")
        if rtl.returncode == 0 or "does not implement SMAX (pc 5)" not in rtl.stderr:
            print(f"FAIL: --engine rtl: status {rtl.returncode}, stderr {rtl.stderr!r}")
            return 1
        elif (tmp / "rtl.npy").exists():
            print("FAIL: --engine rtl refused the program but wrote an output")
            return 1
        else:
            print(f"ok: --engine rtl refuses: {rtl.stderr.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
