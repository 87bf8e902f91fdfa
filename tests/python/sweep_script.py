"""A sweep script as docs/python.md shows it: tpusim.sweep starts its own
local Dask cluster (two worker processes), which import this file, so the
work sits behind the __main__ guard. Writes the table to argv[1]."""
import sys

import tpusim


def main(out):
    df = tpusim.sweep({"array_n": [8, 16]},
                      [{"name": "gemm", "kind": "gemm", "m": 128, "k": 128, "n": 128, "seed": 1},
                       {"name": "tall", "kind": "gemm", "m": 512, "k": 16, "n": 16}],
                      n_workers=2, out=out)
    print(df[["array_n", "workload", "status", "cycles", "utilization"]].to_string(index=False))


if __name__ == "__main__":
    main(sys.argv[1])
