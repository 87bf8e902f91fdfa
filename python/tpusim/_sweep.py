"""Design-space sweeps: configurations x workloads on Dask distributed.

Each run (one grid point, one workload) is one Dask task; a worker process
runs it with tpusim.run_workload (the same C++ code as `tpu-sim sweep`) and
returns one row of statistics. Nothing is written by the runs themselves, so
no two of them share an output file; the client writes the CSV, whole or not
at all, and (with ``rows_dir``) one JSON file per run under a name of its own.
A run that fails, even one whose worker process dies, becomes a row with its
error; the sweep goes on. A worker that dies takes with it every run it held,
so those runs are run again, one at a time, before any is called lost: a run
is reported lost only when it was alone on the worker that died.
"""
import json
import os
import sys
import tempfile
import time

# Columns every row has, first in every table.
_FIXED = ["workload", "status", "error_code", "error"]


def _as_workloads(workloads):
    """A list of (name, spec): dict specs, or callables f(config) -> dict."""
    if isinstance(workloads, dict):
        items = list(workloads.items())
    else:
        items = []
        for i, w in enumerate(workloads):
            if isinstance(w, dict):
                name = w.get("name") or f"{w.get('kind', 'workload')}{i}"
            else:
                name = getattr(w, "__name__", f"workload{i}")
            items.append((name, w))
    names = [n for n, _ in items]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        from ._tpusim import UsageError
        raise UsageError(f"workloads: names must be unique, repeated: {', '.join(dup)}")
    return items


def _run_one(task):
    """One run, on a worker: never raises; an error becomes the row's error."""
    from . import _tpusim as t
    index, point, base, name, workload, opts = task
    row = {"run": index, **point, "workload": name, "status": "ok", "error_code": 0, "error": ""}
    start = time.perf_counter()
    try:
        fields = dict(base or {})
        fields.update(point)
        cfg = t.Config(fields.pop("preset", t.DEFAULT_PRESET))
        if fields:
            cfg = cfg.replace(**fields)
        if callable(workload):
            stats = dict(workload(cfg))
        else:
            stats = t.run_workload(cfg, workload, base_dir=opts["base_dir"], engine=opts["engine"],
                                   detail=opts["detail"], max_cycles=opts["max_cycles"], name=name)
        for k, v in stats.items():
            if k in point:  # array_n: the grid's value, which the statistics repeat
                continue
            row[k if k not in row else f"stat.{k}"] = v
    except t.Error as e:
        row.update(status="error", error_code=e.code, error=str(e))
    except Exception as e:  # noqa: BLE001  a failed run is a row, not a lost sweep
        row.update(status="error", error_code=3, error=f"{type(e).__name__}: {e}")
    row["wall_seconds"] = time.perf_counter() - start
    return row


class _Progress:
    """A one-line progress bar on stderr, only on a terminal."""

    def __init__(self, total, enabled):
        self.total, self.done, self.failed = total, 0, 0
        self.enabled = enabled if enabled is not None else sys.stderr.isatty()
        self.start = time.monotonic()

    def update(self, row):
        self.done += 1
        self.failed += row["status"] != "ok"
        if not self.enabled:
            return
        width = 30
        filled = width * self.done // max(self.total, 1)
        sys.stderr.write(f"\rsweep [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}"
                         f" runs, {self.failed} failed, {time.monotonic() - self.start:.0f} s")
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _write_atomic(path, text):
    # The tools' writer: whole or not at all, links written through, devices into.
    from ._tpusim import write_file
    write_file(os.fspath(path), text.encode())


def _failed_row(task, exc):
    index, point, _base, name, _workload, _opts = task
    return {"run": index, **point, "workload": name, "status": "error", "error_code": 3,
            "error": f"the run was lost: {type(exc).__name__}: {exc}", "wall_seconds": float("nan")}


