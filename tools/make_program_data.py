#!/usr/bin/python3
"""Inputs and expected outputs of the example programs in programs/.

For every program programs/<name>.s this writes programs/data/<name>/:

  host.npy      the initial host memory, int8, rows x N
  weights.npy   the weight memory, int8, tiles x N x N (W[t][k][j]: k input, j output)
  expected.npy  the whole host memory expected after the run (what
                `tpu-sim run --out` writes), int8, rows x N

The expected results come from an independent NumPy reference of the
instruction semantics in docs/isa.md (int64 products, int32 wrap of the
accumulators, the requantization q(a) and the activation functions), written
as the mathematics each program computes rather than by replaying its
instructions. Host rows a program should not write keep a sentinel byte
(0xAA), so a missing or extra write shows up as a difference.

The inputs come from a fixed-seed splitmix64 generator and the .npy files are
written byte by byte here, so the output does not depend on the NumPy version.

  make_program_data.py           (re)write every programs/data/<name>/
  make_program_data.py --check   verify the committed files are exactly what
                                 this script writes; exit 1 if not

Run it with /usr/bin/python3 (Debian's python3-numpy).
"""
import argparse
import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "programs" / "data"
N = 8
SENTINEL = -86  # 0xAA: host rows the program must leave alone

# ---------------------------------------------------------------------------
# Deterministic inputs


class SplitMix64:
    """splitmix64 (Steele, Lea, Flood 2014): a tiny generator with a fixed stream."""

    MASK = (1 << 64) - 1

    def __init__(self, seed):
        self.state = seed & self.MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & self.MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & self.MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & self.MASK
        return z ^ (z >> 31)

    def int8s(self, shape, lo=-128, hi=127):
        """Integers uniform in [lo, hi] (the modulo bias is irrelevant here), as int8."""
        count = int(np.prod(shape))
        span = hi - lo + 1
        values = [lo + self.next() % span for _ in range(count)]
        return np.array(values, dtype=np.int8).reshape(shape)


# ---------------------------------------------------------------------------
# The reference semantics (docs/isa.md, section 3)


