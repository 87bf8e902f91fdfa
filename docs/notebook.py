#!/usr/bin/python3
# %% [markdown]
# # tpu-sim from Python: a GEMM, a network, a sweep on Dask, and plots
#
# A notebook as a script: each `# %%` comment starts a cell (VS Code,
# Spyder and Jupytext open it as a notebook), and it runs whole from a shell:
#
#     /usr/bin/python3 docs/notebook.py OUT_DIR [--build BUILD]
#
# It imports `tpusim` from a build of this tree: `--build BUILD` (its
# `BUILD/python`), else a tpusim already on PYTHONPATH, else the first of
# build/ and build-py/ that has the module. It runs a GEMM and a network on the
# `tpuv1` machine, sweeps the array size N = 16 .. 256 for three workloads on
# a local Dask cluster of two worker processes, writes the timeline of a
# short program with `tpu-sim run --timeline`, and draws the four plots of
# `tpusim.plot` into OUT_DIR. About 10 s on two cores. docs/python.md,
# "Plots" and "A notebook".

# %%
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_build(build=None):
    """The build folder whose python/ holds the tpusim module, put on sys.path."""
    if not build:
        import importlib.util
        spec = importlib.util.find_spec("tpusim")  # already on PYTHONPATH: that one
        if spec is not None and spec.origin:
            pkg = os.path.dirname(os.path.abspath(spec.origin))     # BUILD/python/tpusim
            return os.path.dirname(os.path.dirname(pkg))
    candidates = [build] if build else [os.environ.get("TPU_BUILD_DIR"),
                                        os.path.join(ROOT, "build"), os.path.join(ROOT, "build-py")]
    for b in filter(None, candidates):
        pkg = os.path.join(b, "python", "tpusim")
        if os.path.isdir(pkg) and any(f.startswith("_tpusim") for f in os.listdir(pkg)):
            path = os.path.join(os.path.abspath(b), "python")
            if path not in sys.path:
                sys.path.insert(0, path)
            # The Dask worker processes import tpusim too.
            os.environ["PYTHONPATH"] = os.pathsep.join(
                filter(None, [path, os.environ.get("PYTHONPATH")]))
            return os.path.abspath(b)
    if build:
        sys.exit(f"notebook: {build}/python/tpusim has no compiled module (build it: "
                 f"cmake --build {build} --target _tpusim tpu-sim)")
    return None


# %% [markdown]
# ## 1. A GEMM
#
# `tpusim.gemm` compiles `C = A . B` onto the array (tiling K, N and M and
# prefetching weights), runs it on the cycle-accurate model and returns C
# with the run's statistics: the same as `tpu-sim gemm --stats`.

# %%
def run_gemm(tpusim, np, cfg):
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (512, 512), dtype=np.int8)
    b = rng.integers(-128, 128, (512, 512), dtype=np.int8)
    r = tpusim.gemm(a, b, config=cfg)
    assert (r.c == a.astype(np.int32) @ b.astype(np.int32)).all()
    s = r.stats
    print(f"gemm 512x512x512 on N={s['array_n']}: {s['cycles']:,} cycles, "
          f"utilization {100 * s['utilization']:.1f}%, {s['tops']:.2f} TOPS, "
          f"weight stall {s['tpuv1']['weight_stall_cycles']:,} cycles")
    # A batch of 8 through a 512 x 512 layer: little work per weight byte.
    small = tpusim.gemm(a[:8], b, config=cfg)
    return {"gemm 512x512x512": r, "gemm 8x512x512": small}


# %% [markdown]
# ## 2. A network
#
# `tpusim.net` compiles a quantized network (a model file, see
# docs/quantization.md) into one program per chunk of the batch and runs it;
# `layers` holds each layer's cycles, MACs, utilization and bytes moved.

# %%
def run_net(tpusim, np, cfg):
    d = os.path.join(ROOT, "programs", "nets", "digits_cnn")
    x = np.load(os.path.join(d, "test_x.npy"))[:16]
    y = np.load(os.path.join(d, "test_y.npy"))[:16]
    r = tpusim.net(os.path.join(d, "model.json"), x, labels=y, config=cfg)
    print(f"digits_cnn, batch 16: {r.total['cycles']:,} cycles, accuracy {r.accuracy:.3f}")
    for lay in r.layers:
        print(f"  {lay['name']:8s} {lay['type']:10s} {lay['cycles']:7,} cycles  "
              f"utilization {100 * lay['utilization']:5.1f}%")
    return r


# %% [markdown]
# ## 3. A sweep on Dask
#
# Five array sizes x three workloads (two GEMM shapes and the network) on
# the `tpuv1` machine: 15 runs, each a Dask task on a local cluster of two
# worker processes (started and stopped by `tpusim.sweep`), into one
# DataFrame, also written as CSV.

# %%
SIZES = [16, 32, 64, 128, 256]