def sweep(grid, workloads, *, base=None, out=None, rows_dir=None, n_workers=2, address=None,
          client=None, engine="systemc", detail="auto", max_cycles=100_000_000, base_dir=".",
          progress=None, retries=0):
    """Run every workload on every configuration of `grid`; return a pandas DataFrame.

    grid: {field: [values]} over configuration fields ('preset', 'array_n',
    'ub_rows', ...); every combination is one configuration, the last field
    varying fastest. base: fields every configuration starts from (e.g.
    {"preset": "tpuv1"}). workloads: a list (or {name: spec} dict) of workload
    dicts (docs/python.md, "Workloads": gemm, net or run) or callables
    f(config) -> dict of statistics.

    One row per run: the run's index, the grid fields, 'workload', 'status'
    ('ok' or 'error'), 'error_code' (the tools' exit status), 'error' (the
    tools' message), the statistics (flattened: 'stall_cycles.raw_hazard'...)
    and 'wall_seconds'. out: also write the table as CSV (whole or not at all);
    rows_dir: also write each run's row as rows_dir/run-NNNNN.json.

    Where it runs: `client` (a distributed.Client), else the scheduler at
    `address` ('tcp://host:8786'), else a LocalCluster of `n_workers` worker
    processes (one thread each) started and stopped here; n_workers=0 runs
    in this process without Dask. Scripts that start a LocalCluster need an
    ``if __name__ == "__main__":`` guard (the workers import the main module).
    progress: a progress bar on stderr (default: only when it is a terminal).
    """
    import pandas as pd

    from ._tpusim import check_run_options, expand_grid

    check_run_options(engine, detail, max_cycles)  # the tools' usage errors, before any run
    points = expand_grid(grid or {})
    items = _as_workloads(workloads)
    opts = {"engine": engine, "detail": detail, "max_cycles": max_cycles,
            "base_dir": os.path.abspath(os.fspath(base_dir))}
    tasks = []
    for point in points:
        for name, w in items:
            tasks.append((len(tasks), point, base, name, w, opts))
    bar = _Progress(len(tasks), progress)
    rows = []
    if n_workers == 0 and client is None and address is None:
        for task in tasks:
            rows.append(_run_one(task))
            bar.update(rows[-1])
    else:
        rows = _run_on_dask(tasks, bar, n_workers, address, client, retries)
    rows.sort(key=lambda r: r["run"])

    fields = list((grid or {}).keys())
    stats = sorted({k for r in rows for k in r} - set(fields) - set(_FIXED) - {"run", "wall_seconds"})
    columns = ["run"] + fields + _FIXED + stats + ["wall_seconds"]
    df = pd.DataFrame(rows, columns=columns)
    if rows_dir is not None:
        os.makedirs(rows_dir, exist_ok=True)
        for r in rows:
            _write_atomic(os.path.join(rows_dir, f"run-{r['run']:05d}.json"),
                          json.dumps(r, indent=1, default=str) + "\n")
    if out is not None:
        _write_atomic(out, df.to_csv(index=False))
    return df


def _run_on_dask(tasks, bar, n_workers, address, client, retries):
    from distributed import Client, LocalCluster, as_completed

    cluster = None
    own_client = client is None
    try:
        if client is None:
            if address is None:
                # A task on a worker that dies fails at once (no waiting for
                # it to kill more workers): _run_lost_alone runs it again.
                import dask
                with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
                    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
                client = Client(cluster)
            else:
                client = Client(address)
        futures = client.map(_run_one, tasks, pure=False, retries=retries)
        index = {f.key: t for f, t in zip(futures, tasks)}
        rows, lost = [], []
        for f in as_completed(futures):
            try:
                row = f.result()
            except Exception:  # noqa: BLE001  e.g. KilledWorker: a worker died, maybe of another run
                lost.append(index[f.key])
                continue
            rows.append(row)
            bar.update(row)
        for row in _run_lost_alone(client, lost):
            rows.append(row)
            bar.update(row)
        return rows
    finally:
        if own_client and client is not None:
            client.close()
        if cluster is not None:
            cluster.close()


def _run_lost_alone(client, lost):
    """The runs whose worker died, each again with nothing else running (_run_one
    never raises, so only a worker's death fails a task): one that is lost now
    took its worker down itself, and its row says so; the others' rows are
    their own results."""
    for task in sorted(lost, key=lambda t: t[0]):
        try:
            yield client.submit(_run_one, task, pure=False).result()
        except Exception as e:  # noqa: BLE001
            yield _failed_row(task, e)


def sweep_file(path, **kwargs):
    """Run a sweep described by a JSON file, the format of `tpu-sim sweep`:
    {"base": {...}, "grid": {...}, "workloads": [...], "engine": ..., "detail": ...,
    "max_cycles": ...}; workload paths are relative to the file's folder.
    The file is checked as `tpu-sim sweep` checks it (InputError, the same
    message). Keyword arguments are those of sweep() and win over the file's.
    A file's "timeout_s" is a UsageError: runs on Dask cannot be stopped
    (`tpu-sim sweep` stops them)."""
    from ._tpusim import UsageError, load_sweep_file

    spec = load_sweep_file(os.fspath(path))
    if spec["timeout_s"] is not None:
        raise UsageError(f"{os.fspath(path)}: timeout_s: tpusim.sweep cannot stop a run on Dask; "
                         "use tpu-sim sweep for a time limit")
    args = {"base": spec["base"], "engine": spec["engine"], "detail": spec["detail"],
            "max_cycles": spec["max_cycles"], "base_dir": spec["base_dir"]}
    args.update(kwargs)
    workloads = dict(zip(spec["names"], spec["workloads"]))
    return sweep(spec["grid"], workloads, **args)
