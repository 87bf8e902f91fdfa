"""tpusim's API against independent references: NumPy's matmul for gemm, the
tpu-sim command line's own output for the same runs, tools/int8_reference.py
for networks; the error mapping and the GIL."""
import json
import pathlib
import pickle
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import tpusim

RNG = np.random.default_rng(15)


def rand_int8(*shape):
    return RNG.integers(-128, 128, shape, dtype=np.int8)


def cli(tpu_sim, *args, expect=0):
    p = subprocess.run([tpu_sim, *map(str, args)], capture_output=True, text=True)
    assert p.returncode == expect, p.stderr
    return p


# ---- configurations ---------------------------------------------------------------

def test_config_presets_and_overrides(tmp_path):
    assert set(tpusim.presets()) >= {"tpuv1", "small4", "small8", "small16"}
    c = tpusim.Config()
    assert c.preset == tpusim.DEFAULT_PRESET == "small8" and c.array_n == 8
    t = tpusim.Config("tpuv1", array_n=64, ub_rows=4096)
    assert (t.array_n, t.ub_rows, t.preset) == (64, 4096, "tpuv1")
    assert t.acc_rows == tpusim.Config("tpuv1").acc_rows  # --array keeps the other sizes
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"preset": "small16", "fifo_depth": 2}))
    fc = tpusim.Config("small4", file=f)  # the file's preset wins, as with --config
    assert (fc.array_n, fc.fifo_depth) == (16, 2)
    r = c.replace(array_n=16, fifo_depth=1)
    assert (r.array_n, r.fifo_depth, c.array_n) == (16, 1, 8)
    c2 = tpusim.Config()
    c2.ub_rows = 512
    assert c2.ub_rows == 512 and c2 != c
    assert pickle.loads(pickle.dumps(t)) == t
    assert {f["name"] for f in tpusim.Config.fields()} >= {"array_n", "ub_rows", "clock_mhz"}
    assert t.to_dict()["ub_rows"] == 4096


def test_config_errors():
    with pytest.raises(tpusim.InputError) as e:
        tpusim.Config(ub_rows=0)
    assert e.value.code == 3 and "ub_rows" in str(e.value)
    with pytest.raises(tpusim.InputError, match="no_such_field"):
        tpusim.Config(no_such_field=1)
    with pytest.raises(tpusim.InputError, match="nope"):
        tpusim.Config("nope")
    with pytest.raises(tpusim.UsageError):
        tpusim.Config(array_n=3)
    c = tpusim.Config()
    with pytest.raises(tpusim.InputError):
        c.fifo_depth = 0
    assert c.fifo_depth == 4  # unchanged


# ---- assembler ------------------------------------------------------------------------

def test_assemble_disassemble_roundtrip(source_dir, tpu_sim, tmp_path):
    for src in sorted((source_dir / "programs").glob("*.s")):
        prog = tpusim.assemble_file(src)
        # The same bytes as tpu-as.
        out = tmp_path / (src.stem + ".tpu")
        subprocess.run([str(pathlib.Path(tpu_sim).parent / "tpu-as"), str(src), "-o", str(out)], check=True)
        assert prog.to_bytes() == out.read_bytes(), src.name
        # Disassembly re-assembles to the same program, from every form.
        for form in (prog, prog.to_bytes(), out):
            assert tpusim.assemble(tpusim.disassemble(form)) == prog
        assert tpusim.Program.from_bytes(prog.to_bytes()) == prog
        assert pickle.loads(pickle.dumps(prog)) == prog
        assert len(prog) == len(prog.instructions)
    text = tpusim.disassemble(prog, encoding=True)
    assert ";    0:" in text