def workloads():
    d = os.path.join(ROOT, "programs", "nets", "digits_cnn")
    return [
        {"name": "gemm 512x512x512", "kind": "gemm", "m": 512, "k": 512, "n": 512},
        {"name": "gemm 8x512x512", "kind": "gemm", "m": 8, "k": 512, "n": 512},
        {"name": "digits_cnn b16", "kind": "net", "model": os.path.join(d, "model.json"),
         "input": os.path.join(d, "test_x.npy"), "batch": 16},
    ]


def run_sweep(tpusim, out_dir):
    start = time.monotonic()
    df = tpusim.sweep({"array_n": SIZES}, workloads(), base={"preset": "tpuv1"}, n_workers=2,
                      out=os.path.join(out_dir, "sweep.csv"), progress=False)
    failed = df[df.status != "ok"]
    print(f"sweep: {len(df)} runs on 2 worker processes in {time.monotonic() - start:.1f} s, "
          f"{len(failed)} failed")
    for _, row in failed.iterrows():
        print(f"  N={row.array_n} {row.workload}: {row.error}")
    table = df.pivot(index="array_n", columns="workload", values="utilization")
    print((100 * table).round(1).to_string())
    return df


# %% [markdown]
# ## 4. A timeline
#
# The Python API has no timeline option: `tpu-sim run --timeline T.json`
# writes one (a Chrome trace; Perfetto opens it). Here the two-layer MLP of
# programs/mlp2.s on the default machine (N = 8), assembled by
# `tpusim.assemble_file` and run by the tool of the same build.

# %%
def write_timeline(tpusim, build, out_dir):
    tool = os.environ.get("TPUSIM_BIN_DIR")
    tool = os.path.join(tool, "tpu-sim") if tool else os.path.join(build or "", "sim", "tpu-sim")
    if not os.access(tool, os.X_OK):
        sys.exit(f"notebook: no tpu-sim binary at {tool} (set TPUSIM_BIN_DIR)")
    prog = os.path.join(out_dir, "mlp2.tpu")
    tpusim.assemble_file(os.path.join(ROOT, "programs", "mlp2.s")).save(prog)
    data = os.path.join(ROOT, "programs", "data", "mlp2")
    trace = os.path.join(out_dir, "mlp2.timeline.json")
    subprocess.run([tool, "run", prog, "--hostmem", os.path.join(data, "host.npy"),
                    "--weights", os.path.join(data, "weights.npy"), "--timeline", trace],
                   check=True, stdout=subprocess.DEVNULL)
    print(f"timeline: {trace} (open it in ui.perfetto.dev)")
    return trace


# %% [markdown]
# ## 5. Plots
#
# `tpusim.plot` draws each figure into a PNG and returns its path (with the
# drawn numbers in `.data`):
#
# - `layers`: the network's cycles per layer, split by the TPUv1 counters
#   (array active, weight stall, weight shift, non-matrix), and each layer's
#   utilization;
# - `roofline`: the tpuv1 roofline (peak 256 x 256 MACs per cycle; the
#   weight memory's bytes per cycle) with the sweep's GEMMs at every N (each
#   N with its own roof) and the network (a sweep's network rows carry no
#   weight traffic, so it comes from the run of cell 2);
# - `timeline`: the MLP's run, a row per unit, stalls coloured by cause;
# - `sweep_utilization`: utilization against N, a line per workload.

# %%
def draw(tpusim, cfg, gemms, net, df, trace, out_dir):
    paths = [
        tpusim.plot.layers(net, os.path.join(out_dir, "layers.png")),
        tpusim.plot.roofline([df[df.workload.str.startswith("gemm")],
                              ("digits_cnn b16", net)],
                             os.path.join(out_dir, "roofline.png"), cfg),
        tpusim.plot.timeline(trace, os.path.join(out_dir, "timeline.png")),
        tpusim.plot.sweep_utilization(df, os.path.join(out_dir, "sweep.png"),
                                      title="Utilization against array size (tpuv1, 700 MHz)"),
    ]
    for p in paths:
        print(f"plot: {p}")
    return paths


# %%
def main(argv=None):
    ap = argparse.ArgumentParser(description="tpu-sim from Python, as a notebook")
    ap.add_argument("out_dir", nargs="?", default="notebook-out", help="where the files go")
    ap.add_argument("--build", help="the build folder (default: build/, then build-py/)")
    args = ap.parse_args(argv)
    build = find_build(args.build)
    import numpy as np

    import tpusim

    os.makedirs(args.out_dir, exist_ok=True)
    start = time.monotonic()
    cfg = tpusim.Config("tpuv1")
    gemms = run_gemm(tpusim, np, cfg)
    net = run_net(tpusim, np, cfg)
    df = run_sweep(tpusim, args.out_dir)
    trace = write_timeline(tpusim, build, args.out_dir)
    draw(tpusim, cfg, gemms, net, df, trace, args.out_dir)
    print(f"done in {time.monotonic() - start:.1f} s")
    return 0


# The Dask workers import this file: everything runs behind the guard.
if __name__ == "__main__":
    sys.exit(main())
