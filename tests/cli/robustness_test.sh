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
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "ok: $case_name"
