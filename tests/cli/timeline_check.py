#!/usr/bin/python3
"""--timeline against --trace, cycle for cycle.

  timeline_check.py BIN_DIR SOURCE_DIR

For every example program (programs/*.s with its data in programs/data/NAME/)
and the engines systemc and rtl (small4/small8 as the program's .array asks;
rtl only where it is built), runs `tpu-sim run --trace --timeline T.json` and
checks that T.json is valid Chrome trace JSON whose slices are exactly the
trace's: per instruction an issue slice on the controller track and a unit
slice from start to completion, per stall line a slice named by its cause,
with times at the configured clock (cycle t at t / clock_mhz microseconds).
On the SystemC engine the run also writes a waveform, and the timeline's
weight FIFO occupancy counter must equal the model's own FIFO count
(systolic_array.fifo_count) in every cycle. Also: a timeline into a missing directory fails with one line and leaves
nothing, and a faulting program's timeline ends at the fault's cycle.
"""
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from waveform_check import Vcd

TRACE = re.compile(r"^pc\s+(\d+)\s+(.+?)\s+issue\s+(\d+)\s+start\s+(\S+)\s+complete\s+(\S+)$")
STALL = re.compile(r"^\s+stall (\S+)\s+cycles (\d+)\.\.(\d+) \((\d+)\)$")
CONTROLLER_ONLY = {"NOP", "SETQ", "CMAP", "CSTR", "CTAP", "CWIN", "VSRC", "VSCL", "NGEO", "NCON", "SYNC",
                   "HLT"}


def cycles_of(event, clock_mhz):
    first = event["ts"] * clock_mhz
    count = event["dur"] * clock_mhz
    assert abs(first - round(first)) < 1e-6 and abs(count - round(count)) < 1e-6, event
    return round(first), round(first) + round(count) - 1


def counter_steps(events, title):
    """(cycle, value) samples of the counter `title`, in time order."""
    out = []
    for e in events:
        if e["ph"] == "C" and e["name"] == title:
            (value,) = e["args"].values()
            out.append((e["ts"], value))
    return sorted(out)


