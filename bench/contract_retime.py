"""Re-times a tpuv1 program (RW, MMC*, ACT, RHM, WHM, controller ops) under
today's contract or the revised one (R5 load, R6 ACT latency 4, R4 ACC half
banks). A sketch for an estimate, checked against today's model's trace
(docs/microarchitecture.md, "Revised timing contract", R10); no tests of its own.

    /usr/bin/python3 bench/contract_retime.py PROGRAM.s [SPLIT]

PROGRAM.s is the numeric assembly `tpu-sim net MODEL --preset tpuv1 --emit-asm`
writes for one of bench/tpuv1_apps.py's models (N = 256 is assumed); it prints
the total cycles today and under each revised variant."""
import re, sys
N, Lh, Bh, Lw, Bw, F, ACC_ROWS = 256, 100, 20, 100, 49, 4, 4096
T = -(-N * N // Bw)
HALF = ACC_ROWS // 2
ACC_BANKS = 4

def parse(path):
    prog = []
    for l in open(path):
        l = l.split(';')[0].split('#')[0].strip()
        if not l: continue
        op, *rest = l.split(None, 1)
        args = [int(x) for x in rest[0].split(',')] if rest else []
        prog.append((op, args))
    return prog

def half_windows(s, acc, rows):
    """Cycles in which an accumulating MMC started at s reads each ACC half (column union)."""
    out = []
    for h in (0, 1):
        lo, hi = max(acc, h * HALF), min(acc + rows, (h + 1) * HALF)
        if lo < hi:
            i0, i1 = lo - acc, hi - 1 - acc
            out.append((h, s + i0 + N, s + i1 + 2 * N - 1))
    return out

def run(prog, revised, act_reads=None):
    A = 4 if revised else 2
    cmap = (0, 0)
    inflight = []  # (unit, reads, writes, d)
    c = -1
    host_free = 0       # host DMA may issue at >= host_free
    arr_free = 0        # array accepts at >= arr_free
    act_free = 0        # act unit accepts at >= act_free
    act_last_write = -1
    rw_d = []           # completion of each RW
    pops = []           # load start per switch
    switch_s = []       # start of each switch MMC
    last_row_tile = {}  # tile index -> last row read cycle
    cur_tile = -1
    mmcs = []           # (s, acc, rows) of accumulating MMCs
    rhms = []; actw = []
    acts = []
    last_d = 0
    last_rw_d = 0
    def pop(k):
        free = 0
        if k >= 1: free = switch_s[k - 1]
        if k >= 2 and (k - 2) in last_row_tile:
            free = max(free, last_row_tile[k - 2] + (N if revised else N + 1))
        return max(rw_d[k] + 1, free)
    for pc, (op, a) in enumerate(prog):
        base = op.split('.')[0]; fl = op.split('.')[1] if '.' in op else ''
        c += 1
        reads, writes, unit = [], [], None
        if base == 'RHM': unit = 'host'; writes = [('ub', a[1], a[1] + a[2])]; reads = [('h', a[0], a[0] + a[2])]
        elif base == 'WHM': unit = 'host'; reads = [('ub', a[0], a[0] + a[2])]; writes = [('h', a[1], a[1] + a[2])]
        elif base == 'MMC':
            unit = 'arr'; writes = [('acc', a[1], a[1] + a[2])]
            reads = [('ub', a[0], a[0] + (cmap[0] * cmap[1] if 'C' in fl else a[2]))]
        elif base == 'ACT': unit = 'act'; reads = [('acc', a[0], a[0] + a[2])]; writes = [('ub', a[1], a[1] + a[2])]
        elif base == 'CMAP': cmap = (a[0], a[1])
        elif base == 'RW': unit = 'w'
        # hazards
        def overlap(x, y): return x[0] == y[0] and x[1] < y[2] and y[1] < x[2]
        for (u, r2, w2, d2) in inflight:
            if callable(d2): d2 = d2()
            if u == unit or d2 < c: continue
            if any(overlap(x, y) for x in writes for y in r2 + w2) or any(overlap(x, y) for x in reads for y in w2):
                c = max(c, d2 + 1)
        if base == 'HLT':
            c = max(c, max(((d() if callable(d) else d) for *_, d in inflight), default=0) + 1)
            run.mmcs = mmcs; run.acts = acts; run.rhms = rhms; run.actw = actw
            return c + 1
        if unit == 'host':
            c = max(c, host_free)
            R = a[2]; b = 4 * N if (base == 'WHM' and 'A' in fl) else N
            d = c + Lh + -(-R * b // Bh); host_free = d
            if base == 'RHM': rhms.append((pc, c + 1, d, a[1], R))
        elif unit == 'w':
            k = len(rw_d)
            if k >= F:  # FIFO-full: tile k-F must have been popped
                c = max(c, pop(k - F) + 1)
            s = c + 1
            d = max(s + Lw, last_rw_d + 1) + T - 1; last_rw_d = d; rw_d.append(d)
        elif unit == 'arr':
            c = max(c, arr_free)
            s = c + 1
            if 'S' in fl:
                k = len(switch_s)
                L = pop(k)
                s = max(s, L + N + (2 if revised else 1))
                switch_s.append(s); cur_tile = k
            rows = a[2]
            last_row_tile[cur_tile] = s + rows - 1
            arr_free = s + rows - 1
            d = s + rows + 2 * N - 1
            if 'O' not in fl: mmcs.append((s, a[1], rows))
        elif unit == 'act':
            c = max(c, act_free() if callable(act_free) else act_free)
            s = c + 1; rows = a[2]; acc0 = a[0]
            rec = {}
            def resolve(rec=rec, s=s, rows=rows, acc0=acc0, pc=pc):
                if 'last' not in rec:
                    if revised and act_reads == 'rows':
                        # whole-row RMW at e = s + i + 2N - 1 in bank (acc + i) mod ACC_BANKS
                        t = s; i = 0
                        act_mm = [(ms, macc, mrows) for (ms, macc, mrows) in mmcs if ms + mrows + 2 * N > s]
                        while i < rows:
                            b = (acc0 + i) % ACC_BANKS
                            hit = any(ms + 2 * N - 1 <= t <= ms + mrows + 2 * N - 2 and (macc + t - ms - 2 * N + 1) % ACC_BANKS == b
                                      for (ms, macc, mrows) in act_mm)
                            if hit: run.refused += 1; t += 1; continue
                            t += 1; i += 1
                        rec['last'] = t - 1
                    elif revised and act_reads is not None:
                        wins = [w for (ms, macc, mrows) in mmcs for w in half_windows(ms, macc, mrows)]
                        t = s; i = 0
                        while i < rows:
                            h = (acc0 + i) // HALF
                            blocked = [e for (hh, b0, e) in wins if hh == h and b0 <= t <= e]
                            if blocked: t = max(blocked) + 1; continue
                            t += 1; i += 1
                        rec['last'] = t - 1
                    else:
                        rec['last'] = s + rows - 1
                    rec['d'] = rec['last'] + A
                    acts.append((pc, s, rec['d']))
                return rec
            actw.append((resolve, a[1], rows))
            act_free = lambda r=resolve: r()['last']
            d = lambda r=resolve: r()['d']

        else:
            d = c
        if unit: inflight.append((unit, reads, writes, d))
        inflight = [x for x in inflight if callable(x[3]) or x[3] >= c]
    return None

prog = parse(sys.argv[1])
today = run(prog, False); today_acts = run.acts
print("today", today)
print("revised, no ACC conflicts", run(prog, True))
run.refused = 0
print("revised, row-interleaved ACC banks of de-skewed rows", run(prog, True, 'rows'), "ACT rows refused", run.refused)
tot = run(prog, True, True)
print("revised, per-column half banks (skewed RMW)", tot)
ta = {pc: d for pc, s, d in today_acts}
late = [(pc, d - ta[pc]) for (pc, s, d) in run.acts]
print("ACTs later than today by more than 10 cycles:", sum(1 for _, x in late if x > 10), "max", max(x for _, x in late))

if len(sys.argv) > 2:
    split = int(sys.argv[2])  # ACC rows from `split` on move to the upper half
    def remap(op, a):
        base = op.split('.')[0]
        if base == 'MMC' and a[1] >= split: a = [a[0], a[1] - split + HALF, a[2]]
        if base == 'ACT' and a[0] >= split: a = [a[0] - split + HALF, a[1], a[2]]
        return (op, a)
    p2 = [remap(op, a) for op, a in prog]
    print("ACC rows from", split, "moved to the upper half: today", run(p2, False), "revised", run(p2, True, True))

# UB write collisions: each RHM row r lands at s + Lh + ceil((r+1)N/Bh) - 1 and
# is written then unless an ACT writes the same bank in that cycle (ACT row i
# written at s + i + 4 with no refused reads).
UB_BANKS = 32
for name, prog_ in (("revised", prog),):
    run.refused = 0
    run(prog_, True, 'rows')
    writes = {}
    for resolve, ub, rows in run.actw:
        rec = resolve(); last = rec['last']; s0 = last - rows + 1
        for i in range(rows): writes.setdefault(s0 + i + 4, set()).add((ub + i) % UB_BANKS)
    hit_rows = 0; hit_last = 0
    for pc, s0, d, ub, R in run.rhms:
        for r in range(R):
            l = s0 + Lh + -(-(r + 1) * N // Bh) - 1
            if (ub + r) % UB_BANKS in writes.get(l, ()):
                hit_rows += 1; hit_last += (r == R - 1)
    print(name, "RHM rows landing on an ACT-written bank:", hit_rows, "of which last rows:", hit_last, "of", len(run.rhms), "RHMs")
