# Type stubs of tpusim (docs/python.md).
import os
from typing import Any, Callable, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt
import pandas as pd

PathLike = Union[str, "os.PathLike[str]"]
ConfigLike = Union["Config", str, Mapping[str, Any], None]
ProgramLike = Union["Program", bytes, PathLike]
Workload = Union[Mapping[str, Any], Callable[["Config"], Mapping[str, Any]]]

from . import plot as plot  # loaded on first use: tpusim.plot.layers(...), docs/python.md "Plots"

DEFAULT_PRESET: str
__version__: str

class Error(Exception):
    """Base of every tpu-sim error; `code` is the tools' exit status, `message` their message."""
    code: Optional[int]
    message: str

class AssemblerError(Error):
    """Status 1: every diagnostic as tpu-as prints it; `diagnostics`: [(line, col, message)]."""
    diagnostics: list[Tuple[int, int, str]]

class UsageError(Error, ValueError):
    """Status 2: an invalid argument."""

class InputError(Error):
    """Status 3: a missing or malformed input, or one that does not fit the machine."""

class FaultError(Error):
    """Status 4: the program faulted; `fault` describes it, `result` (tpusim.run) holds the run."""
    fault: dict[str, Any]
    result: "RunResult"

class DivergenceError(Error):
    """Status 5: engine='both' found the RTL and the SystemC model disagreeing."""

class CheckError(Error):
    """Status 6: check=True found a result differing from the reference."""

class Config:
    """A machine configuration: preset, then `file` (JSON overrides), then fields, then array_n."""
    def __init__(self, preset: str = "small8", *, file: Optional[PathLike] = None,
                 array_n: Optional[int] = None, **fields: int) -> None: ...
    @property
    def preset(self) -> str: ...
    array_n: int
    host_rows: int
    weight_tiles: int
    ub_rows: int
    acc_rows: int
    fifo_depth: int
    host_latency: int
    host_bytes_per_cycle: int
    weight_latency: int
    weight_bytes_per_cycle: int
    act_latency: int
    host_layout_cycles: int
    ub_weight_path: int
    clock_mhz: int
    def replace(self, **fields: int) -> "Config":
        """A copy with some fields changed."""
    def to_dict(self) -> dict[str, Any]:
        """Every field and 'preset'."""
    @staticmethod
    def fields() -> list[dict[str, Any]]:
        """Every configurable field: name, description, min, max."""

class Program:
    """An assembled program."""
    @property
    def array_n(self) -> int: ...
    @property
    def instructions(self) -> list[str]: ...
    def __len__(self) -> int: ...
    def to_bytes(self) -> bytes:
        """The program file image (.tpu)."""
    @staticmethod
    def from_bytes(data: bytes) -> "Program": ...
    @staticmethod
    def load(path: PathLike) -> "Program": ...
    def save(self, path: PathLike) -> None: ...

class RunResult:
    """The outcome of run(): views of the final memories, statistics, retire records."""
    @property
    def host(self) -> npt.NDArray[np.int8]: ...
    @property
    def out(self) -> npt.NDArray[np.int8]:
        """The host rows `tpu-sim run --out` writes."""
    @property
    def weights(self) -> npt.NDArray[np.int8]: ...
    @property
    def ub(self) -> npt.NDArray[np.int8]: ...
    @property
    def acc(self) -> npt.NDArray[np.int32]: ...
    @property
    def stats(self) -> dict[str, Any]:
        """As `tpu-sim run --stats` writes them."""
    @property
    def energy(self) -> dict[str, Any]:
        """stats['energy']: the energy model's figures (docs/energy.md)."""
    @property
    def retired(self) -> np.ndarray:
        """Structured array: pc, issue, start, completion, completed."""
    @property
    def fault(self) -> Optional[dict[str, Any]]: ...
    @property
    def halted(self) -> bool: ...
    @property
    def cycles(self) -> int: ...
    @property
    def config(self) -> Config: ...
    @property
    def program(self) -> Program: ...
    def trace(self) -> str:
        """The trace `tpu-sim run --trace` prints."""