def wrap32(a):
    """Two's-complement wrap of int64 values to int32, kept as int64."""
    a = np.asarray(a, dtype=np.int64)
    return ((a + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def matmul(x, w):
    """x . w with int64 products and sums, wrapped to int32 like the accumulators."""
    return wrap32(np.asarray(x, dtype=np.int64) @ np.asarray(w, dtype=np.int64))


def requantize(a, m, s, z):
    """q(a) = sat8(((a*M + r) >> S) + Z), r = 1 << (S-1) if S > 0 else 0."""
    assert -(1 << 31) <= m < (1 << 31) and 0 <= s <= 62 and -128 <= z <= 127
    a = np.asarray(a, dtype=np.int64)
    assert np.all(np.abs(a) <= (1 << 31))
    r = (1 << (s - 1)) if s > 0 else 0
    p = a * np.int64(m)  # |a*M| <= 2^62: no int64 overflow, and p + r < 2^63
    y = ((p + np.int64(r)) >> np.int64(s)) + np.int64(z)  # >> on int64 is arithmetic
    return np.clip(y, -128, 127)


def round_half_away(v):
    """Round to nearest, ties away from zero (np.round would round ties to even)."""
    v = np.asarray(v, dtype=np.float64)
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def _table(f):
    y = np.arange(-128, 128, dtype=np.float64)
    v = 127.0 * f(y / 16.0)
    # Every entry must be far from a rounding tie, so that a last-bit
    # difference between libm implementations cannot change a byte. The one
    # exact tie, 127 * sigmoid(0) = 63.5, is exact in binary and rounds to 64.
    frac = np.abs(v - np.floor(v) - 0.5)
    exact = v == 63.5
    assert np.all((frac > 1e-6) | exact), "a table entry is within 1e-6 of a tie"
    return round_half_away(v).astype(np.int64)


SIGMOID = _table(lambda t: 1.0 / (1.0 + np.exp(-t)))  # indexed by y + 128
TANH = _table(np.tanh)
assert SIGMOID.min() >= 0 and SIGMOID.max() <= 127 and TANH.min() >= -127 and TANH.max() <= 127


def activate(acc, fn, m=1, s=0, z=0):
    """ACT[.fn] under SETQ m, s, z: f(q(acc)) as int8. fn is '', 'R', 'Q' or 'T'."""
    y = requantize(acc, m, s, z)
    if fn == "R":
        y = np.maximum(y, z)
    elif fn == "Q":
        y = SIGMOID[y + 128]
    elif fn == "T":
        y = TANH[y + 128]
    else:
        assert fn == ""
    return y.astype(np.int8)


def acc_as_host_rows(acc):
    """WHM.A: each int32 ACC row becomes 4 host rows of N bytes, little-endian."""
    acc = np.asarray(acc, dtype=np.int64)
    assert acc.ndim == 2 and acc.shape[1] == N
    return wrap32(acc).astype("<i4").view(np.int8).reshape(-1, N)


def host_memory(rows):
    return np.full((rows, N), SENTINEL, dtype=np.int8)


# ---------------------------------------------------------------------------
# The programs. Each returns (host, weights, expected).


def one_tile():
    """programs/one_tile.s: Y = ReLU(sat8(X . W)) for 8 rows."""
    rng = SplitMix64(0x0001)
    x = rng.int8s((8, N))
    w = rng.int8s((N, N))
    host = host_memory(25)  # 0..7 X, 8..15 untouched, 16..23 Y, 24 guard
    host[0:8] = x
    expected = host.copy()
    expected[16:24] = activate(matmul(x, w), "R")
    return host, w[np.newaxis], expected


def k_accumulate():
    """programs/k_accumulate.s: ACC = X . W for X 4 x 24 over three tiles, int32 out."""
    tiles, rows = 3, 4
    rng = SplitMix64(0x0002)
    x = rng.int8s((rows, tiles * N))
    w = rng.int8s((tiles * N, N))
    host = host_memory(tiles * rows + 4 * rows + 1)  # X blocks, 16 result rows, guard
    for t in range(tiles):
        host[t * rows:(t + 1) * rows] = x[:, t * N:(t + 1) * N]
    expected = host.copy()
    out = tiles * rows
    expected[out:out + 4 * rows] = acc_as_host_rows(matmul(x, w))
    return host, w.reshape(tiles, N, N), expected


def mlp2():
    """programs/mlp2.s: H = ReLU(q1(X.W1)), Y = sigmoid(q2(H.W2)), T = tanh(q3(H.W3))."""
    b, k = 16, 3
    rng = SplitMix64(0x0003)
    x = rng.int8s((b, k * N))
    w1 = rng.int8s((k * N, N))
    w2 = rng.int8s((N, N))
    w3 = rng.int8s((N, N))
    h = activate(matmul(x, w1), "R", 93, 15, -3)
    y = activate(matmul(h, w2), "Q", 29, 13, 5)
    t = activate(matmul(h, w3), "T", -51, 14, -7)

    host = host_memory(k * b + 3 * b + 1)  # X blocks, H, Y, T, guard
    for i in range(k):
        host[i * b:(i + 1) * b] = x[:, i * N:(i + 1) * N]
    expected = host.copy()
    expected[48:64] = h
    expected[64:80] = y
    expected[80:96] = t
    weights = np.concatenate([w1.reshape(k, N, N), w2[np.newaxis], w3[np.newaxis]])
    return host, weights, expected


def mmc_chain():
    """programs/mmc_chain.s: ACC = X . W for X 17 x 48 over six tiles, int32 out."""
    b, tiles = 17, 6
    rng = SplitMix64(0x0004)
    x = rng.int8s((b, tiles * N))
    w = rng.int8s((tiles * N, N))
    out = tiles * b
    host = host_memory(out + 4 * b + 1)  # X blocks, 68 result rows, guard
    for t in range(tiles):
        host[t * b:(t + 1) * b] = x[:, t * N:(t + 1) * N]
    expected = host.copy()
    expected[out:out + 4 * b] = acc_as_host_rows(matmul(x, w))
    return host, w.reshape(tiles, N, N), expected


def requant_edges():
    """programs/requant_edges.s: ten ACT variants over all int8 values and a random product."""
    r = 32
    rng = SplitMix64(0x0005)
    a = np.arange(-128, 128, dtype=np.int64).reshape(r, N)  # the ACC values of block A
    xb = rng.int8s((r, N))
    wb = rng.int8s((N, N))
    acc_b = matmul(xb, wb)
    blocks = [
        activate(a, "Q"),
        activate(a, "T"),
        activate(a, "", 1, 1, 0),
        activate(a, "", 2147483647, 31, 0),
        activate(a, "R", -2147483648, 31, -1),
        activate(a, "", 5, 1, 127),
        activate(acc_b, "R", 93, 9, -3),
        activate(acc_b, "T", 93, 17, -3),
        activate(acc_b, "Q", 1234567, 30, 10),
        activate(acc_b, "", -2147483648, 62, -128),
    ]
    host = host_memory(2 * r + len(blocks) * r + 1)
    host[0:r] = a.astype(np.int8)
    host[r:2 * r] = xb
    expected = host.copy()
    for i, block in enumerate(blocks):
        expected[2 * r + i * r:2 * r + (i + 1) * r] = block
    weights = np.stack([np.eye(N, dtype=np.int8), wb])
    return host, weights, expected


def conv_reference(x, w, stride, pad, zero_point):
    """conv2d of one H x W x C map (HWC) with HWIO weights, `pad` pixels of zero_point
    around it, stride `stride`: int64 sums wrapped to int32, as MMC.C accumulates them."""
    kh, kw = w.shape[0], w.shape[1]
    xp = np.pad(np.asarray(x, dtype=np.int64), ((pad, pad), (pad, pad), (0, 0)),
                constant_values=zero_point)
    oh = (xp.shape[0] - kh) // stride + 1
    ow = (xp.shape[1] - kw) // stride + 1
    acc = np.zeros((oh, ow, w.shape[3]), dtype=np.int64)
    for dy in range(kh):
        for dx in range(kw):
            patch = xp[dy:dy + stride * (oh - 1) + 1:stride, dx:dx + stride * (ow - 1) + 1:stride]
            acc += patch @ np.asarray(w[dy, dx], dtype=np.int64)
    return wrap32(acc)


def conv2():
    """programs/conv2.s: Y1 = ReLU(q1(conv3x3 s1 p1 (X))), A2 = conv3x3 s2 p1 (Y1), on chip."""
    h, w, z, z1 = 6, 5, -5, -7
    rng = SplitMix64(0x0006)
    x = rng.int8s((h, w, N))
    w1 = rng.int8s((3, 3, N, N))
    w2 = rng.int8s((3, 3, N, N))
    y1 = activate(conv_reference(x, w1, 1, 1, z), "R", 37, 12, z1)
    a2 = conv_reference(y1, w2, 2, 1, z1)
    assert a2.shape == (3, 3, N)
    p = h * w
    host = host_memory(2 * p + 4 * 9 + 1)  # X, Y1, A2 (9 ACC rows), guard
    host[0:p] = x.reshape(p, N)
    expected = host.copy()
    expected[p:2 * p] = y1.reshape(p, N)
    expected[2 * p:2 * p + 36] = acc_as_host_rows(a2.reshape(9, N))
    weights = np.concatenate([w1.reshape(9, N, N), w2.reshape(9, N, N)])
    return host, weights, expected


def pool_reference(x, kh, kw, stride, pad, oh, ow, zero_point, average, m=1, s=0, z=0):
    """POOL of one H x W x C map (docs/isa.md): max over the window's pixels inside the
    map (zero_point if none), or requantize(sum over the window of x - zero_point), where
    pixels outside the map count as zero_point; window of output pixel (oy, ox) at
    (oy*stride - pad, ox*stride - pad)."""
    h, w, c = x.shape
    out = np.zeros((oh, ow, c), dtype=np.int64)
    for oy in range(oh):
        for ox in range(ow):
            y0, x0 = oy * stride - pad, ox * stride - pad
            ys = [y for y in range(y0, y0 + kh) if 0 <= y < h]
            xs = [v for v in range(x0, x0 + kw) if 0 <= v < w]
            win = np.asarray(x, dtype=np.int64)[ys][:, xs].reshape(-1, c)
            if average:
                out[oy, ox] = requantize((win - zero_point).sum(axis=0), m, s, z)
            else:
                out[oy, ox] = win.max(axis=0) if len(win) else zero_point
    return out.astype(np.int8)


def pool():
    """programs/pool.s: max pool 2x2/2, average pool 3x3/1 padding 1, global average pool."""
    h, w, z = 6, 5, -5
    rng = SplitMix64(0x0007)
    x = rng.int8s((h, w, N))
    mx = pool_reference(x, 2, 2, 2, 0, 3, 2, z, False)
    av = pool_reference(x, 3, 3, 1, 1, 6, 5, z, True, 7282, 16, 3)
    gl = pool_reference(x, h, w, 1, 0, 1, 1, z, True, 2185, 16, -1)
    p = h * w
    host = host_memory(p + 6 + p + 1 + 1)  # X, M, A, G, guard
    host[0:p] = x.reshape(p, N)
    expected = host.copy()
    expected[p:p + 6] = mx.reshape(6, N)
    expected[p + 6:2 * p + 6] = av.reshape(p, N)
    expected[2 * p + 6] = gl.reshape(N)
    weights = np.zeros((1, N, N), dtype=np.int8)
    return host, weights, expected


def vec_reference(a, b, za, zb, da, db, op, fn, m, s, z):
    """VEC (docs/isa.md): xa = a - za, xb = b - zb (b broadcast by NumPy when it is
    one row); ADD da*xa + db*xb, SUB da*xa - db*xb, MUL xa*xb, MAX/MIN of da*xa and
    db*xb; then ACT's q and f."""
    xa = np.asarray(a, dtype=np.int64) - za
    xb = np.asarray(b, dtype=np.int64) - zb
    v = {"ADD": da * xa + db * xb, "SUB": da * xa - db * xb, "MUL": xa * xb,
         "MAX": np.maximum(da * xa, db * xb), "MIN": np.minimum(da * xa, db * xb)}[op]
    assert np.all(np.abs(v) < (1 << 31))  # exact in int32, as the ISA says
    return activate(v, fn, m, s, z)


def vec():
    """programs/vec.s: ReLU(A + B), A - B, tanh(A * G), max(A, B), ReLU(min(A, B))."""
    p = 6
    rng = SplitMix64(0x0008)
    a = rng.int8s((p, N))
    b = rng.int8s((p, N))
    g = rng.int8s((1, N))
    host = host_memory(3 * p + 1 + 5 * p + 1)  # A, B, G, five outputs, guard
    host[0:p] = a
    host[p:2 * p] = b
    host[2 * p] = g[0]
    expected = host.copy()
    q = (873813, 34)
    expected[13:19] = vec_reference(a, b, -5, 3, 16384, 9830, "ADD", "R", *q, -128)
    expected[19:25] = vec_reference(a, b, -5, 3, 16384, 9830, "SUB", "", *q, 0)
    expected[25:31] = vec_reference(a, g, -5, 0, 1, 1, "MUL", "T", 1, 6, 0)
    expected[31:37] = vec_reference(a, b, -5, 3, 16384, 9830, "MAX", "", *q, 7)
    expected[37:43] = vec_reference(a, b, -5, 3, 16384, 9830, "MIN", "R", *q, 7)
    weights = np.zeros((1, N, N), dtype=np.int8)
    return host, weights, expected


PROGRAMS = {
    "one_tile": one_tile,
    "k_accumulate": k_accumulate,
    "mlp2": mlp2,
    "mmc_chain": mmc_chain,
    "requant_edges": requant_edges,
    "conv2": conv2,
    "pool": pool,
    "vec": vec,
}

# ---------------------------------------------------------------------------
# Files


def npy_bytes(array):
    """An int8 array as .npy format 1.0, the bytes np.save writes, independent of its version."""
    array = np.ascontiguousarray(array, dtype=np.int8)
    shape = repr(tuple(int(d) for d in array.shape))
    header = "{'descr': '|i1', 'fortran_order': False, 'shape': %s, }" % shape
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + array.tobytes()


def generate():
    """{relative path: bytes} for every file under programs/data/."""
    files = {}
    for name, make in PROGRAMS.items():
        assert (ROOT / "programs" / f"{name}.s").is_file(), f"programs/{name}.s is missing"
        host, weights, expected = make()
        assert host.dtype == weights.dtype == expected.dtype == np.int8
        assert host.ndim == 2 and host.shape[1] == N and weights.shape[1:] == (N, N)
        assert expected.shape == host.shape
        for stem, array in (("host", host), ("weights", weights), ("expected", expected)):
            files[f"{name}/{stem}.npy"] = npy_bytes(array)
    return files


def check(files):
    problems = []
    for rel, data in files.items():
        path = DATA / rel
        if not path.is_file():
            problems.append(f"programs/data/{rel} is missing")
        elif path.read_bytes() != data:
            problems.append(f"programs/data/{rel} differs from what this script generates")
    if DATA.is_dir():
        known = {rel.split("/")[0] for rel in files}
        for entry in sorted(DATA.iterdir()):
            if entry.name not in known:
                problems.append(f"programs/data/{entry.name} is not generated by this script")
            elif entry.is_dir():
                for f in sorted(entry.iterdir()):
                    if f"{entry.name}/{f.name}" not in files:
                        problems.append(f"programs/data/{entry.name}/{f.name} is not generated by this script")
    for p in problems:
        print(f"make_program_data: {p}", file=sys.stderr)
    if problems:
        print("make_program_data: run /usr/bin/python3 tools/make_program_data.py to regenerate",
              file=sys.stderr)
        return 1
    print(f"make_program_data: {len(files)} files in programs/data are up to date")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="verify the committed files instead of writing them")
    args = parser.parse_args()
    files = generate()
    if args.check:
        return check(files)
    for rel, data in files.items():
        path = DATA / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_bytes() != data:
            path.write_bytes(data)
            print(f"wrote programs/data/{rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
