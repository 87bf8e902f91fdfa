#!/usr/bin/env bash
# Waveforms of tpu-sim's RTL engine: --vcd and --fst with --engine rtl and
# both, checked for form, against the run's statistics and against the
# SystemC model's waveform (tests/cli/waveform_check.py). One case per CTest
# test; needs the small4 RTL build with tracing (TPU_RTL_TRACE).
#   waveform_test.sh CASE BIN_DIR SOURCE_DIR
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"

check() { /usr/bin/python3 "$src/tests/cli/waveform_check.py" "$@" || fail "waveform_check.py $*"; }

# only_files DIR NAME... : DIR holds exactly these files (no temporary left behind).
only_files() {
  local dir=$1
  shift
  local want got
  want=$(printf '%s\n' "$@" | sort)
  got=$(ls -A "$dir" | sort)
  [ "$want" = "$got" ] || fail "$dir holds '$(echo $got)', want '$(echo $want)'"
}

# A program at N=4 that keeps every unit busy, with hazards between them.
cat >"$tmp/m.s" <<'EOF'
.array 4
        RHM    0, 0, 8
        RW     0
        RW     1
        MMC.SO 0, 0, 8
        ACT.R  0, 8, 8
        MMC.S  8, 8, 8
        ACT    8, 16, 8
        WHM    16, 8, 8
        HLT
EOF
expect_status 0 "$bin/tpu-as" "$tmp/m.s" -o "$tmp/m.tpu"
/usr/bin/python3 -c "
import numpy as np
r = np.random.default_rng(7)
np.save('$tmp/h.npy', r.integers(-128, 128, (16, 4), dtype=np.int8))
np.save('$tmp/w.npy', r.integers(-128, 128, (2, 4, 4), dtype=np.int8))"
run=("$bin/tpu-sim" run "$tmp/m.tpu" --hostmem "$tmp/h.npy" --weights "$tmp/w.npy")
mkdir "$tmp/a" "$tmp/b"

