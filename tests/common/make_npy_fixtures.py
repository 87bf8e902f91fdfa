#!/usr/bin/python3
"""Real-NumPy side of tests/common/test_npy.cpp; run with Debian's /usr/bin/python3 (python3-numpy).

  make_npy_fixtures.py make DIR    write the fixtures below into DIR
  make_npy_fixtures.py check DIR   check every DTYPE__SHAPE.npy that test_npy.cpp wrote into DIR,
                                   e.g. int32__2x3x4.npy, int8__.npy (0-D), uint8__5.npy (1-D)

Element i (in C order) of every array is value(dtype, i); test_npy.cpp repeats the formula.
"""
import os
import sys

try:
    import numpy as np
except ImportError:
    sys.exit(f"make_npy_fixtures.py: {sys.executable} cannot import numpy; install Debian's python3-numpy")

# Integers use every byte of the type: base(i) in [-128, 127] times a scale, unsigned
# ones ubase(i) in [0, 255] times 0x01...01; floats are exact binary fractions.
SCALE = {
    "int8": 1, "int16": 255, "int32": 8388609, "int64": 2**55 + 1,
    "uint8": 1, "uint16": 0x0101, "uint32": 0x01010101, "uint64": 0x0101010101010101,
    "float32": 0.5, "float64": 0.25,
}


def value(dtype, i):
    ubase = (i * 37 + 11) % 256
    return ubase * SCALE[dtype] if dtype.startswith("uint") else (ubase - 128) * SCALE[dtype]


def array(dtype, shape):
    n = int(np.prod(shape, dtype=np.int64))
    return np.array([value(dtype, i) for i in range(n)], dtype=dtype).reshape(shape)


def make(out):
    def save(name, arr, **kw):
        np.save(os.path.join(out, name), arr, **kw)

    for dtype in SCALE:
        save(f"{dtype}.npy", array(dtype, (2, 3, 4)))
    fortran = np.asfortranarray(array("int32", (3, 4, 5)))
    assert not fortran.flags.c_contiguous
    save("fortran_int32.npy", fortran)
    save("fortran_int8.npy", np.asfortranarray(array("int8", (5, 7))))
    for version, dtype, shape in [((2, 0), "int8", (4, 8)), ((3, 0), "int16", (3,))]:
        with open(os.path.join(out, f"v{version[0]}.npy"), "wb") as f:
            np.lib.format.write_array(f, array(dtype, shape), version=version)
    save("scalar.npy", array("int32", ()))
    save("empty.npy", array("int8", (0, 5)))
    save("one_d.npy", array("int32", (5,)))
    save("big_endian.npy", array("int32", (2, 3)).astype(">i4"))
    save("object.npy", np.array([1, None], dtype=object), allow_pickle=True)
    save("structured.npy", np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]))
    save("complex.npy", np.zeros(2, dtype="<c8"))
    print(f"wrote {len(os.listdir(out))} fixtures")


def check(folder):
    problems, count = [], 0
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".npy") or "__" not in name:
            continue
        count += 1
        dtype, dims = name[:-4].split("__")
        shape = tuple(int(d) for d in dims.split("x")) if dims else ()
        path = os.path.join(folder, name)
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            _, fortran_order, _ = np.lib.format.read_array_header_1_0(f)
            offset = f.tell()
        arr = np.load(path)
        want = array(dtype, shape)
        if version != (1, 0):
            problems.append(f"{name}: version {version}, expected (1, 0)")
        if offset % 64 != 0 or fortran_order:
            problems.append(f"{name}: data at offset {offset}, fortran_order {fortran_order}")
        if arr.dtype != want.dtype or arr.shape != want.shape or not np.array_equal(arr, want):
            problems.append(f"{name}: got {arr.dtype} {arr.shape} {arr.ravel()[:8]}, expected {want.ravel()[:8]}")
    if count == 0:
        problems.append(f"no DTYPE__SHAPE.npy files in {folder}")
    for p in problems:
        print(p)
    print(f"checked {count} files, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("make", "check"):
        sys.exit(__doc__)
    sys.exit(make(sys.argv[2]) if sys.argv[1] == "make" else check(sys.argv[2]))
