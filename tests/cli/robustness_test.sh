#!/usr/bin/env bash
# Robustness of the command-line tools: equal runs give byte-identical
# outputs, outputs are written whole or not at all (after a fault, an error or
# Ctrl-C), and inputs the fuzzers (tests/fuzz) found crashes with stay fixed.
#   robustness_test.sh CASE BIN_DIR SOURCE_DIR
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"
python=/usr/bin/python3  # Debian's python3-numpy

# The files of folder $1, one per line, hidden ones included.
listing() { (cd "$1" && find . -type f | sort); }

case "$case_name" in
  determinism)  # the same program, inputs and config give identical bytes on every run
    data=$src/programs/data/mlp2
    "$bin/tpu-as" "$src/programs/mlp2.s" -o "$tmp/p.tpu"
    "$bin/tpu-as" "$src/programs/mlp2.s" -o "$tmp/p2.tpu"
    cmp "$tmp/p.tpu" "$tmp/p2.tpu" || fail "tpu-as output differs between runs"
    # (The listing names the program file, so both runs read the same one.)
    "$bin/tpu-dis" --encoding "$tmp/p.tpu" -o "$tmp/p.lst"
    "$bin/tpu-dis" --encoding "$tmp/p.tpu" -o "$tmp/p2.lst"
    cmp "$tmp/p.lst" "$tmp/p2.lst" || fail "tpu-dis output differs between runs"
    "$python" -c "