def check_fifo(events, clock, vcd_path, cycles):
    """The timeline's weight FIFO occupancy against the model's own FIFO, the
    systolic array's fifo_count in the detailed model's waveform (100 ps
    units, 1 ns cycles), in every cycle of the run, 0 .. cycles - 1."""
    vcd = Vcd(str(vcd_path))
    (ident,) = [i for name, i, _, _ in vcd.vars if name.endswith("systolic_array.fifo_count[31:0]")]
    dumped = [(t // 10, int(v, 2)) for t, v in vcd.changes[ident]]
    steps = [(round(ts * clock), v) for ts, v in counter_steps(events, "weight FIFO occupancy")]

    def value_at(samples, c):
        v = 0
        for t, x in samples:
            if t > c:
                break
            v = x
        return v

    changes = sorted({t for t, _ in dumped} | {t for t, _ in steps})
    for c in [0] + changes:
        if c <= cycles - 1:
            assert value_at(steps, c) == value_at(dumped, c), (c, steps, dumped)
    return max([v for _, v in steps] + [0])


def check(tpu_sim, args, tmp, engine, vcd=False):
    t = tmp / "t.json"
    wave = ["--vcd", str(tmp / "w.vcd")] if vcd else []
    r = subprocess.run([tpu_sim, "run", *args, "--trace", "--timeline", str(t), "--engine", engine, *wave,
                        "--stats", str(tmp / "s.json")], capture_output=True, text=True)
    assert r.returncode in (0, 4), r.stderr
    instrs, stalls = [], []
    for line in r.stdout.splitlines():
        if m := TRACE.match(line):
            done = None if m[5] == "-" else int(m[5])
            start = None if m[4] == "-" else int(m[4])  # "-": an MMC.S still waiting for weights
            instrs.append((int(m[1]), m[2].strip(), int(m[3]), start, done))
        elif m := STALL.match(line):
            stalls.append((m[1], int(m[2]), int(m[3])))
            assert int(m[4]) == int(m[3]) - int(m[2]) + 1, line
    trace = json.loads(t.read_text())
    clock = trace["otherData"]["clock_mhz"]
    events = trace["traceEvents"]
    assert all(e["ph"] in ("M", "X", "C") for e in events)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    got_issue, got_unit, got_stall, got_wait = [], [], [], []
    for e in events:
        if e["ph"] != "X":
            continue
        first, last = cycles_of(e, clock)
        track = names[(e["pid"], e["tid"])]
        if e["name"].startswith("issue "):
            assert track == "controller" and first == last
            got_issue.append((e["args"]["pc"], e["name"][6:], first))
        elif e["name"].startswith("stall: "):
            assert track == "controller"
            got_stall.append((e["name"][7:], first, last))
        elif e["name"].startswith("wait for weights: "):
            assert track.startswith("systolic_array"), track
            got_wait.append((e["args"]["pc"], e["name"][18:], first, last))
        else:
            assert track != "controller", e
            got_unit.append((e["args"]["pc"], e["name"], first, last))
            mnemonic, _, operands = e["name"].partition(" ")
            if mnemonic != "RW":  # RHM, WHM, MMC, ACT, POOL: rows are the third operand
                assert e["args"]["rows"] == int(operands.split(",")[2]), e
    assert got_issue == [(pc, text, issue) for pc, text, issue, _, _ in instrs], (got_issue, instrs)
    assert got_stall == stalls, (got_stall, stalls)
    # Unit slices: start .. completion; cut by a fault: start .. the run's last cycle.
    end = max([last for _, _, _, last in got_unit] + [0])
    want = []
    for pc, text, issue, start, done in instrs:
        if text.split()[0].split(".")[0] in CONTROLLER_ONLY:
            continue
        if done is None:
            continue  # checked below
        want.append((pc, text, start, done))
    assert [u for u in got_unit if any(u == w for w in want)] == want, (got_unit, want)
    # An MMC.S waiting in the matrix unit for its weights: issue + 1 .. start - 1
    # (up to the run's last cycle if it never started).
    run_end = json.loads((tmp / "s.json").read_text())["cycles"] - 1
    want_wait = [(pc, text, issue + 1, run_end if start is None else start - 1)
                 for pc, text, issue, start, _ in instrs
                 if text.startswith("MMC") and (start is None or start > issue + 1) and issue + 1 <= run_end]
    assert got_wait == want_wait, (got_wait, want_wait)
    check.waits = getattr(check, "waits", 0) + len(got_wait)
    # Slices on one track never overlap (Chrome traces need nesting).
    by_track = {}
    for e in events:
        if e["ph"] == "X" and not e["name"].startswith(("issue ", "stall: ")):
            by_track.setdefault((e["pid"], e["tid"]), []).append(cycles_of(e, clock))
    for spans in by_track.values():
        spans.sort()
        for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
            assert a1 < b0, spans
    if vcd:
        cycles = json.loads((tmp / "s.json").read_text())["cycles"]
        check.fifo_peak = max(getattr(check, "fifo_peak", 0), check_fifo(events, clock, tmp / "w.vcd", cycles))
    return len(instrs), len(stalls), end


def main():
    bin_dir, src = Path(sys.argv[1]), Path(sys.argv[2])
    tpu_sim, tpu_as = str(bin_dir / "tpu-sim"), str(bin_dir / "tpu-as")
    built = subprocess.run([tpu_sim, "run", "--help"], capture_output=True, text=True).stdout
    checked = 0
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for prog in sorted((src / "programs").glob("*.s")):
            data = src / "programs" / "data" / prog.stem
            if not (data / "host.npy").exists():
                continue
            obj = tmp / (prog.stem + ".tpu")
            subprocess.run([tpu_as, str(prog), "-o", str(obj)], check=True)
            args = [str(obj), "--hostmem", str(data / "host.npy"), "--weights", str(data / "weights.npy")]
            n = re.search(r"^\s*\.array\s+(\d+)", prog.read_text(), re.M)
            preset = {"4": "small4", "8": "small8"}.get(n[1] if n else "", None)
            engines = ["systemc"]
            rtl = subprocess.run([tpu_sim, "run", *args, "--engine", "rtl", "--preset", preset or "x"],
                                 capture_output=True, text=True) if preset else None
            if rtl is not None and rtl.returncode == 0:
                engines.append("rtl")
            for engine in engines:
                extra = ["--preset", preset] if preset else []
                i, s, _ = check(tpu_sim, args + extra, tmp, engine, vcd=engine == "systemc")
                print(f"{prog.stem} ({engine}): {i} instructions, {s} stall runs: slices match the trace")
                checked += 1
            # A cycle limit in the middle of the run: the timeline ends there.
            i, s, end = check(tpu_sim, args + ["--max-cycles", "150"], tmp, "systemc")
            assert end <= 150, end
        # Written whole or not at all: a missing directory is one line, no file.
        bad = tmp / "missing" / "t.json"
        r = subprocess.run([tpu_sim, "run", str(tmp / "mlp2.tpu"), "--hostmem",
                            str(src / "programs/data/mlp2/host.npy"), "--weights",
                            str(src / "programs/data/mlp2/weights.npy"), "--timeline", str(bad)],
                           capture_output=True, text=True)
        assert r.returncode == 3 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not bad.exists() and not bad.parent.exists()
    assert checked >= 5, checked
    assert check.fifo_peak >= 2, "no example program queues two tiles in the weight FIFO"
    assert check.waits >= 1, "no example program has an MMC.S wait for its weights"
    print(f"{checked} timelines match their traces")


if __name__ == "__main__":
    main()
