#!/usr/bin/env python3
"""Checks of tpu-sim's waveforms, for tests/cli/cli_test.sh (case sim_rtl_waveform).

  waveform_check.py rtl VCD GTKW STATS    the RTL's VCD is well formed, has tpu_core's
                                          ports and units, the .gtkw lists only
                                          signals it declares, and it agrees with the
                                          run's statistics (--stats)
  waveform_check.py agree SYSTEMC_VCD RTL_VCD
                                          the SystemC model's waveform and the RTL's
                                          show the same controller and unit activity
                                          in every cycle
  waveform_check.py same A.vcd B.vcd      the two files hold the same signals with the
                                          same values at all times (e.g. a VCD and
                                          fst2vcd of the FST made from it)
  waveform_check.py fault VCD             the RTL's waveform of a run that faulted ends
                                          with fault_o rising
Exits 1 with a message on the first failed check.
"""
import json
import re
import sys


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


class Vcd:
    """A parsed VCD: declarations and every value change, checked for form."""

    def __init__(self, path):
        self.path = path
        self.vars = []          # (full name, id, width, type)
        self.width = {}         # id -> width
        self.changes = {}       # id -> [(time, value as a full-width string)]
        self.timescale = None
        self.times = []
        with open(path) as f:
            toks = f.read().split()
        i, n, scopes = 0, len(toks), []

        def upto_end(i, what):
            try:
                return toks.index("$end", i)
            except ValueError:
                fail(f"{path}: {what} without $end")

        while True:
            if i >= n:
                fail(f"{path}: no $enddefinitions")
            tk = toks[i]
            if tk == "$scope":
                scopes.append(toks[i + 2])
                i = upto_end(i, "$scope") + 1
            elif tk == "$upscope":
                if not scopes:
                    fail(f"{path}: $upscope without $scope")
                scopes.pop()
                i = upto_end(i, "$upscope") + 1
            elif tk == "$var":
                j = upto_end(i, "$var")
                typ, width, code, name = toks[i + 1], int(toks[i + 2]), toks[i + 3], toks[i + 4]
                full = ".".join(scopes + [name]) + "".join(toks[i + 5:j])
                if code in self.width and self.width[code] != width:
                    fail(f"{path}: {full}: alias of a {self.width[code]}-bit signal")
                self.width[code] = width
                self.vars.append((full, code, width, typ))
                i = j + 1
            elif tk == "$timescale":
                j = upto_end(i, "$timescale")
                self.timescale = "".join(toks[i + 1:j])
                i = j + 1
            elif tk == "$enddefinitions":
                i = upto_end(i, "$enddefinitions") + 1
                break
            elif tk.startswith("$"):
                i = upto_end(i, tk) + 1
            else:
                fail(f"{path}: unexpected '{tk}' in the header")
        if scopes:
            fail(f"{path}: unbalanced $scope")
        t = None
        while i < n:
            tk = toks[i]
            c = tk[0]
            if tk == "$comment":
                i = upto_end(i, "$comment") + 1
                continue
            if c == "$":
                i += 1
                continue
            if c == "#":
                nt = int(tk[1:])
                if t is not None and nt <= t:
                    fail(f"{path}: time {nt} after {t}")
                t = nt
                self.times.append(t)
                i += 1
                continue
            if c in "bB":
                bits, code = tk[1:].lower(), toks[i + 1]
                i += 2
            elif c in "01xzXZ":
                bits, code = c.lower(), tk[1:]
                i += 1
            else:
                fail(f"{path}: unexpected '{tk}'")
            if code not in self.width:
                fail(f"{path}: a change of undeclared '{code}'")
            w = self.width[code]
            if not bits or len(bits) > w or set(bits) - set("01xz"):
                fail(f"{path}: value '{tk}' for a {w}-bit signal")
            bits = bits.rjust(w, "0" if bits[0] == "1" else bits[0])
            # SystemC dumps the initial values before the first time stamp.
            self.changes.setdefault(code, []).append((0 if t is None else t, bits))

    def names(self):
        return {v[0] for v in self.vars}

    def find(self, suffix):
        """The id of the one declared name ending in '.' + suffix (or equal to it)."""
        def base(name):  # without a vector's range
            return re.sub(r"\[\d+:\d+\]$", "", name)
        hits = [v for v in self.vars if base(v[0]) == suffix or base(v[0]).endswith("." + suffix)]
        ids = {v[1] for v in hits}
        if len(ids) != 1:
            fail(f"{self.path}: {len(hits)} signals named *{suffix}: {[v[0] for v in hits]}")
        return hits[0][1]

    def value_at(self, code, time):
        """The value of `code` at `time` (after all changes at that time), as an int."""
        v = None
        for t, bits in self.changes.get(code, []):
            if t > time:
                break
            v = bits
        if v is None:
            fail(f"{self.path}: no value for '{code}' at time {time}")
        return int(v.replace("x", "0").replace("z", "0"), 2)

    def rises(self, code):
        out, prev = [], 0
        for t, bits in self.changes.get(code, []):
            v = int(bits.replace("x", "0").replace("z", "0"), 2)
            if v and not prev:
                out.append(t)
            prev = v
        return out

    def history(self, code):
        """The changes of `code`, keeping only those that change the value."""
        out = []
        for t, bits in self.changes.get(code, []):
            if out and out[-1][0] == t:
                out[-1] = (t, bits)
            elif not out or out[-1][1] != bits:
                out.append((t, bits))
        return out


UNITS = ["controller", "host_dma", "weight_dma", "systolic_array", "activation_unit"]
PORTS = ["clk_i", "rst_ni", "fetch_pc_o", "fetch_instr_i", "issue_o", "stall_o", "halted_o",
         "fault_o", "host_rd_valid_o", "host_wr_valid_o", "wmem_rd_valid_o", "row_valid_o",
         "busy_o"]