import numpy as np
r = np.random.default_rng(7)
np.save('$tmp/a.npy', r.integers(-128, 128, (13, 21), dtype=np.int8))
np.save('$tmp/b.npy', r.integers(-128, 128, (21, 9), dtype=np.int8))"
    for run in 1 2; do
      mkdir "$tmp/run$run"
      # Every output of tpu-sim run, with the waveform, and of tpu-sim gemm, written to the
      # same paths each time (the .gtkw names the VCD by its absolute path).
      expect_status 0 "$bin/tpu-sim" run "$tmp/p.tpu" --hostmem "$data/host.npy" \
        --weights "$data/weights.npy" --out "$tmp/o.npy" --stats "$tmp/s.json" \
        --vcd "$tmp/w.vcd" --trace
      mv "$tmp/out" "$tmp/run$run/run.stdout"
      expect_status 0 "$bin/tpu-sim" gemm --a "$tmp/a.npy" --b "$tmp/b.npy" --out "$tmp/c.npy" \
        --stats "$tmp/g.json" --emit-asm "$tmp/g.s" --vcd "$tmp/gw.vcd" --trace \
        --requant 77,12,-5 --act tanh --array 4
      mv "$tmp/out" "$tmp/run$run/gemm.stdout"
      mv "$tmp/o.npy" "$tmp/s.json" "$tmp/w.vcd" "$tmp/w.gtkw" "$tmp/c.npy" "$tmp/g.json" \
        "$tmp/g.s" "$tmp/gw.vcd" "$tmp/gw.gtkw" "$tmp/run$run/"
      # A new second, so that a $date with the wall-clock time would show as a difference.
      [ "$run" -eq 2 ] || sleep 1.1
    done
    [ "$(listing "$tmp/run1")" = "$(listing "$tmp/run2")" ] || fail "different files"
    [ "$(listing "$tmp/run1" | wc -l)" -eq 11 ] || fail "missing outputs: $(listing "$tmp/run1")"
    for f in "$tmp"/run1/*; do
      cmp "$f" "$tmp/run2/$(basename "$f")" || fail "$(basename "$f") differs between runs"
    done
    grep -qx '     (none: reproducible output)' "$tmp/run1/w.vcd" || fail "VCD \$date line"
    ;;
  atomic_outputs)  # an output file is written whole or not at all
    printf 'RHM 0, 0, 8\nWHM 0, 8, 8\nRHM 0, 16380, 8\nHLT\n' >"$tmp/f.s"
    "$bin/tpu-as" "$tmp/f.s" -o "$tmp/f.tpu"
    printf 'RHM 0, 0, 8\nWHM 0, 8, 8\nHLT\n' >"$tmp/ok.s"
    "$bin/tpu-as" "$tmp/ok.s" -o "$tmp/ok.tpu"
    echo "previous contents" >"$tmp/keep"
    # A fault: no --out, and an existing one is left as it was; the stats say why.
    cp "$tmp/keep" "$tmp/o.npy"
    expect_status 4 "$bin/tpu-sim" run "$tmp/f.tpu" --out "$tmp/o.npy" --stats "$tmp/s.json"
    cmp "$tmp/keep" "$tmp/o.npy" || fail "a faulting run changed --out"
    grep -q '"fault": "fault at pc 2 (RHM 0, 16380, 8), cycle' "$tmp/s.json" || fail "stats of a fault"
    # Outputs that cannot be written: exit 3, one line, nothing left behind.
    mkdir "$tmp/d"
    expect_status 3 "$bin/tpu-sim" run "$tmp/ok.tpu" --out "$tmp/missing/o.npy"
    grep -qx "tpu-sim: error: $tmp/missing/o.npy: cannot write: No such file or directory" \
      "$tmp/err" || { cat "$tmp/err"; fail "unwritable --out message"; }
    expect_status 3 "$bin/tpu-sim" run "$tmp/ok.tpu" --vcd "$tmp/missing/w.vcd"
    grep -qx "tpu-sim: error: $tmp/missing/w.vcd: cannot write: No such file or directory" \
      "$tmp/err" || { cat "$tmp/err"; fail "unwritable --vcd message"; }
    mkdir "$tmp/d/w.vcd" "$tmp/d/o.npy"
    expect_status 3 "$bin/tpu-sim" run "$tmp/ok.tpu" --vcd "$tmp/d/w.vcd"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || { cat "$tmp/err"; fail "VCD over a folder: not one line"; }
    expect_status 3 "$bin/tpu-sim" run "$tmp/ok.tpu" --out "$tmp/d/o.npy"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || { cat "$tmp/err"; fail "--out over a folder: not one line"; }
    [ "$(listing "$tmp/d")" = "" ] || fail "files left behind: $(listing "$tmp/d")"
    # Interrupted (Ctrl-C, or kill's SIGTERM) in the middle of a long run with a waveform:
    # neither --out nor the VCD, .gtkw or stats appear, an existing --out is left as it
    # was, and the temporary VCD is removed too (common/file_io.h, RemoveOnSignal).
    { for _ in $(seq 2000); do echo "RHM 0, 0, 16383"; done; echo "WHM 0, 0, 1"; echo HLT; } \
      >"$tmp/long.s"
    "$bin/tpu-as" "$tmp/long.s" -o "$tmp/long.tpu" --array 4
    for sig in INT TERM; do
      rm -rf "$tmp/i"
      mkdir "$tmp/i"
      cp "$tmp/keep" "$tmp/i/o.npy"
      set -m  # a job of its own, so that it does not ignore SIGINT as background jobs do
      "$bin/tpu-sim" run "$tmp/long.tpu" --out "$tmp/i/o.npy" --vcd "$tmp/i/w.vcd" \
        --stats "$tmp/i/s.json" >/dev/null 2>&1 &
      pid=$!
      set +m
      # Until the run is under way: SystemC has written the VCD header.
      for _ in $(seq 100); do
        [ -z "$(find "$tmp/i" -name '.w.*.tmp.vcd' -size +0)" ] || break
        sleep 0.1
      done
      [ -n "$(find "$tmp/i" -name '.w.*.tmp.vcd')" ] || fail "no temporary VCD while running"
      kill -0 "$pid" 2>/dev/null || fail "the long run ended early; nothing to interrupt"
      kill -"$sig" "$pid"
      status=0
      wait "$pid" || status=$?
      want=$((128 + $(kill -l "$sig")))
      [ "$status" -eq "$want" ] || fail "SIG$sig: the run exited $status, want $want"
      cmp "$tmp/keep" "$tmp/i/o.npy" || fail "SIG$sig: an interrupted run changed --out"
      [ "$(listing "$tmp/i")" = "./o.npy" ] ||
        fail "SIG$sig: an interrupted run left $(listing "$tmp/i" | tr '\n' ' ')"
    done
    ;;
  fault_outputs)  # a faulting or failing run: no --out, no partial file, no temporary file
    export LC_ALL=C  # the order of listing
    printf 'RHM 0, 0, 8\nWHM 0, 8, 8\nRHM 0, 16380, 8\nHLT\n' >"$tmp/f.s"
    "$bin/tpu-as" "$tmp/f.s" -o "$tmp/f.tpu"
    # Status 4 (README, "Outputs are whole or absent"): the statistics and the waveform,
    # which show the fault, are written whole; --out is not written at all.
    mkdir "$tmp/d"
    expect_status 4 "$bin/tpu-sim" run "$tmp/f.tpu" --out "$tmp/d/o.npy" --stats "$tmp/d/s.json" \
      --vcd "$tmp/d/w.vcd"
    [ "$(listing "$tmp/d" | tr '\n' ' ')" = "./s.json ./w.gtkw ./w.vcd " ] ||
      fail "a fault left: $(listing "$tmp/d" | tr '\n' ' ')"
    # Preset small8 has 16384 unified-buffer rows: RHM 0, 16380, 8 writes past the end.
    { grep -Eqx 'tpu-sim: fault at pc 2 \(RHM 0, 16380, 8\), cycle [0-9]+: .+' "$tmp/err" &&
      [ "$(wc -l <"$tmp/err")" -eq 1 ]; } || { cat "$tmp/err"; fail "fault message"; }
    "$python" -c "
import json
s = json.load(open('$tmp/d/s.json'))
assert s['halted'] is False and s['fault'].startswith('fault at pc 2 (RHM 0, 16380, 8)'), s"
    # The VCD is complete: its header closed, then value changes up to the fault's cycle
    # (a timestamp is '#' and the time in units of 100 ps, ten per cycle).
    grep -Eqx '\$enddefinitions +\$end' "$tmp/d/w.vcd" || fail "VCD header"
    cycle=$(sed -E 's/.*, cycle ([0-9]+):.*/\1/' "$tmp/err")
    last=$(grep -E '^#[0-9]+$' "$tmp/d/w.vcd" | tail -1 | tr -d '#')
    [ "$last" -ge $((cycle * 10)) ] || fail "VCD ends at #$last, before the fault at cycle $cycle"
    grep -qxF "[dumpfile] \"$tmp/d/w.vcd\"" "$tmp/d/w.gtkw" || fail ".gtkw names the VCD"
    # Status 3 before the run (a malformed input): nothing at all.
    mkdir "$tmp/e"
    printf 'not a numpy file' >"$tmp/bad.npy"
    expect_status 3 "$bin/tpu-sim" run "$tmp/f.tpu" --hostmem "$tmp/bad.npy" \
      --out "$tmp/e/o.npy" --stats "$tmp/e/s.json" --vcd "$tmp/e/w.vcd"
    [ "$(listing "$tmp/e")" = "" ] || fail "a bad input left: $(listing "$tmp/e")"
    # The assembler with errors (status 1) and the disassembler on a malformed program
    # (status 3) write nothing either.
    printf 'RHM 0, 0, 8\nBOGUS\n' >"$tmp/bad.s"
    expect_status 1 "$bin/tpu-as" "$tmp/bad.s" -o "$tmp/e/p.tpu"
    head -c 20 "$tmp/f.tpu" >"$tmp/short.tpu"
    expect_status 3 "$bin/tpu-dis" "$tmp/short.tpu" -o "$tmp/e/p.s"
    [ "$(listing "$tmp/e")" = "" ] || fail "tpu-as or tpu-dis left: $(listing "$tmp/e")"
    ;;
  fault_stats)  # at a cycle-limit fault, an MMC in flight counts the rows it read, not all of them
    # One MMC of 1000 rows on small8, stopped at cycle 50: the array read row i in cycle
    # s + i (docs/microarchitecture.md), so s .. 49 were read, 50 - s rows, 64 MACs each.
    printf 'RW 0\nMMC.SO 0, 0, 1000\nHLT\n' >"$tmp/m.s"
    "$bin/tpu-as" "$tmp/m.s" -o "$tmp/m.tpu"
    for run in "systemc detailed" "systemc fast" "rtl auto"; do
      read -r engine detail <<<"$run"
      expect_status 4 "$bin/tpu-sim" run "$tmp/m.tpu" --preset small8 --max-cycles 50 \
        --engine "$engine" --detail "$detail" --trace --stats "$tmp/s.json"
      start=$(sed -nE 's/^pc +1 +MMC.* start +([0-9]+) .*/\1/p' "$tmp/out")
      [ -n "$start" ] || { cat "$tmp/out"; fail "$run: no start cycle of the MMC in --trace"; }
      "$python" - "$tmp/s.json" "$start" "$run" <<'PY'
