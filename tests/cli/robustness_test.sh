#!/usr/bin/env bash
# Robustness of the command-line tools: equal runs give byte-identical
# outputs, outputs are written whole or not at all (after a fault, an error or
# Ctrl-C), and inputs the fuzzers (tests/fuzz) found crashes with stay fixed.
#   robustness_test.sh CASE BIN_DIR SOURCE_DIR
set -euo pipefail
case_name=$1
bin=$2
src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python=/usr/bin/python3  # Debian's python3-numpy

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_status WANT CMD... : runs CMD (stdout to $tmp/out, stderr to $tmp/err), checks the status.
expect_status() {
  local want=$1
  shift
  local got=0
  "$@" >"$tmp/out" 2>"$tmp/err" || got=$?
  [ "$got" -eq "$want" ] || { cat "$tmp/err" >&2; fail "'$*' exited $got, want $want"; }
}

# The files of folder $1, one per line, hidden ones included.
listing() { (cd "$1" && find . -type f | sort); }

case "$case_name" in
  determinism)  # the same program, inputs and config give identical bytes on every run
    data=$src/programs/data/mlp2
    "$bin/tpu-as" "$src/programs/mlp2.s" -o "$tmp/p.tpu"
    "$bin/tpu-as" "$src/programs/mlp2.s" -o "$tmp/p2.tpu"
    cmp "$tmp/p.tpu" "$tmp/p2.tpu" || fail "tpu-as output differs between runs"
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
        --stats "$tmp/g.json" --emit-asm "$tmp/g.s" --trace --requant 77,12,-5 --act tanh --array 4
      mv "$tmp/out" "$tmp/run$run/gemm.stdout"
      mv "$tmp/o.npy" "$tmp/s.json" "$tmp/w.vcd" "$tmp/w.gtkw" "$tmp/c.npy" "$tmp/g.json" \
        "$tmp/g.s" "$tmp/run$run/"
      # A new second: SystemC's VCD header would otherwise carry a different $date.
      [ "$run" -eq 2 ] || sleep 1.1
    done
    [ "$(listing "$tmp/run1")" = "$(listing "$tmp/run2")" ] || fail "different files"
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
    # Interrupted (Ctrl-C) in the middle of a long run with a waveform: neither --out nor
    # the VCD or .gtkw appear, and an existing --out is left as it was.
    mkdir "$tmp/i"
    { for _ in $(seq 2000); do echo "RHM 0, 0, 16383"; done; echo "WHM 0, 0, 1"; echo HLT; } \
      >"$tmp/long.s"
    "$bin/tpu-as" "$tmp/long.s" -o "$tmp/long.tpu" --array 4
    cp "$tmp/keep" "$tmp/i/o.npy"
    set -m  # a job of its own, so that it does not ignore SIGINT as background jobs do
    "$bin/tpu-sim" run "$tmp/long.tpu" --out "$tmp/i/o.npy" --vcd "$tmp/i/w.vcd" \
      --stats "$tmp/i/s.json" >/dev/null 2>&1 &
    pid=$!
    set +m
    sleep 1
    kill -0 "$pid" 2>/dev/null || fail "the long run ended within a second; nothing to interrupt"
    kill -INT "$pid"
    status=0
    wait "$pid" || status=$?
    [ "$status" -eq 130 ] || fail "interrupted run exited $status, want 130 (SIGINT)"
    cmp "$tmp/keep" "$tmp/i/o.npy" || fail "an interrupted run changed --out"
    for f in w.vcd w.gtkw s.json; do [ ! -e "$tmp/i/$f" ] || fail "an interrupted run left $f"; done
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