def check_rtl(vcd_path, gtkw_path, stats_path):
    v = Vcd(vcd_path)
    stats = json.load(open(stats_path))
    if v.timescale != "100ps":
        fail(f"timescale {v.timescale}, want 100ps (the SystemC waveform's)")
    names = v.names()
    for p in PORTS:
        if not any(n.split("[")[0].endswith("tpu_core." + p) for n in names):
            fail(f"port {p} not in the VCD")
    for u in UNITS:
        if sum(1 for n in names if f".tpu_core.{u}." in n) < 3:
            fail(f"unit {u}: fewer than 3 signals in the VCD")
    # Every cycle has a rising edge at 10t and a falling edge at 10t+5.
    cycles = stats["cycles"]
    clk = v.find("tpu_core.clk_i")
    for t in range(cycles):
        if v.value_at(clk, 10 * t) != 1 or v.value_at(clk, 10 * t + 5) != 0:
            fail(f"clk_i is not high at {10 * t} and low at {10 * t + 5}")
    if v.times[-1] != 10 * cycles:
        fail(f"the waveform ends at {v.times[-1]}, want {10 * cycles} ({cycles} cycles)")
    halted = v.find("tpu_core.halted_o")
    if v.rises(halted) != [10 * cycles]:
        fail(f"halted_o rises at {v.rises(halted)}, want [{10 * cycles}]")
    issue = v.find("tpu_core.issue_o")
    issued = sum(v.value_at(issue, 10 * t) for t in range(cycles))
    if issued != stats["instructions"]:
        fail(f"issue_o is high in {issued} cycles, but {stats['instructions']} instructions issued")
    stall = v.find("tpu_core.stall_o")
    stalled = sum(v.value_at(stall, 10 * t) for t in range(cycles))
    if stalled != sum(stats["stall_cycles"].values()):
        fail(f"stall_o is high in {stalled} cycles, the statistics say {stats['stall_cycles']}")
    row_valid = v.find("tpu_core.row_valid_o")
    active = sum(v.value_at(row_valid, 10 * t) for t in range(cycles))
    if active != stats["array_active_cycles"]:
        fail(f"row_valid_o is high in {active} cycles, want {stats['array_active_cycles']}")

    gtkw = open(gtkw_path).read().splitlines()
    listed = [l for l in gtkw if l and l[0] not in "[@-*"]
    missing = [s for s in listed if s not in names]
    if missing:
        fail(f"signals in the .gtkw but not in the VCD: {missing[:5]}")
    groups = [l[1:] for l in gtkw if l.startswith("-")]
    for u in UNITS:
        if u not in groups:
            fail(f"no group {u} in the .gtkw")
    if len(listed) < 50:
        fail(f"only {len(listed)} signals in the .gtkw")
    print(f"ok: {len(v.vars)} signals over {cycles} cycles, {len(listed)} in the .gtkw")


# (SystemC waveform signal, RTL waveform signal), compared as 0 / not 0.
PAIRS = [("controller.issue", "tpu_core.issue_o"),
         ("controller.stall", "tpu_core.stall_o"),
         ("host_dma.busy", "tpu_core.host_dma.busy_o"),
         ("weight_dma.busy", "tpu_core.weight_dma.busy_o"),
         ("activation_unit.busy", "tpu_core.activation_unit.busy_o"),
         ("systolic_array.row_valid", "tpu_core.row_valid_o"),
         ("systolic_array.acc_write", "tpu_core.acc_write_o")]


def check_agree(systemc_path, rtl_path):
    s, r = Vcd(systemc_path), Vcd(rtl_path)
    # The SystemC model stops in the HLT's cycle before its waveform records
    # that cycle: compare every cycle before its last time stamp.
    last = s.times[-1] // 10
    for sc_name, rtl_name in PAIRS:
        sc, rc = s.find(sc_name), r.find(rtl_name)
        for t in range(last):
            a, b = s.value_at(sc, 10 * t) != 0, r.value_at(rc, 10 * t) != 0
            if a != b:
                fail(f"cycle {t}: SystemC {sc_name} = {int(a)} but RTL {rtl_name} = {int(b)}")
        if not any(s.value_at(sc, 10 * t) for t in range(last)):
            fail(f"{sc_name} is never high: the comparison shows nothing")
    print(f"ok: {len(PAIRS)} signals agree in cycles 0..{last - 1}")


def check_same(a_path, b_path):
    a, b = Vcd(a_path), Vcd(b_path)
    an = {v[0]: v[1] for v in a.vars}
    bn = {v[0]: v[1] for v in b.vars}
    if set(an) != set(bn):
        fail(f"declared signals differ: {sorted(set(an) ^ set(bn))[:5]}")
    if a.timescale != b.timescale:
        fail(f"timescales differ: {a.timescale} and {b.timescale}")
    for name, code in an.items():
        if a.history(code) != b.history(bn[name]):
            fail(f"{name}: the values differ")
    print(f"ok: {len(an)} signals identical")


def check_fault(vcd_path):
    v = Vcd(vcd_path)
    fault, halted = v.find("tpu_core.fault_o"), v.find("tpu_core.halted_o")
    if v.rises(fault) != [v.times[-1]] or v.rises(halted):
        fail(f"fault_o rises at {v.rises(fault)}, halted_o at {v.rises(halted)}: want fault_o "
             f"once, at the end ({v.times[-1]}), and halted_o never")
    print(f"ok: fault_o rises at {v.times[-1]}")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"rtl": check_rtl, "agree": check_agree, "same": check_same, "fault": check_fault}[cmd](*args)