import json, sys
s, start, run = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
rows = 50 - start
want = {"cycles": 50, "array_active_cycles": rows, "macs": rows * 64}
got = {k: s[k] for k in want}
assert got == want, f"{run}: {got}, want {want}"
assert abs(s["utilization"] - rows * 64 / (50 * 64)) < 1e-12, (run, s["utilization"])
assert s["tpuv1"]["array_active_cycles"] == rows, (run, s["tpuv1"])
assert s["tpuv1"]["useful_macs"] + s["tpuv1"]["unused_macs"] == rows * 64, (run, s["tpuv1"])
PY
      grep -qxF "array active  $((50 - start)) cycles" "$tmp/out" || { cat "$tmp/out"; fail "$run: summary"; }
    done
    ;;
  fuzz_regressions)  # the inputs in tests/fuzz/regressions, through the command-line tools
    regs=$src/tests/fuzz/regressions
    mkdir "$tmp/o"
    # Assembler sources nested too deeply: status 1, the diagnostics (the first at
    # FILE:LINE:COL; tests/asm/test_diagnostics.cpp derives them), no program.
    deep="error: expression is nested too deeply (more than 256 levels)"
    while read -r name errors where message; do
      f=$regs/fuzz_asm/$name
      expect_status 1 "$bin/tpu-as" "$f" -o "$tmp/o/p.tpu"
      [ "$(head -1 "$tmp/err")" = "$f:$where: $message" ] ||
        { head -c 300 "$tmp/err"; fail "$name: first line"; }
      [ "$(tail -1 "$tmp/err")" = "${errors/_/ } generated." ] || fail "$name: not ${errors/_/ }"
    done <<LIST
