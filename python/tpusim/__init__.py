"""tpusim: tpu-sim from Python.

The cycle-accurate TPUv1-style simulator, its assembler and its GEMM and
network compilers (the extension ``tpusim._tpusim``, built from the same
libraries as the command-line tools), design-space sweeps on Dask
(``tpusim.sweep``) and plots of runs and sweeps (``tpusim.plot``, loaded on
first use). docs/python.md describes everything; ``help(tpusim.run)``
and the others document each function.

    import numpy as np, tpusim
    r = tpusim.gemm(np.ones((16, 16), np.int8), np.ones((16, 8), np.int8),
                    config=tpusim.Config("small8"))
    r.c, r.stats["cycles"]

Errors are ``tpusim.Error`` subclasses whose ``code`` is the exit status the
tools give for them: AssemblerError 1, UsageError 2 (also a ValueError),
InputError 3, FaultError 4, DivergenceError 5, CheckError 6.
"""
from ._tpusim import (  # noqa: F401
    DEFAULT_PRESET,
    AssemblerError,
    CheckError,
    Config,
    DivergenceError,
    Error,
    FaultError,
    GemmResult,
    InputError,
    Model,
    NetResult,
    Program,
    RunResult,
    UsageError,
    assemble,
    assemble_file,
    disassemble,
    expand_grid,
    gemm,
    load_model,
    load_sweep_file,
    net,
    presets,
    rtl_builds,
    run,
    run_workload,
)
from ._sweep import sweep, sweep_file  # noqa: F401

__version__ = "0.1.0"


def __getattr__(name):
    # tpusim.plot (matplotlib) is imported on first use, so `import tpusim`
    # stays as quick as before and needs no matplotlib.
    if name == "plot":
        import importlib
        return importlib.import_module(".plot", __name__)
    raise AttributeError(f"module 'tpusim' has no attribute '{name}'")

__all__ = [
    "DEFAULT_PRESET", "AssemblerError", "CheckError", "Config", "DivergenceError", "Error",
    "FaultError", "GemmResult", "InputError", "Model", "NetResult", "Program", "RunResult",
    "UsageError", "assemble", "assemble_file", "disassemble", "expand_grid", "gemm",
    "load_model", "load_sweep_file", "net", "presets", "rtl_builds", "run", "run_workload", "sweep",
    "sweep_file",
]