class GemmResult:
    c: np.ndarray
    stats: dict[str, Any]
    retired: np.ndarray
    program: Program
    assembly: str

class NetResult:
    output: np.ndarray
    stats: dict[str, Any]
    accuracy: Optional[float]
    @property
    def layers(self) -> list[dict[str, Any]]: ...
    @property
    def total(self) -> dict[str, Any]: ...
    @property
    def energy(self) -> dict[str, Any]:
        """total['energy'], with inferences_per_j (docs/energy.md)."""

class Model:
    name: str
    input_shape: list[int]
    @property
    def layers(self) -> list[dict[str, str]]: ...

def presets() -> list[str]:
    """The configuration presets."""
def rtl_builds() -> list[str]:
    """The configurations the RTL core was built for."""
def assemble(source: str, *, config: ConfigLike = None, array_n: Optional[int] = None,
             filename: str = "<source>") -> Program:
    """Assembles source text; AssemblerError with every diagnostic."""
def assemble_file(path: PathLike, *, config: ConfigLike = None,
                  array_n: Optional[int] = None) -> Program:
    """Assembles a .s file."""
def disassemble(program: ProgramLike, *, encoding: bool = False) -> str:
    """Assembly text that re-assembles to the same program."""
def run(program: ProgramLike, hostmem: Optional[npt.ArrayLike] = None,
        weights: Optional[npt.ArrayLike] = None, *, config: ConfigLike = None,
        engine: str = "systemc", detail: str = "auto", max_cycles: int = 100_000_000,
        vcd: Optional[PathLike] = None, raise_on_fault: bool = True) -> RunResult:
    """Runs a program as `tpu-sim run` does."""
def gemm(a: npt.ArrayLike, b: npt.ArrayLike, *,
         requant: Union[Tuple[int, int, int], str, None] = None, act: str = "none",
         check: bool = False, config: ConfigLike = None, engine: str = "systemc",
         detail: str = "auto", max_cycles: int = 100_000_000,
         vcd: Optional[PathLike] = None) -> GemmResult:
    """Compiles and runs C = A . B as `tpu-sim gemm` does."""
def net(model: Union[PathLike, Model], x: npt.ArrayLike, *, labels: Optional[npt.ArrayLike] = None,
        config: ConfigLike = None, host_steps: bool = False, check: bool = False,
        engine: str = "systemc", detail: str = "auto", max_cycles: int = 100_000_000,
        vcd: Optional[PathLike] = None) -> NetResult:
    """Compiles and runs a quantized network as `tpu-sim net` does."""
def load_model(path: PathLike) -> Model:
    """Reads a model file."""
def run_workload(config: ConfigLike, workload: Mapping[str, Any], *, base_dir: str = "",
                 engine: str = "systemc", detail: str = "auto",
                 max_cycles: int = 100_000_000, name: str = "") -> dict[str, Any]:
    """One sweep run: flat statistics."""
def load_sweep_file(path: PathLike) -> dict[str, Any]:
    """A sweep file, read and checked as `tpu-sim sweep` does."""
def expand_grid(grid: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The points of a grid, the last field fastest."""
def sweep(grid: Mapping[str, Sequence[Any]], workloads: Union[Sequence[Workload], Mapping[str, Workload]],
          *, base: Optional[Mapping[str, Any]] = None, out: Optional[PathLike] = None,
          rows_dir: Optional[PathLike] = None, n_workers: int = 2, address: Optional[str] = None,
          client: Any = None, engine: str = "systemc", detail: str = "auto",
          max_cycles: int = 100_000_000, base_dir: PathLike = ".", progress: Optional[bool] = None,
          retries: int = 0) -> pd.DataFrame:
    """Every workload on every configuration of the grid, on Dask; one row per run."""
def sweep_file(path: PathLike, **kwargs: Any) -> pd.DataFrame:
    """A sweep described by a `tpu-sim sweep` JSON file."""