case "$case_name" in
  rtl_vcd)  # --engine rtl --vcd: the whole core, agreeing with the statistics and the SystemC waveform
    expect_status 0 "${run[@]}" --vcd "$tmp/s.vcd"
    expect_status 0 "${run[@]}" --engine rtl --stats "$tmp/plain.json" --out "$tmp/plain.npy"
    expect_status 0 "${run[@]}" --engine rtl --vcd "$tmp/a/r.vcd" --stats "$tmp/r.json" \
      --out "$tmp/r.npy"
    only_files "$tmp/a" r.vcd r.gtkw
    # Tracing changes nothing in the run.
    cmp "$tmp/plain.json" "$tmp/r.json" || fail "statistics differ with --vcd"
    cmp "$tmp/plain.npy" "$tmp/r.npy" || fail "output differs with --vcd"
    grep -qx "\[dumpfile\] \"$tmp/a/r.vcd\"" "$tmp/a/r.gtkw" || fail ".gtkw does not name the VCD"
    ! grep -q '^\$date' "$tmp/a/r.vcd" || fail "the VCD has a \$date"
    check rtl "$tmp/a/r.vcd" "$tmp/a/r.gtkw" "$tmp/r.json"
    check agree "$tmp/s.vcd" "$tmp/a/r.vcd"
    # The same run gives the same bytes; a name without .vcd gets it.
    expect_status 0 "${run[@]}" --engine rtl --vcd "$tmp/b/r"
    only_files "$tmp/b" r.vcd r.gtkw
    cmp "$tmp/a/r.vcd" "$tmp/b/r.vcd" || fail "VCDs of equal runs differ"
    # A fault: status 4, and the waveform shows it.
    printf 'RHM 0, 30000, 1\nHLT\n' >"$tmp/f.s"
    expect_status 0 "$bin/tpu-as" "$tmp/f.s" -o "$tmp/f.tpu" --array 4
    expect_status 4 "$bin/tpu-sim" run "$tmp/f.tpu" --engine rtl --vcd "$tmp/f.vcd"
    check fault "$tmp/f.vcd"
    ;;
  rtl_fst)  # --fst: FST files equal to the VCD, for the RTL and the SystemC engine
    expect_status 0 "${run[@]}" --engine rtl --fst "$tmp/a/r.fst"
    only_files "$tmp/a" r.fst r.gtkw
    # An FST starts with its header block: type 0, then the block's length, 329.
    [ "$(od -An -tx1 -N9 "$tmp/a/r.fst" | tr -d ' \n')" = 000000000000000149 ] ||
      fail "r.fst does not start with an FST header"
    grep -qx "\[dumpfile\] \"$tmp/a/r.fst\"" "$tmp/a/r.gtkw" || fail ".gtkw does not name the FST"
    expect_status 0 "${run[@]}" --engine rtl --fst "$tmp/b/r"
    only_files "$tmp/b" r.fst r.gtkw
    cmp "$tmp/a/r.fst" "$tmp/b/r.fst" || fail "FSTs of equal runs differ"
    expect_status 0 "${run[@]}" --engine rtl --vcd "$tmp/r.vcd" --stats "$tmp/r.json"
    sed "s|$tmp/r.vcd|$tmp/a/r.fst|" "$tmp/r.gtkw" | cmp - "$tmp/a/r.gtkw" ||
      fail "the FST's .gtkw differs from the VCD's"
    expect_status 0 "${run[@]}" --fst "$tmp/a/s.fst"
    expect_status 0 "${run[@]}" --vcd "$tmp/s.vcd"
    only_files "$tmp/a" r.fst r.gtkw s.fst s.gtkw
    if command -v fst2vcd >/dev/null; then
      fst2vcd "$tmp/a/r.fst" >"$tmp/r2.vcd" 2>/dev/null || fail "fst2vcd r.fst"
      check same "$tmp/r.vcd" "$tmp/r2.vcd"
      check rtl "$tmp/r2.vcd" "$tmp/a/r.gtkw" "$tmp/r.json"
      fst2vcd "$tmp/a/s.fst" >"$tmp/s2.vcd" 2>/dev/null || fail "fst2vcd s.fst"
      check same "$tmp/s.vcd" "$tmp/s2.vcd"
    else
      echo "note: no fst2vcd (Debian package gtkwave): FST contents not checked"
    fi
    ;;
  engines)  # --engine both writes both waveforms; usage and file errors
    expect_status 0 "${run[@]}" --engine both --vcd "$tmp/a/b.vcd"
    only_files "$tmp/a" b.vcd b.gtkw b.rtl.vcd b.rtl.gtkw
    grep -q '^\$scope module SystemC' "$tmp/a/b.vcd" || fail "b.vcd is not the SystemC waveform"
    grep -q '^ *\$scope module controller' "$tmp/a/b.rtl.vcd" || fail "b.rtl.vcd is not the RTL's"
    grep -qx "\[dumpfile\] \"$tmp/a/b.rtl.vcd\"" "$tmp/a/b.rtl.gtkw" || fail "b.rtl.gtkw"
    check agree "$tmp/a/b.vcd" "$tmp/a/b.rtl.vcd"
    expect_status 0 "${run[@]}" --engine both --fst "$tmp/b/b.fst"
    only_files "$tmp/b" b.fst b.gtkw b.rtl.fst b.rtl.gtkw
    expect_status 0 "$bin/tpu-sim" run --help
    grep -q "NAME.rtl.vcd" "$tmp/out" || fail "--help does not say where --engine both puts the RTL's"
    expect_status 2 "${run[@]}" --engine rtl --vcd "$tmp/x.vcd" --fst "$tmp/x.fst"
    expect_status 2 "${run[@]}" --detail fast --fst "$tmp/x.fst"
    expect_status 3 "${run[@]}" --engine rtl --fst "$tmp/missing/x.fst"
    grep -qx "tpu-sim: error: $tmp/missing/x.fst: cannot write: No such file or directory" \
      "$tmp/err" || { cat "$tmp/err"; fail "unwritable --fst message"; }
    expect_status 3 "${run[@]}" --engine rtl --vcd "$tmp/missing/x.vcd"
    expect_status 3 "${run[@]}" --engine both --vcd "$tmp/x.vcd" --preset tpuv1 --array 4
    grep -q "no RTL build for this configuration" "$tmp/err" || fail "no-build message"
    [ ! -e "$tmp/x.vcd" ] || fail "a waveform was written without an RTL build"
    # ARG: TPU_RTL_TRACE_MAX_N when tpuv1/128 is built: untraced below 128,
    # the RTL refuses a waveform there and names the -D that builds one.
    if [ -n "$arg" ] && [ "$arg" -lt 128 ]; then
      printf '.array 128\n        HLT\n' >"$tmp/h128.s"
      expect_status 0 "$bin/tpu-as" "$tmp/h128.s" -o "$tmp/h128.tpu"
      expect_status 2 "$bin/tpu-sim" run "$tmp/h128.tpu" --preset tpuv1 --array 128 --engine rtl \
        --vcd "$tmp/y.vcd"
      grep -q -- "has no tracing.*-DTPU_RTL_TRACE_MAX_N=128" "$tmp/err" || { cat "$tmp/err"; fail "untraced message"; }
      [ ! -e "$tmp/y.vcd" ] || fail "a waveform was written by an untraced build"
      expect_status 0 "$bin/tpu-sim" run "$tmp/h128.tpu" --preset tpuv1 --array 128 --engine rtl
    fi
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "ok: $case_name"