deep_parens.s 1_error 1:260 $deep
deep_unary.s 1_error 1:260 $deep
long_sum.s 1_error 1:515 $deep
equ_chain.s 16_errors 6:31 error: symbol definitions nest too deeply (more than 1024 levels)
LIST
    [ "$(ls "$regs/fuzz_asm" | wc -l)" -eq 4 ] || fail "a new fuzz_asm regression needs a line here"
    # Configuration files: status 3 and one line naming the file, from both tools.
    printf 'HLT\n' >"$tmp/h.s"
    "$bin/tpu-as" "$tmp/h.s" -o "$tmp/h.tpu"
    for f in "$regs"/fuzz_config/*.json; do
      expect_status 3 "$bin/tpu-sim" run "$tmp/h.tpu" --config "$f" --out "$tmp/o/o.npy"
      { [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF "tpu-sim: error: $f: " "$tmp/err"; } ||
        { cat "$tmp/err"; fail "tpu-sim --config $(basename "$f")"; }
      expect_status 3 "$bin/tpu-as" "$tmp/h.s" --config "$f" -o "$tmp/o/p.tpu"
      { [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF "tpu-as: error: $f: " "$tmp/err"; } ||
        { cat "$tmp/err"; fail "tpu-as --config $(basename "$f")"; }
    done
    [ "$(listing "$tmp/o")" = "" ] || fail "files written: $(listing "$tmp/o")"
    ;;
  unexecuted_whm)  # tpu-sim run --out with a WHM past host memory that never runs (after HLT)
    # Found by inspection while fuzzing: the output was cut from past the end of host
    # memory (a heap overflow). The output is the whole host memory.
    printf 'HLT\nWHM 0, 2000000, 1\n' >"$tmp/a.s"
    "$bin/tpu-as" "$tmp/a.s" -o "$tmp/a.tpu"
    echo '{"host_rows": 64}' >"$tmp/c.json"
    expect_status 0 "$bin/tpu-sim" run "$tmp/a.tpu" --config "$tmp/c.json" --out "$tmp/o.npy"
    "$python" -c "
import numpy as np
o = np.load('$tmp/o.npy')
assert o.shape == (64, 8) and o.dtype == np.int8 and not o.any(), (o.shape, o.dtype)"
    ;;
  net_failure_outputs)  # tpu-sim net and topo: outputs only on success, --stats also on a fault
    export LC_ALL=C  # the order of listing
    # A float ONNX model (one MatMul), its calibration set, an input and one with a NaN.
    "$python" - "$tmp" <<'PY'
import sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper, save
d = sys.argv[1]
r = np.random.default_rng(3)
w = r.standard_normal((6, 4)).astype(np.float32)
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mm",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                      [numpy_helper.from_array(w, "w")])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{d}/m.onnx")
np.save(f"{d}/calib.npy", r.standard_normal((16, 6)).astype(np.float32))
x = r.standard_normal((3, 6)).astype(np.float32)
np.save(f"{d}/x.npy", x)
x[1, 2] = np.nan
np.save(f"{d}/nan.npy", x)
PY
    net() {  # net STATUS DIR INPUT [ARGS...]: every output of tpu-sim net into DIR
      local want=$1 dir=$2 input=$3
      shift 3
      mkdir "$dir"
      expect_status "$want" "$bin/tpu-sim" net "$tmp/m.onnx" --calibrate "$tmp/calib.npy" \
        --input "$input" --array 4 --out "$dir/y.npy" --float-out "$dir/f.npy" \
        --save-model "$dir/saved" --emit-asm "$dir/p.s" --report "$dir/r.csv" \
        --timeline "$dir/t.json" --stats "$dir/s.json" "$@"
    }
    net 0 "$tmp/ok" "$tmp/x.npy"
    [ "$(listing "$tmp/ok" | tr '\n' ' ')" = \
      "./f.npy ./p.s ./r.csv ./s.json ./saved/layer0_w.npy ./saved/model.json ./t.json ./y.npy " ] ||
      fail "a run that succeeds wrote: $(listing "$tmp/ok" | tr '\n' ' ')"
    # Status 4 (a cycle limit): --stats and --timeline, which show the fault; nothing else,
    # no temporary file.
    net 4 "$tmp/fault" "$tmp/x.npy" --max-cycles 5
    [ "$(listing "$tmp/fault" | tr '\n' ' ')" = "./s.json ./t.json " ] ||
      fail "a fault left: $(listing "$tmp/fault" | tr '\n' ' ')"
    "$python" -c "
import json
s = json.load(open('$tmp/fault/s.json'))
assert s['fault'].startswith('fault at pc ') and 'cycle limit' in s['fault'], s['fault']
assert s['programs'][-1]['fault'] == s['fault'] and s['programs'][-1]['cycles'] == 5, s['programs']
assert s['total']['cycles'] == 5 and s['network'], s['total']
assert json.load(open('$tmp/fault/t.json'))" || fail "net --stats and --timeline at a fault"
    # Status 3 after the import (NaN in the input): nothing at all.
    net 3 "$tmp/nan" "$tmp/nan.npy"
    [ "$(listing "$tmp/nan")" = "" ] || fail "an error left: $(listing "$tmp/nan" | tr '\n' ' ')"
    # An existing --save-model folder keeps what it had; a new run replaces its files.
    mkdir -p "$tmp/keep/saved"
    echo old >"$tmp/keep/saved/model.json"
    echo mine >"$tmp/keep/saved/notes.txt"
    expect_status 4 "$bin/tpu-sim" net "$tmp/m.onnx" --calibrate "$tmp/calib.npy" --input "$tmp/x.npy" \
      --array 4 --save-model "$tmp/keep/saved" --max-cycles 5
    [ "$(cat "$tmp/keep/saved/model.json")" = old ] || fail "a fault replaced --save-model's model.json"
    expect_status 0 "$bin/tpu-sim" net "$tmp/m.onnx" --calibrate "$tmp/calib.npy" --input "$tmp/x.npy" \
      --array 4 --save-model "$tmp/keep/saved"
    grep -q '"tpu-sim-net"' "$tmp/keep/saved/model.json" || fail "--save-model over an existing folder"
    [ "$(listing "$tmp/keep" | tr '\n' ' ')" = "./saved/layer0_w.npy ./saved/model.json ./saved/notes.txt " ] ||
      fail "--save-model over a folder: $(listing "$tmp/keep" | tr '\n' ' ')"
    # tpu-sim topo at a fault: --stats with the fault, no --report.
    mkdir "$tmp/topo"
    printf 'Layer,M,N,K,\ng1,8,8,8,\n' >"$tmp/g.csv"
    expect_status 4 "$bin/tpu-sim" topo "$tmp/g.csv" --array 4 --max-cycles 5 \
      --stats "$tmp/topo/s.json" --report "$tmp/topo/r.csv"
    [ "$(listing "$tmp/topo")" = "./s.json" ] || fail "topo at a fault left: $(listing "$tmp/topo")"
    "$python" -c "
import json
s = json.load(open('$tmp/topo/s.json'))
f = s['fault']
assert f['name'] == 'g1' and f['line'] == 2 and 'cycle limit' in f['message'], f
assert f['programs'][-1]['cycles'] == 5 and s['layers'] == [], s" || fail "topo --stats at a fault"
    ;;
  sweep_interrupt)  # Ctrl-C or SIGTERM on tpu-sim sweep: its runs killed and reaped, its folder gone
    { for _ in $(seq 3000); do echo "RHM 0, 0, 16383"; done; echo HLT; } >"$tmp/long.s"
    # Minutes of simulation at the detailed level (the fast one skips the DMA's cycles).
    printf '{"grid": {"preset": ["small4"]}, "detail": "detailed",
      "workloads": [{"kind": "run", "program": "long.s"}]}' >"$tmp/s.json"
    mkdir "$tmp/t"
    for sig in INT TERM; do
      set -m  # a job of its own, as a command typed at a terminal
      TMPDIR=$tmp/t "$bin/tpu-sim" sweep "$tmp/s.json" --jobs 1 >"$tmp/out" 2>"$tmp/err" &
      pid=$!
      set +m
      child=
      for _ in $(seq 100); do
        child=$(pgrep -P "$pid" || true)
        [ -z "$child" ] || break
        sleep 0.1
      done
      [ -n "$child" ] || fail "SIG$sig: no run started"
      sleep 0.3
      kill -"$sig" "$pid"
      status=0
      wait "$pid" || status=$?
      want=$((128 + $(kill -l "$sig")))
      [ "$status" -eq "$want" ] || fail "SIG$sig: the sweep exited $status, want $want"
      ! kill -0 "$child" 2>/dev/null || { kill -9 "$child"; fail "SIG$sig: the run $child outlived the sweep"; }
      [ -z "$(ls -A "$tmp/t")" ] || fail "SIG$sig: left $(ls -A "$tmp/t")"
    done
    ;;
  sweep_timeout)  # timeout_s (the file's) and --timeout: a run that takes longer is stopped
    { for _ in $(seq 3000); do echo "RHM 0, 0, 16383"; done; echo HLT; } >"$tmp/long.s"
    # The long run takes minutes; the quick one well under the limit, even on a busy machine.
    printf '{"grid": {"preset": ["small4"]}, "timeout_s": 5, "detail": "detailed", "workloads": [
      {"name": "long", "kind": "run", "program": "long.s"},
      {"name": "quick", "kind": "gemm", "m": 4, "k": 4, "n": 4}]}' >"$tmp/s.json"
    start=$(date +%s)
    expect_status 0 "$bin/tpu-sim" sweep "$tmp/s.json" --jobs 2 --out "$tmp/r.csv"
    [ $(($(date +%s) - start)) -lt 60 ] || fail "the time limit did not stop the run"
    "$python" - "$tmp/r.csv" <<'PY' || fail "timed-out row"
import csv, sys
rows = {r["workload"]: r for r in csv.DictReader(open(sys.argv[1]))}
long, quick = rows["long"], rows["quick"]
assert long["status"] == "timeout" and long["error_code"] == "124", long
assert "timeout_s = 5 s" in long["error"] and 5 <= float(long["wall_seconds"]) < 60, long
assert quick["status"] == "ok" and int(quick["cycles"]) > 0, quick
PY
    grep -q "2 runs (1 configurations x 2 workloads), 1 failed" "$tmp/err" || fail "summary: $(cat "$tmp/err")"
    # --timeout wins over the file's; a bad value is a usage error (2) or a file error (3).
    sed 's/"timeout_s": 5/"timeout_s": 1000/' "$tmp/s.json" >"$tmp/s2.json"
    expect_status 0 "$bin/tpu-sim" sweep "$tmp/s2.json" --jobs 2 --timeout 5 --out "$tmp/r2.csv"
    grep -q ',long,timeout,124,' "$tmp/r2.csv" || fail "--timeout: $(cat "$tmp/r2.csv")"
    expect_status 2 "$bin/tpu-sim" sweep "$tmp/s2.json" --timeout 0
    sed 's/"timeout_s": 5/"timeout_s": -1/' "$tmp/s.json" >"$tmp/s3.json"
    expect_status 3 "$bin/tpu-sim" sweep "$tmp/s3.json"
    grep -qx "tpu-sim: error: $tmp/s3.json: timeout_s: expected a number of seconds > 0, got -1" "$tmp/err" ||
      fail "timeout_s message: $(cat "$tmp/err")"
    ;;
  sweep_messages)  # a sweep file's errors: one line naming the file, the field and the workload
    printf '{"workloads": [{"kind": "gemm", "m": 4, "k": 4, "n": 4}], "max_cycles": -5}' >"$tmp/c.json"
    expect_status 3 "$bin/tpu-sim" sweep "$tmp/c.json"
    grep -qx "tpu-sim: error: $tmp/c.json: max_cycles: expected a number of cycles (an integer >= 0), got -5" \
      "$tmp/err" || fail "max_cycles message: $(cat "$tmp/err")"
    printf '{"workloads": [{"kind": "gemm", "m": 4, "k": 4, "n": 4}, {"kind": "gemm", "m": 4, "k": 4, "n": 4},
      {"kind": "gemm", "m": -5, "k": 4, "n": 4}, {"kind": "gemm", "m": 4, "k": 4, "n": 4, "act": "nope"}]}' \
      >"$tmp/w.json"
    expect_status 0 "$bin/tpu-sim" sweep "$tmp/w.json" --out "$tmp/r.csv"
    "$python" - "$tmp/r.csv" <<'PY' || fail "row errors"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [r["workload"] for r in rows] == ["gemm0", "gemm1", "gemm2", "gemm3"], rows
assert rows[2]["error"] == 'workload gemm2: "m" must be an integer >= 0, not -5', rows[2]["error"]
assert rows[2]["error_code"] == "3" and rows[3]["error_code"] == "2", rows
assert "nope" in rows[3]["error"], rows[3]["error"]
PY
    printf '{"workloads": [{"kind": "gemm", "m": 4000000000000, "k": 4000000000000, "n": 4}]}' >"$tmp/big.json"
    expect_status 0 "$bin/tpu-sim" sweep "$tmp/big.json" --out "$tmp/b.csv"
    grep -qF 'workload gemm0: a 4000000000000 x 4000000000000 matrix is too large' "$tmp/b.csv" ||
      fail "a huge GEMM: $(cat "$tmp/b.csv")"
    # A grid of 10^10 points in a few bytes: refused before any point is made
    # (it expanded until memory ran out; fuzz_sweep's finding).
    printf '{"grid": {"a": [1,2,3,4,5,6,7,8,9,10], "b": [1,2,3,4,5,6,7,8,9,10], "c": [1,2,3,4,5,6,7,8,9,10],
      "d": [1,2,3,4,5,6,7,8,9,10], "e": [1,2,3,4,5,6,7,8,9,10], "f": [1,2,3,4,5,6,7,8,9,10],
      "g": [1,2,3,4,5,6,7,8,9,10], "h": [1,2,3,4,5,6,7,8,9,10], "i": [1,2,3,4,5,6,7,8,9,10],
      "j": [1,2,3,4,5,6,7,8,9,10]}, "workloads": [{"kind": "gemm", "m": 4, "k": 4, "n": 4}]}' >"$tmp/grid.json"
    expect_status 3 timeout 60 "$bin/tpu-sim" sweep "$tmp/grid.json"
    grep -qx "tpu-sim: error: $tmp/grid.json: grid: more than 1000000 points (the product of the lists' lengths)" \
      "$tmp/err" || fail "a huge grid: $(cat "$tmp/err")"
    # An empty workload name (accepted before; fuzz_sweep's finding).
    printf '{"workloads": [{"kind": "gemm", "name": "", "m": 4, "k": 4, "n": 4}]}' >"$tmp/n.json"
    expect_status 3 "$bin/tpu-sim" sweep "$tmp/n.json"
    grep -qx "tpu-sim: error: $tmp/n.json: workload 0: \"name\" is empty" "$tmp/err" ||
      fail "an empty name: $(cat "$tmp/err")"
    # A name with a newline would split every message naming it (fuzz_sweep).
    printf '{"workloads": [{"kind": "gemm", "name": "a\\nb", "m": 4, "k": 4, "n": 4}]}' >"$tmp/nl.json"
    expect_status 3 "$bin/tpu-sim" sweep "$tmp/nl.json"
    grep -qx "tpu-sim: error: $tmp/nl.json: workload 0: \"name\" holds a control character (byte 0x0a)" "$tmp/err" ||
      fail "a name with a newline: $(cat "$tmp/err")"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "ok: $case_name"