def test_assembler_error_is_file_line_col(tmp_path):
    src = "RHM 0, 0, 8\nMMC.SX 0, 0, 1\nHLT\n"
    with pytest.raises(tpusim.AssemblerError) as e:
        tpusim.assemble(src, filename="bad.s")
    err = e.value
    assert err.code == 1 and isinstance(err, tpusim.Error)
    assert str(err).startswith("bad.s:2:6: error: unknown flag 'X' for MMC")
    assert "MMC.SX 0, 0, 1\n     ^" in str(err) and str(err).endswith("1 error generated.")
    assert err.diagnostics == [(2, 6, "unknown flag 'X' for MMC (valid: SOC)")]
    f = tmp_path / "b.s"
    f.write_text(src)
    with pytest.raises(tpusim.AssemblerError, match=f"^{f}:2:6: error"):
        tpusim.assemble_file(f)
    # With a configuration, address ranges are checked against its memories.
    with pytest.raises(tpusim.AssemblerError, match="past"):
        tpusim.assemble("RHM 0, 16380, 8\nHLT\n", config=tpusim.Config(ub_rows=16384 // 2))


# ---- run against the command line --------------------------------------------------------

@pytest.mark.parametrize("name", ["one_tile", "mlp2", "conv2", "pool", "vec"])
def test_run_matches_cli(name, source_dir, tpu_sim, tmp_path):
    data = source_dir / "programs" / "data" / name
    host, weights = np.load(data / "host.npy"), np.load(data / "weights.npy")
    prog = tpusim.assemble_file(source_dir / "programs" / f"{name}.s")
    r = tpusim.run(prog, host, weights)
    assert r.halted and r.fault is None
    np.testing.assert_array_equal(r.out, np.load(data / "expected.npy"))
    # The command line on the same run: the same --out and --stats.
    prog.save(tmp_path / "p.tpu")
    cli(tpu_sim, "run", tmp_path / "p.tpu", "--hostmem", data / "host.npy", "--weights",
        data / "weights.npy", "--out", tmp_path / "o.npy", "--stats", tmp_path / "s.json")
    assert r.stats == json.loads((tmp_path / "s.json").read_text())
    np.testing.assert_array_equal(r.out, np.load(tmp_path / "o.npy"))
    # Retire records: one per instruction issued, as --trace prints them.
    trace = cli(tpu_sim, "run", tmp_path / "p.tpu", "--hostmem", data / "host.npy", "--weights",
                data / "weights.npy", "--trace").stdout
    # (--trace may add lines of its own between the instructions'.)
    assert r.trace().splitlines() == [l for l in trace.splitlines() if l.startswith("pc ")]
    assert len(r.retired) == r.stats["instructions"]
    assert list(r.retired.dtype.names) == ["pc", "issue", "start", "completion", "completed"]
    assert (r.retired["completion"] >= r.retired["start"]).all()


def test_run_results_are_views():
    prog = tpusim.assemble("RHM 0, 0, 2\nWHM 0, 4, 2\nHLT\n")
    host = rand_int8(2, 8)
    r = tpusim.run(prog, host)
    assert r.host.shape == (tpusim.Config().host_rows, 8) and r.out.shape == (6, 8)
    np.testing.assert_array_equal(r.out[4:6], host)
    assert r.ub.shape[1] == 8 and r.acc.dtype == np.int32 and r.weights.shape[1:] == (8, 8)
    # Views into the result's memory, which they keep alive.
    assert not r.host.flags.owndata
    out = r.out
    del r
    np.testing.assert_array_equal(out[4:6], host)


def test_run_engines_and_detail(source_dir):
    data = source_dir / "programs" / "data" / "mlp2"
    host, weights = np.load(data / "host.npy"), np.load(data / "weights.npy")
    prog = tpusim.assemble_file(source_dir / "programs" / "mlp2.s")
    ref = tpusim.run(prog, host, weights)
    for kw in ({"detail": "detailed"}, {"detail": "fast"}, {"engine": "rtl"}, {"engine": "both"}):
        if kw.get("engine") and "small8" not in tpusim.rtl_builds():
            continue
        r = tpusim.run(prog, host, weights, **kw)
        assert r.stats == ref.stats, kw
        np.testing.assert_array_equal(r.out, ref.out)
    with pytest.raises(tpusim.UsageError, match="engine"):
        tpusim.run(prog, host, weights, engine="verilog")
    with pytest.raises(tpusim.UsageError, match="detail"):
        tpusim.run(prog, host, weights, detail="medium")


def test_run_vcd(tmp_path):
    prog = tpusim.assemble("RHM 0, 0, 2\nWHM 0, 4, 2\nHLT\n")
    tpusim.run(prog, rand_int8(2, 8), vcd=tmp_path / "t.vcd")
    assert (tmp_path / "t.vcd").read_text().startswith("$date")
    assert (tmp_path / "t.gtkw").exists()


def test_run_errors(tmp_path):
    prog = tpusim.assemble("RHM 0, 0, 2\nHLT\n")
    with pytest.raises(tpusim.InputError, match=r"hostmem: expected a 2-D int8 array \(host memory, rows x N\), got a 2-D int32"):
        tpusim.run(prog, np.zeros((2, 8), np.int32))
    with pytest.raises(tpusim.InputError, match="rows have 4 bytes but the array is N=8"):
        tpusim.run(prog, np.zeros((2, 4), np.int8))
    with pytest.raises(tpusim.InputError, match="weights"):
        tpusim.run(prog, None, np.zeros((1, 4, 4), np.int8))
    with pytest.raises(tpusim.InputError, match="no_such.tpu"):
        tpusim.run(tmp_path / "no_such.tpu")
    with pytest.raises(tpusim.InputError):
        tpusim.run(b"TPUP garbage")
    # A fault: status 4 with the tools' message, and the run up to it.
    bad = tpusim.assemble("RHM 0, 0, 2\nWHM 0, 1048575, 2\nHLT\n")
    with pytest.raises(tpusim.FaultError) as e:
        tpusim.run(bad)
    assert e.value.code == 4 and str(e.value).startswith("fault at pc 1 (WHM 0, 1048575, 2), cycle")
    assert e.value.fault["pc"] == 1 and e.value.result.stats["halted"] is False
    r = tpusim.run(bad, raise_on_fault=False)
    assert r.fault["pc"] == 1 and "fault" in r.stats
    with pytest.raises(tpusim.FaultError) as e:
        tpusim.run(tpusim.assemble("RHM 0, 0, 8\nHLT\n"), max_cycles=3)
    assert "cycle" in str(e.value)


def test_max_cycles_is_checked_as_the_tools_do():
    # The tools' usage error (2) and message, not pybind11's TypeError.
    prog = tpusim.assemble("HLT\n")
    msg = "max_cycles: expected a number of cycles (an integer >= 0), got "
    for bad, shown in [(-1, "-1"), (1.5, '"1.5"'), ("9", '"\'9\'"'), (True, '"True"')]:
        with pytest.raises(tpusim.UsageError) as e:
            tpusim.run(prog, max_cycles=bad)
        assert e.value.code == 2 and str(e.value) == msg + shown
    with pytest.raises(tpusim.UsageError, match="max_cycles"):
        tpusim.gemm(rand_int8(4, 4), rand_int8(4, 4), max_cycles=-5)
    with pytest.raises(tpusim.UsageError, match="max_cycles"):
        tpusim.run_workload("small8", {"kind": "gemm", "m": 4, "k": 4, "n": 4}, max_cycles=-5)
    assert tpusim.run(prog, max_cycles=np.int64(10)).stats["halted"]
    assert tpusim.run(prog, max_cycles=2**64 - 1).stats["halted"]


def test_sizes_are_checked_before_copying():
    import tracemalloc
    prog = tpusim.assemble("HLT\n", array_n=8)
    # 10^9 rows as a broadcast view of one row (8 bytes): a copy would take 8 GB.
    view = np.broadcast_to(np.zeros((1, 8), np.int8), (10**9, 8))
    tracemalloc.start()
    try:
        with pytest.raises(tpusim.InputError, match="hostmem: 1000000000 rows do not fit in host memory"):
            tpusim.run(prog, view)
        with pytest.raises(tpusim.InputError, match="weights: 1000000000 tiles do not fit"):
            tpusim.run(prog, None, np.broadcast_to(np.zeros((1, 8, 8), np.int8), (10**9, 8, 8)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20, f"{peak} bytes allocated"
    # An input no machine can copy (2^50 bytes): tpusim's error, not NumPy's MemoryError.
    huge = np.broadcast_to(np.int8(1), (2**48, 4))
    with pytest.raises(tpusim.InputError, match="out of memory"):
        tpusim.gemm(huge, rand_int8(4, 4))


def test_ctrl_c_stops_a_network_between_programs(source_dir):
    # Two programs (host steps), the first about a fifth of the run: Ctrl-C (here
    # interrupt_main, as the signal handler would) during it raises KeyboardInterrupt when
    # it ends, without running the second. (Within one program the model has no point to
    # stop at: docs/python.md.)
    import _thread
    d = source_dir / "programs" / "nets" / "digits_cnn"
    x = np.concatenate([np.load(d / "test_x.npy")] * 4)
    run = dict(host_steps=True, detail="detailed", config="small4")
    start = time.monotonic()
    assert len(tpusim.net(d / "model.json", x, **run).stats["programs"]) == 2
    whole = time.monotonic() - start
    timer = threading.Timer(whole / 20, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        tpusim.net(d / "model.json", x, **run)
    stopped = time.monotonic() - start
    timer.join()
    assert stopped < 0.6 * whole, (stopped, whole)


@pytest.mark.parametrize("engine,detail", [("systemc", "detailed"), ("systemc", "fast"), ("rtl", "auto")])
def test_ctrl_c_stops_one_program(engine, detail):
    # One long GEMM program: Ctrl-C (interrupt_main, as the signal handler would)
    # a tenth of the way through raises KeyboardInterrupt long before the run would
    # end, and the next run is whole and correct.
    import _thread
    if engine == "rtl" and "small8" not in tpusim.rtl_builds():
        pytest.skip("no RTL build of small8")
    rng = np.random.default_rng(5)
    size = {"detailed": 640, "fast": 1024, "auto": 360}[detail]  # about 1-1.5 s each here
    run = dict(engine=engine, detail=detail, config="small8")
    while True:  # larger on a faster machine, until the run takes half a second
        a = rng.integers(-128, 128, (size, size), dtype=np.int8)
        b = rng.integers(-128, 128, (size, size), dtype=np.int8)
        start = time.monotonic()
        whole_c = tpusim.gemm(a, b, **run).c
        whole = time.monotonic() - start
        if whole > 0.5 or size >= 4096:
            break
        size = int(size * 1.6)
    assert whole > 0.5, f"the run is too short to interrupt: {whole:.2f} s"
    timer = threading.Timer(whole / 10, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        tpusim.gemm(a, b, **run)
    stopped = time.monotonic() - start
    timer.join()
    assert stopped < 0.5 * whole, (stopped, whole)
    again = tpusim.gemm(a, b, **run).c
    assert np.array_equal(again, whole_c)
    assert np.array_equal(whole_c, a.astype(np.int32) @ b.astype(np.int32))


def test_engine_without_rtl_build():
    prog = tpusim.assemble("HLT\n", array_n=32)
    with pytest.raises(tpusim.InputError, match="RTL|rtl"):
        tpusim.run(prog, engine="rtl")


def test_error_classes():
    for cls, code in [(tpusim.AssemblerError, 1), (tpusim.UsageError, 2), (tpusim.InputError, 3),
                      (tpusim.FaultError, 4), (tpusim.DivergenceError, 5), (tpusim.CheckError, 6)]:
        assert issubclass(cls, tpusim.Error) and cls.code == code
    assert issubclass(tpusim.UsageError, ValueError)


# ---- gemm against NumPy and the command line ---------------------------------------------

@pytest.mark.parametrize("preset,shape", [("small8", (37, 19, 23)), ("small4", (5, 9, 3)),
                                          ("small16", (64, 40, 70))])
def test_gemm_int32_matches_numpy(preset, shape):
    m, k, n = shape
    a, b = rand_int8(m, k), rand_int8(k, n)
    r = tpusim.gemm(a, b, config=preset)
    assert r.c.dtype == np.int32 and r.c.shape == (m, n)
    np.testing.assert_array_equal(r.c, a.astype(np.int32) @ b.astype(np.int32))
    assert r.stats["array_n"] == tpusim.Config(preset).array_n and r.stats["cycles"] > 0
    assert "MMC" in r.assembly and len(r.program) > 0
    # Non-contiguous inputs are fine.
    r2 = tpusim.gemm(np.asfortranarray(a), b[:, :], config=preset)
    np.testing.assert_array_equal(r2.c, r.c)


def test_gemm_requant_matches_cli(tpu_sim, tmp_path):
    a, b = rand_int8(30, 17), rand_int8(17, 12)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    for act in ("none", "relu", "sigmoid", "tanh"):
        r = tpusim.gemm(a, b, requant=(93, 13, -3), act=act, check=True)
        assert r.c.dtype == np.int8
        cli(tpu_sim, "gemm", "--a", tmp_path / "a.npy", "--b", tmp_path / "b.npy", "--requant",
            "93,13,-3", "--act", act, "--out", tmp_path / "c.npy", "--stats", tmp_path / "s.json")
        np.testing.assert_array_equal(r.c, np.load(tmp_path / "c.npy"))
        assert r.stats == json.loads((tmp_path / "s.json").read_text())
    assert (tpusim.gemm(a, b, requant="93,13,-3", act="relu").c >= -3).all()


def test_gemm_errors():
    a, b = rand_int8(4, 5), rand_int8(5, 3)
    with pytest.raises(tpusim.UsageError, match="act needs requant"):
        tpusim.gemm(a, b, act="relu")
    with pytest.raises(tpusim.UsageError, match="QMul|M = |outside"):
        tpusim.gemm(a, b, requant=(1 << 40, 0, 0))
    with pytest.raises(tpusim.UsageError):
        tpusim.gemm(a, b, requant=(1, 2))
    with pytest.raises(tpusim.InputError, match="B: expected a 2-D int8 array"):
        tpusim.gemm(a, b.astype(np.float32))
    with pytest.raises(tpusim.InputError):
        tpusim.gemm(a, rand_int8(4, 3))  # K differs
    with pytest.raises(tpusim.InputError):
        tpusim.gemm(rand_int8(0, 5), b)


# ---- net against tools/int8_reference.py ----------------------------------------------------

@pytest.mark.parametrize("name,batch", [("digits_cnn", 24), ("resnet_mini", 4)])
def test_net_matches_int8_reference(name, batch, source_dir, tmp_path):
    d = source_dir / "programs" / "nets" / name
    x = np.load(d / "test_x.npy")[:batch]
    np.save(tmp_path / "x.npy", x)
    subprocess.run([sys.executable, str(source_dir / "tools" / "int8_reference.py"), str(d / "model.json"),
                    "--input", str(tmp_path / "x.npy"), "--out", str(tmp_path / "y.npy")], check=True)
    want = np.load(tmp_path / "y.npy")
    r = tpusim.net(d / "model.json", x, check=True)
    np.testing.assert_array_equal(r.output, want)
    assert r.output.dtype == want.dtype
    model = tpusim.load_model(str(d / "model.json"))
    assert len(r.layers) == len(model.layers)
    assert [l["name"] for l in r.layers] == [l["name"] for l in model.layers]
    on_chip = [l for l in r.layers if l["program"] is not None]
    assert sum(l["cycles"] for l in on_chip) == r.total["cycles"]
    r2 = tpusim.net(model, x)
    np.testing.assert_array_equal(r2.output, want)


def test_net_stats_match_cli(source_dir, tpu_sim, tmp_path):
    d = source_dir / "programs" / "nets" / "digits_mlp"
    x, y = np.load(d / "test_x.npy")[:50], np.load(d / "test_y.npy")[:50]
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    r = tpusim.net(d / "model.json", x, labels=y)
    cli(tpu_sim, "net", d / "model.json", "--input", tmp_path / "x.npy", "--labels", tmp_path / "y.npy",
        "--stats", tmp_path / "s.json", "--out", tmp_path / "o.npy")
    want = json.loads((tmp_path / "s.json").read_text())
    np.testing.assert_array_equal(r.output, np.load(tmp_path / "o.npy"))
    for key in ("network", "layers", "programs", "total", "accuracy", "batch", "array_n"):
        assert r.stats[key] == want[key], key
    assert r.accuracy == want["accuracy"]["accuracy"]


def test_net_errors(source_dir, tmp_path):
    d = source_dir / "programs" / "nets" / "digits_mlp"
    with pytest.raises(tpusim.InputError, match="expected a batch of inputs of shape"):
        tpusim.net(d / "model.json", np.zeros((2, 3), np.int8))
    with pytest.raises(tpusim.InputError, match="int8 .quantized. or float"):
        tpusim.net(d / "model.json", np.zeros((2, 64), np.int32))
    with pytest.raises(tpusim.InputError, match="missing.json"):
        tpusim.net(tmp_path / "missing.json", np.zeros((2, 64), np.int8))
    with pytest.raises(tpusim.InputError, match="labels"):
        tpusim.net(d / "model.json", np.zeros((2, 64), np.int8), labels=[1, 2, 3])


# ---- the GIL ----------------------------------------------------------------------------------

def test_gil_released_while_simulating():
    """Another Python thread runs while a simulation is under way: it could not
    if the GIL were held for the whole call."""
    a, b = rand_int8(384, 256), rand_int8(256, 256)
    done = threading.Event()
    result = {}

    def simulate():
        t0 = time.perf_counter()
        result["c"] = tpusim.gemm(a, b, detail="detailed").c
        result["seconds"] = time.perf_counter() - t0
        done.set()

    ticks = 0
    worker = threading.Thread(target=simulate)
    worker.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    worker.join()
    np.testing.assert_array_equal(result["c"], a.astype(np.int32) @ b.astype(np.int32))
    if result["seconds"] > 0.05:  # long enough to tell
        assert ticks >= 5, (ticks, result["seconds"])


def test_two_threads_simulate_correctly(source_dir):
    d = source_dir / "programs" / "nets" / "digits_cnn"
    x = np.load(d / "test_x.npy")[:16]
    want = tpusim.net(d / "model.json", x).output
    pairs = [(rand_int8(70, 50), rand_int8(50, 30)) for _ in range(4)]
    results, errors = {}, []

    def work(i):
        try:
            if i % 2:
                results[i] = ("net", tpusim.net(d / "model.json", x).output)
            else:
                a, b = pairs[i]
                results[i] = ("gemm", tpusim.gemm(a, b).c)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i, (kind, out) in results.items():
        if kind == "net":
            np.testing.assert_array_equal(out, want)
        else:
            a, b = pairs[i]
            np.testing.assert_array_equal(out, a.astype(np.int32) @ b.astype(np.int32))


def test_run_workload_kinds(source_dir):
    cfg = tpusim.Config()
    g = tpusim.run_workload(cfg, {"kind": "gemm", "m": 20, "k": 20, "n": 20, "seed": 3})
    assert g["m"] == 20 and g["cycles"] > 0 and "stall_cycles.raw_hazard" in g
    p = tpusim.run_workload(cfg, {"kind": "run", "program": "programs/one_tile.s",
                                  "hostmem": "programs/data/one_tile/host.npy",
                                  "weights": "programs/data/one_tile/weights.npy"},
                            base_dir=str(source_dir))
    assert p["cycles"] == tpusim.run(tpusim.assemble_file(source_dir / "programs/one_tile.s"),
                                     np.load(source_dir / "programs/data/one_tile/host.npy"),
                                     np.load(source_dir / "programs/data/one_tile/weights.npy")).cycles
    with pytest.raises(tpusim.InputError, match="unknown kind"):
        tpusim.run_workload(cfg, {"kind": "conv"})
